// The RMSNorm kernels: a row's norm (the first input norm, the final norm), a layer's q/k/v head
// norms with partial proportional RoPE and, on decode passes, the KV write, and the sandwich-norm
// residual update fused with the next sublayer's input norm. One block per row (per head for the
// head norms); each row is read once and written once, with the sums of squares reduced in fp32
// across the block.
//
// Fusion saves launches, not bytes: at batch 1 each of these kernels moves a few tens of KB, so
// what it costs is its launch and its dependent latency (a few us each in a graph). QkvNorm replaces
// two or three norm launches and the KV write of every layer; NormResidual's next norm replaces
// the input norm of the MLP and of the next layer.
#include <cuda_runtime.h>

#include "engine/cuda/cuda_status.h"
#include "engine/cuda/grid_dependency.h"
#include "engine/cuda/kernel_loading.h"
#include "engine/cuda/kernel_math.h"
#include "engine/cuda/kernels.h"

namespace temper::engine::cuda {
namespace {

using detail::S;

constexpr int kMaxThreads = 1024;
constexpr int kHeadThreads = 256;  // a head of up to 512 dims: one RoPE pair per thread

// Threads per row of n: hidden rows (thousands of floats) take a whole block's worth, so each
// thread's loads are few and independent; a head's 256-512 take 256.
int RowThreads(int n) { return n >= 2048 ? kMaxThreads : kHeadThreads; }

// The sum of v over the block; every thread gets it. `shared` holds one float per warp.
__device__ float BlockSum(float v, float* shared) {
  for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // `shared` may still be read from a previous call
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  float s = 0;
  for (int i = 0; i < static_cast<int>(blockDim.x / 32); ++i) s += shared[i];
  return s;
}

// out = RmsNorm(x) · (w_offset + w) over one row of n (w null: no weight), then RoPE on the pairs
// (j, j + n/2), j < rope.angles, at `pos` when rope.cos is set and pos >= 0, then · out_scale (a
// query's score scale; 1 elsewhere); with `store`, each output is also written there in bf16. Each
// thread owns whole elements (whole pairs with RoPE), so in place is fine.
__device__ void NormRow(const float* x, float* out, const uint16_t* w, float w_offset, int n, float eps,
                        const RopeView& rope, int64_t pos, float out_scale, uint16_t* store, float* shared) {
  float sum_sq = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) sum_sq += x[i] * x[i];
  const float scale = math::RmsScale(BlockSum(sum_sq, shared), n, eps);
  if (!rope.cos || pos < 0) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      float v = x[i] * scale;
      if (w) v *= w_offset + math::Bf16ToFloat(w[i]);
      if (out_scale != 1.0f) v *= out_scale;
      out[i] = v;
      if (store) store[i] = math::FloatToBf16(v);
    }
    return;
  }
  const int half = n / 2;
  for (int j = threadIdx.x; j < half; j += blockDim.x) {
    float a = x[j] * scale, b = x[j + half] * scale;
    if (w) {
      a *= w_offset + math::Bf16ToFloat(w[j]);
      b *= w_offset + math::Bf16ToFloat(w[j + half]);
    }
    if (j < rope.angles) math::RopePair(a, b, rope.cos[pos * rope.angles + j], rope.sin[pos * rope.angles + j]);
    if (out_scale != 1.0f) {
      a *= out_scale;
      b *= out_scale;
    }
    out[j] = a;
    out[j + half] = b;
    if (store) {
      store[j] = math::FloatToBf16(a);
      store[j + half] = math::FloatToBf16(b);
    }
  }
}

__global__ void RmsNormKernel(const float* x, float* out, const uint16_t* w, float w_offset, int n, float eps) {
  AwaitPriorGrid();
  __shared__ float shared[kMaxThreads / 32];
  const int64_t at = static_cast<int64_t>(blockIdx.x) * n;
  NormRow(x + at, out + at, w, w_offset, n, eps, RopeView{}, -1, 1.0f, nullptr, shared);
}

// One block per (row, head) over the row's q heads, then its k heads, then (layers with their own
// V) its v heads.
__global__ void QkvNormKernel(KvLayerView kv, float* q, float* k, float* v, const uint16_t* q_norm, int q_heads,
                              float eps, RowTables t, bool write_kv) {
  AwaitPriorGrid();
  __shared__ float shared[kHeadThreads / 32];
  const int hd = kv.head_dim, kv_heads = kv.kv_heads;
  const bool k_eq_v = kv.k == nullptr;
  const int heads = q_heads + kv_heads * (k_eq_v ? 1 : 2);
  const int r = blockIdx.x / heads, h = blockIdx.x % heads;
  const int64_t pos = t.positions[r];
  if (h < q_heads) {
    float* head = q + (static_cast<int64_t>(r) * q_heads + h) * hd;
    NormRow(head, head, q_norm, kv.norm_offset, hd, eps, kv.rope, pos, kv.score_scale, nullptr, shared);
    return;
  }
  const bool is_k = !k_eq_v && h < q_heads + kv_heads;
  const int kvh = (h - q_heads) % kv_heads;
  const int64_t at = (static_cast<int64_t>(r) * kv_heads + kvh) * hd;
  uint16_t* store = nullptr;
  if (write_kv && !math::KvWriteSkips(pos, kv.sliding, kv.ring, t.chunk_end[r])) {
    const int slot = t.slots[r];
    const int64_t row = math::KvRow(pos, kv.sliding, kv.ring, slot,
                                    t.blocks + static_cast<int64_t>(slot) * t.max_blocks, kv.block_tokens);
    store = (is_k ? kv.k : kv.v) + row * kv_heads * hd + static_cast<int64_t>(kvh) * hd;
  }
  if (is_k) {
    NormRow(k + at, k + at, kv.k_norm, kv.norm_offset, hd, eps, kv.rope, pos, 1.0f, store, shared);
  } else if (!kv.value_norm) {  // Gemma 3: V as projected, stored as it is
    if (store) {
      for (int i = threadIdx.x; i < hd; i += blockDim.x) store[i] = math::FloatToBf16(v[at + i]);
    }
  } else {  // V: v_norm of its own projection, or of the raw k_proj output on k_eq_v layers
    NormRow((k_eq_v ? k : v) + at, v + at, nullptr, 0.0f, hd, eps, RopeView{}, -1, 1.0f, store, shared);
  }
}

// The row's elements a NormResidualKernel thread holds: threadIdx.x + e · blockDim.x, e < this.
constexpr int kResidualPerThread = 8;
static_assert(kResidualPerThread * kMaxThreads == kNormResidualMaxWidth);

// Every input of the row (branch, residual, both weights) is loaded into registers before the first
// sum, one trip to memory instead of one a phase: at batch 1 this kernel's time is its dependent
// latency (5.8 us a launch on an H200 with three trips, 120 launches a step of the 31B). The sums
// run over each thread's elements in the same order as a strided loop's.
__global__ void __launch_bounds__(kMaxThreads)
    NormResidualKernel(float* x, const float* branch, const uint16_t* w, int n, float eps, float scale,
                       const uint16_t* next_w, float* next_out, float w_offset) {
  AwaitPriorGrid();
  __shared__ float shared[kMaxThreads / 32];
  const int64_t at = static_cast<int64_t>(blockIdx.x) * n;
  const float* br = branch + at;
  float* xr = x + at;
  float b[kResidualPerThread], xv[kResidualPerThread], wv[kResidualPerThread], nw[kResidualPerThread];
#pragma unroll
  for (int e = 0; e < kResidualPerThread; ++e) {
    const int i = threadIdx.x + e * blockDim.x;
    const bool in_row = i < n;
    b[e] = in_row ? br[i] : 0.0f;
    xv[e] = in_row ? xr[i] : 0.0f;
    wv[e] = in_row ? w_offset + math::Bf16ToFloat(w[i]) : 0.0f;
    nw[e] = in_row && next_w ? w_offset + math::Bf16ToFloat(next_w[i]) : 1.0f;
  }
  float sum_sq = 0;
#pragma unroll
  for (int e = 0; e < kResidualPerThread; ++e) sum_sq += b[e] * b[e];
  const float inv = math::RmsScale(BlockSum(sum_sq, shared), n, eps);
  float next_sum_sq = 0;
#pragma unroll
  for (int e = 0; e < kResidualPerThread; ++e) {
    const int i = threadIdx.x + e * blockDim.x;
    if (i >= n) continue;
    xv[e] = (xv[e] + (b[e] * inv) * wv[e]) * scale;
    xr[i] = xv[e];
    next_sum_sq += xv[e] * xv[e];
  }
  if (!next_out) return;
  const float next_scale = math::RmsScale(BlockSum(next_sum_sq, shared), n, eps);
  float* out = next_out + at;
#pragma unroll
  for (int e = 0; e < kResidualPerThread; ++e) {
    const int i = threadIdx.x + e * blockDim.x;
    if (i < n) out[i] = next_w ? xv[e] * next_scale * nw[e] : xv[e] * next_scale;
  }
}

}  // namespace

Status LaunchRmsNorm(const float* x, float* out, const uint16_t* w, int rows, int n, float eps, float weight_offset,
                     cudaStream_t stream) {
  if (rows < 1 || n < 1) return Status::InvalidArgument("RMSNorm: rows " + S(rows) + ", n " + S(n));
  RmsNormKernel<<<rows, RowThreads(n), 0, stream>>>(x, out, w, weight_offset, n, eps);
  TEMPER_CUDA_TRY(cudaGetLastError());
  return Status::OK();
}

Status LaunchQkvNorm(const KvLayerView& kv, float* q, float* k, float* v, const uint16_t* q_norm, int rows, int q_heads,
                     float eps, const RowTables& t, bool write_kv, cudaStream_t stream) {
  const int hd = kv.head_dim;
  if (rows < 1 || q_heads < 1 || kv.kv_heads < 0 || hd < 2 || hd % 2 != 0 || hd > 2 * kHeadThreads ||
      kv.rope.angles > hd / 2 || !kv.rope.cos || !kv.rope.sin || (kv.k && !kv.k_norm) || (write_kv && !kv.v)) {
    return Status::InvalidArgument("q/k/v norms: rows " + S(rows) + ", q_heads " + S(q_heads) + ", kv_heads " +
                                   S(kv.kv_heads) + ", head_dim " + S(hd) + " (even, at most " + S(2 * kHeadThreads) +
                                   "), angles " + S(kv.rope.angles) + " (RoPE tables and k_norm required)");
  }
  const int heads = q_heads + kv.kv_heads * (kv.k ? 2 : 1);
  QkvNormKernel<<<rows * heads, kHeadThreads, 0, stream>>>(kv, q, k, v, q_norm, q_heads, eps, t, write_kv);
  TEMPER_CUDA_TRY(cudaGetLastError());
  return Status::OK();
}

Status LaunchNormResidual(float* x, const float* branch, const uint16_t* w, int rows, int n, float eps, float scale,
                          const uint16_t* next_w, float* next_out, float weight_offset, cudaStream_t stream) {
  if (rows < 1 || n < 1 || !w || n > kResidualPerThread * RowThreads(n)) {
    return Status::InvalidArgument("norm-residual: rows " + S(rows) + ", n " + S(n) + " (weight required; n at most " +
                                   S(kNormResidualMaxWidth) + ")");
  }
  NormResidualKernel<<<rows, RowThreads(n), 0, stream>>>(x, branch, w, n, eps, scale, next_w, next_out, weight_offset);
  TEMPER_CUDA_TRY(cudaGetLastError());
  return Status::OK();
}

Status LoadNormKernels(AwaitingKernels* awaiting) {
  TEMPER_RETURN_IF_ERROR(LoadKernelCode(RmsNormKernel, "RmsNormKernel", awaiting));
  TEMPER_RETURN_IF_ERROR(LoadKernelCode(QkvNormKernel, "QkvNormKernel", awaiting));
  TEMPER_RETURN_IF_ERROR(LoadKernelCode(NormResidualKernel, "NormResidualKernel", awaiting));
  return Status::OK();
}

}  // namespace temper::engine::cuda
