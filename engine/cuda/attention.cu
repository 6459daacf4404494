// Attention over the KV cache and this pass's fresh keys: split-KV ("flash decoding"). A row has
// one query per head but up to the whole context of keys, so each row's keys are cut into
// `splits` parts, each walked by one warp with an online softmax (running max, sum and a value
// accumulator in registers, head_dim / 32 contiguous dims per lane); a second kernel merges the
// parts in order. Decode rows use many splits (few rows, long contexts); prefill rows use one
// split per row and write their output directly.
//
// Keys of k_eq_v layers are rebuilt from the single cached V as RoPE(V ⊙ k_norm) in registers, so
// global layers read one copy. Fresh keys (this pass's, not yet in the cache) are rounded to bf16
// first and rebuilt the same way, so a key reads the same whether it comes from the cache or not,
// and incremental decode equals a full recompute. The addressing and merge math is
// kernel_math.h's, which the CPU tests check.
#include <cuda_runtime.h>

#include "engine/cuda/cuda_status.h"
#include "engine/cuda/kernel_loading.h"
#include "engine/cuda/kernel_math.h"
#include "engine/cuda/kernels.h"

namespace temper::engine::cuda {
namespace {

using detail::S;

constexpr int kWarps = 4;

__global__ void KvWriteKernel(KvLayerView kv, const float* k, const float* v, RowTables t) {
  const int r = blockIdx.x;
  const int64_t pos = t.positions[r];
  if (pos < 0) return;
  if (kv.sliding && pos < t.chunk_end[r] - kv.window) return;  // overwritten later in this chunk
  const int width = kv.kv_heads * kv.head_dim;
  const int slot = t.slots[r];
  const int64_t row =
      math::KvRow(pos, kv.sliding, kv.window, slot, t.blocks + int64_t{slot} * t.max_blocks, kv.block_tokens);
  for (int i = threadIdx.x; i < width; i += blockDim.x) {
    kv.v[row * width + i] = math::FloatToBf16(v[int64_t{r} * width + i]);
    if (kv.k) kv.k[row * width + i] = math::FloatToBf16(k[int64_t{r} * width + i]);
  }
}

// DPL contiguous bf16 values at p (16-byte loads where DPL allows).
template <int DPL>
__device__ __forceinline__ void LoadBf16(const uint16_t* p, float* out) {
  if constexpr (DPL % 8 == 0) {
#pragma unroll
    for (int c = 0; c < DPL / 8; ++c) {
      const uint4 u = reinterpret_cast<const uint4*>(p)[c];
      const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        out[8 * c + 2 * i] = __uint_as_float(w[i] << 16);
        out[8 * c + 2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < DPL; ++i) out[i] = math::Bf16ToFloat(p[i]);
  }
}

// Lane l holds dims [l·DPL, (l+1)·DPL); dim j < head_dim/2 pairs with j + head_dim/2, held by lane
// l + 16 at the same index. RoPE at table row `pos` (point 8).
template <int DPL>
__device__ __forceinline__ void RopeLanes(float* x, const RopeView& rope, int64_t pos, int lane) {
  const float* c = rope.cos + pos * rope.angles;
  const float* s = rope.sin + pos * rope.angles;
  const bool low = lane < 16;
#pragma unroll
  for (int i = 0; i < DPL; ++i) {
    const float partner = __shfl_xor_sync(0xffffffffu, x[i], 16);
    const int j = (lane % 16) * DPL + i;
    if (j < rope.angles) {
      float a = low ? x[i] : partner, b = low ? partner : x[i];
      math::RopePair(a, b, c[j], s[j]);
      x[i] = low ? a : b;
    }
  }
}

// One warp: query head h of row r over split `split` of its visible keys.
template <int DPL>
__global__ void SplitKernel(KvLayerView kv, const float* q, const float* fresh_k, const float* fresh_v, RowTables t,
                            HeadRange heads, int splits, float* partials, float* out) {
  constexpr int kHd = DPL * 32;
  const int lane = threadIdx.x % 32;
  const int task = blockIdx.x * kWarps + threadIdx.x / 32;
  if (task >= heads.q_heads * splits) return;
  const int h = task / splits, split = task % splits;
  const int r = blockIdx.y;
  const int kvh = (heads.q_head_begin + h) / heads.group - heads.kv_head_begin;
  const int width = kv.kv_heads * kHd;
  const int64_t pos = t.positions[r];
  const int slot = pos < 0 ? 0 : t.slots[r];
  const int64_t chunk_start = t.chunk_start[r];
  const int32_t* table = t.blocks + int64_t{slot} * t.max_blocks;

  float qr[DPL], acc[DPL], kn[DPL];
  const float* qp = q + (int64_t{r} * heads.q_heads + h) * kHd + lane * DPL;
#pragma unroll
  for (int i = 0; i < DPL; ++i) {
    qr[i] = qp[i];
    acc[i] = 0;
  }
  if (!kv.k) LoadBf16<DPL>(kv.k_norm + lane * DPL, kn);
  math::SoftmaxState state{-INFINITY, 0.0f};
  if (pos >= 0) {
    const int64_t lo = math::WindowStart(pos, kv.window, kv.sliding);
    const math::SplitSpan span = math::SplitKeys(pos - lo + 1, splits, split);
    for (int64_t p = lo + span.begin; p < lo + span.end; ++p) {
      float key[DPL], val[DPL];
      const int64_t offset = int64_t{kvh} * kHd + lane * DPL;
      if (p >= chunk_start) {
        const int64_t fr = t.first_row[r] + (p - chunk_start);
        const float* vp = fresh_v + fr * width + offset;
        const float* kp = fresh_k + fr * width + offset;
#pragma unroll
        for (int i = 0; i < DPL; ++i) {
          val[i] = math::RoundToBf16(vp[i]);
          if (kv.k) key[i] = math::RoundToBf16(kp[i]);
        }
      } else {
        const int64_t row = math::KvRow(p, kv.sliding, kv.window, slot, table, kv.block_tokens);
        LoadBf16<DPL>(kv.v + row * width + offset, val);
        if (kv.k) LoadBf16<DPL>(kv.k + row * width + offset, key);
      }
      if (!kv.k) {
        // Point 6: K = RoPE(V ⊙ k_norm) at the key's own position.
#pragma unroll
        for (int i = 0; i < DPL; ++i) key[i] = val[i] * kn[i];
        RopeLanes<DPL>(key, kv.rope, p, lane);
      }
      float dot = 0;
#pragma unroll
      for (int i = 0; i < DPL; ++i) dot += qr[i] * key[i];
#pragma unroll
      for (int off = 16; off > 0; off /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, off);
      float sa, sb;
      math::MergeSoftmax(state, math::SoftmaxState{dot, 1.0f}, sa, sb);
#pragma unroll
      for (int i = 0; i < DPL; ++i) acc[i] = acc[i] * sa + val[i] * sb;
    }
  }
  if (splits == 1) {
    float* o = out + (int64_t{r} * heads.q_heads + h) * kHd + lane * DPL;
    const float inv = state.sum > 0 ? 1.0f / state.sum : 0.0f;
#pragma unroll
    for (int i = 0; i < DPL; ++i) o[i] = acc[i] * inv;
    return;
  }
  float* part = partials + ((int64_t{r} * heads.q_heads + h) * splits + split) * (kHd + 2);
#pragma unroll
  for (int i = 0; i < DPL; ++i) part[lane * DPL + i] = acc[i];
  if (lane == 0) {
    part[kHd] = state.max;
    part[kHd + 1] = state.sum;
  }
}

__global__ void MergeKernel(const float* partials, float* out, int q_heads, int hd, int splits) {
  const int h = blockIdx.x, r = blockIdx.y;
  const float* part = partials + (int64_t{r} * q_heads + h) * splits * (hd + 2);
  for (int d = threadIdx.x; d < hd; d += blockDim.x) {
    math::SoftmaxState state{-INFINITY, 0.0f};
    float acc = 0;
    for (int s = 0; s < splits; ++s) {
      const float* ps = part + int64_t{s} * (hd + 2);
      float sa, sb;
      math::MergeSoftmax(state, math::SoftmaxState{ps[hd], ps[hd + 1]}, sa, sb);
      acc = acc * sa + ps[d] * sb;
    }
    out[(int64_t{r} * q_heads + h) * hd + d] = state.sum > 0 ? acc / state.sum : 0.0f;
  }
}

template <int DPL>
void LaunchSplit(const KvLayerView& kv, const float* q, const float* k, const float* v, float* out, int rows,
                 const RowTables& t, const HeadRange& heads, int splits, float* partials, cudaStream_t stream) {
  const dim3 grid((heads.q_heads * splits + kWarps - 1) / kWarps, rows);
  SplitKernel<DPL><<<grid, kWarps * 32, 0, stream>>>(kv, q, k, v, t, heads, splits, partials, out);
}

}  // namespace

Status LaunchKvWrite(const KvLayerView& kv, const float* k, const float* v, int rows, const RowTables& t,
                     cudaStream_t stream) {
  if (rows < 1 || kv.kv_heads < 1 || kv.head_dim < 1 || !kv.v) {
    return Status::InvalidArgument("KV write: rows " + S(rows) + ", kv_heads " + S(kv.kv_heads) + ", head_dim " +
                                   S(kv.head_dim));
  }
  KvWriteKernel<<<rows, 256, 0, stream>>>(kv, k, v, t);
  TEMPER_CUDA_TRY(cudaGetLastError());
  return Status::OK();
}

Status LaunchAttention(const KvLayerView& kv, const float* q, const float* k, const float* v, float* out, int rows,
                       const RowTables& t, const HeadRange& heads, int splits, float* partials, cudaStream_t stream) {
  if (rows < 1 || heads.q_heads < 1 || heads.group < 1 || splits < 1 || (splits > 1 && !partials) ||
      (!kv.k && (!kv.k_norm || !kv.rope.cos || !kv.rope.sin))) {
    return Status::InvalidArgument("attention: rows " + S(rows) + ", q_heads " + S(heads.q_heads) + ", group " +
                                   S(heads.group) + ", splits " + S(splits) +
                                   " (several splits need partials; a V-only layer needs k_norm and RoPE tables)");
  }
  switch (kv.head_dim) {
    case 32:
      LaunchSplit<1>(kv, q, k, v, out, rows, t, heads, splits, partials, stream);
      break;
    case 64:
      LaunchSplit<2>(kv, q, k, v, out, rows, t, heads, splits, partials, stream);
      break;
    case 128:
      LaunchSplit<4>(kv, q, k, v, out, rows, t, heads, splits, partials, stream);
      break;
    case 256:
      LaunchSplit<8>(kv, q, k, v, out, rows, t, heads, splits, partials, stream);
      break;
    case 512:
      LaunchSplit<16>(kv, q, k, v, out, rows, t, heads, splits, partials, stream);
      break;
    default:
      return Status::InvalidArgument("attention: head_dim " + S(kv.head_dim) + " is not 32, 64, 128, 256 or 512");
  }
  TEMPER_CUDA_TRY(cudaGetLastError());
  if (splits > 1) {
    MergeKernel<<<dim3(heads.q_heads, rows), 256, 0, stream>>>(partials, out, heads.q_heads, kv.head_dim, splits);
    TEMPER_CUDA_TRY(cudaGetLastError());
  }
  return Status::OK();
}

Status LoadAttentionKernels() {
  TEMPER_RETURN_IF_ERROR(LoadKernelCode(KvWriteKernel, "KvWriteKernel"));
  TEMPER_RETURN_IF_ERROR(LoadKernelCode(SplitKernel<1>, "SplitKernel<1>"));
  TEMPER_RETURN_IF_ERROR(LoadKernelCode(SplitKernel<2>, "SplitKernel<2>"));
  TEMPER_RETURN_IF_ERROR(LoadKernelCode(SplitKernel<4>, "SplitKernel<4>"));
  TEMPER_RETURN_IF_ERROR(LoadKernelCode(SplitKernel<8>, "SplitKernel<8>"));
  TEMPER_RETURN_IF_ERROR(LoadKernelCode(SplitKernel<16>, "SplitKernel<16>"));
  TEMPER_RETURN_IF_ERROR(LoadKernelCode(MergeKernel, "MergeKernel"));
  return Status::OK();
}

}  // namespace temper::engine::cuda
