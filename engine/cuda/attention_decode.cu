// Decode attention: split-KV ("flash decoding"). A decode row has one query per head but up to
// the whole context of keys, so the keys are cut into `splits` partitions, each handled by one
// warp that keeps an online softmax (max, sum, value accumulator in registers: head_dim / 32
// dims per lane); a second kernel merges the partitions in order. Keys of k_eq_v layers are rebuilt
// from the single cached V as RoPE(V ⊙ k_norm) in registers, so global layers read one copy.
// The merge and addressing math is kernel_math.h's, which the CPU tests check.
#include <cuda_bf16.h>
#include <cuda_runtime.h>


#include "engine/cuda/cuda_status.h"
#include "engine/cuda/kernel_math.h"
#include "engine/cuda/kernels.h"

namespace temper::engine::cuda {
namespace {

using detail::S;

constexpr int kWarps = 4;

__global__ void KvWriteKernel(KvLayerView kv, const float* k, const float* v, const int64_t* positions,
                              const int32_t* slots, const int32_t* blocks, int max_blocks) {
  const int r = blockIdx.x;
  const int width = kv.kv_heads * kv.head_dim;
  const int64_t row = math::KvRow(positions[r], kv.sliding, kv.window, slots[r], blocks + int64_t{r} * max_blocks,
                                  kv.block_tokens);
  for (int i = threadIdx.x; i < width; i += blockDim.x) {
    kv.v[row * width + i] = __bfloat16_as_ushort(__float2bfloat16_rn(v[int64_t{r} * width + i]));
    if (kv.k) kv.k[row * width + i] = __bfloat16_as_ushort(__float2bfloat16_rn(k[int64_t{r} * width + i]));
  }
}

template <int DPL>
__global__ void SplitKernel(KvLayerView kv, const float* q, int q_heads, int q_head_begin, int group,
                            int kv_head_begin, const int64_t* positions, const int32_t* slots, const int32_t* blocks,
                            int max_blocks, int splits, float* partials) {
  constexpr int kHd = DPL * 32;
  const int lane = threadIdx.x % 32;
  const int split = blockIdx.x * kWarps + threadIdx.x / 32;
  const int h = blockIdx.y, r = blockIdx.z;
  if (split >= splits) return;
  const int kvh = (q_head_begin + h) / group - kv_head_begin;
  const int width = kv.kv_heads * kHd;
  const int64_t pos = positions[r];
  const int64_t lo = math::WindowStart(pos, kv.window, kv.sliding);
  const math::SplitSpan span = math::SplitKeys(pos - lo + 1, splits, split);
  const int32_t* table = blocks + int64_t{r} * max_blocks;

  float qr[DPL], acc[DPL], kn[DPL];
#pragma unroll
  for (int i = 0; i < DPL; ++i) {
    qr[i] = q[(int64_t{r} * q_heads + h) * kHd + lane + 32 * i];
    acc[i] = 0;
    kn[i] = kv.k ? 0.0f : math::Bf16ToFloat(kv.k_norm[lane + 32 * i]);
  }
  math::SoftmaxState state{-INFINITY, 0.0f};
  for (int64_t p = lo + span.begin; p < lo + span.end; ++p) {
    const int64_t row = math::KvRow(p, kv.sliding, kv.window, slots[r], table, kv.block_tokens);
    const uint16_t* vp = kv.v + row * width + kvh * kHd;
    float key[DPL], val[DPL];
#pragma unroll
    for (int i = 0; i < DPL; ++i) val[i] = math::Bf16ToFloat(vp[lane + 32 * i]);
    if (kv.k) {
      const uint16_t* kp = kv.k + row * width + kvh * kHd;
#pragma unroll
      for (int i = 0; i < DPL; ++i) key[i] = math::Bf16ToFloat(kp[lane + 32 * i]);
    } else {
      // Point 6: K = RoPE(V ⊙ k_norm) at the key's own position; dim d pairs with d + kHd/2.
#pragma unroll
      for (int i = 0; i < DPL; ++i) key[i] = val[i] * kn[i];
      const float* c = kv.cos + p * kv.angles;
      const float* s = kv.sin + p * kv.angles;
      if constexpr (DPL >= 2) {
#pragma unroll
        for (int i = 0; i < DPL / 2; ++i) {
          const int j = lane + 32 * i;
          if (j < kv.angles) math::RopePair(key[i], key[i + DPL / 2], c[j], s[j]);
        }
      } else {
        // head_dim 32: the partner of lane l < 16 is lane l + 16.
        const float partner = __shfl_xor_sync(0xffffffffu, key[0], 16);
        const int j = lane % 16;
        if (j < kv.angles) {
          float a = lane < 16 ? key[0] : partner, b = lane < 16 ? partner : key[0];
          math::RopePair(a, b, c[j], s[j]);
          key[0] = lane < 16 ? a : b;
        }
      }
    }
    float dot = 0;
#pragma unroll
    for (int i = 0; i < DPL; ++i) dot += qr[i] * key[i];
    for (int off = 16; off > 0; off /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, off);
    float sa, sb;
    math::MergeSoftmax(state, math::SoftmaxState{dot, 1.0f}, sa, sb);
#pragma unroll
    for (int i = 0; i < DPL; ++i) acc[i] = acc[i] * sa + val[i] * sb;
  }
  float* out = partials + ((int64_t{r} * q_heads + h) * splits + split) * (kHd + 2);
#pragma unroll
  for (int i = 0; i < DPL; ++i) out[lane + 32 * i] = acc[i];
  if (lane == 0) {
    out[kHd] = state.max;
    out[kHd + 1] = state.sum;
  }
}

__global__ void MergeKernel(const float* partials, float* out, int q_heads, int hd, int splits) {
  const int h = blockIdx.x, r = blockIdx.y, d = threadIdx.x;
  const float* part = partials + (int64_t{r} * q_heads + h) * splits * (hd + 2);
  math::SoftmaxState state{-INFINITY, 0.0f};
  float acc = 0;
  for (int s = 0; s < splits; ++s) {
    const float* ps = part + int64_t{s} * (hd + 2);
    float sa, sb;
    math::MergeSoftmax(state, math::SoftmaxState{ps[hd], ps[hd + 1]}, sa, sb);
    acc = acc * sa + ps[d] * sb;
  }
  out[(int64_t{r} * q_heads + h) * hd + d] = acc / state.sum;
}

template <int DPL>
void LaunchSplit(const KvLayerView& kv, const float* q, int rows, int q_heads, int q_head_begin, int group,
                 int kv_head_begin, const int64_t* positions, const int32_t* slots, const int32_t* blocks,
                 int max_blocks, int splits, float* partials, cudaStream_t stream) {
  const dim3 grid((splits + kWarps - 1) / kWarps, q_heads, rows);
  SplitKernel<DPL><<<grid, kWarps * 32, 0, stream>>>(kv, q, q_heads, q_head_begin, group, kv_head_begin, positions,
                                                      slots, blocks, max_blocks, splits, partials);
}

}  // namespace

Status LaunchKvWrite(const KvLayerView& kv, const float* k, const float* v, int rows, const int64_t* positions,
                     const int32_t* slots, const int32_t* blocks, int max_blocks, cudaStream_t stream) {
  if (rows < 1 || kv.kv_heads < 1 || kv.head_dim < 1 || !kv.v) {
    return Status::InvalidArgument("KV write: rows " + S(rows) + ", kv_heads " + S(kv.kv_heads) + ", head_dim " + S(kv.head_dim));
  }
  KvWriteKernel<<<rows, 256, 0, stream>>>(kv, k, v, positions, slots, blocks, max_blocks);
  TEMPER_CUDA_TRY(cudaGetLastError());
  return Status::OK();
}

Status LaunchAttentionDecode(const KvLayerView& kv, const float* q, float* out, int rows, int q_heads,
                             int q_head_begin, int group, int kv_head_begin, const int64_t* positions,
                             const int32_t* slots, const int32_t* blocks, int max_blocks, int splits,
                             float* partials, cudaStream_t stream) {
  if (rows < 1 || q_heads < 1 || group < 1 || splits < 1 || (!kv.k && (!kv.k_norm || !kv.cos || !kv.sin))) {
    return Status::InvalidArgument("decode attention: rows " + S(rows) + ", q_heads " + S(q_heads) + ", group " + S(group) +
                                   ", splits " + S(splits) + " (a V-only layer needs k_norm and RoPE tables)");
  }
  switch (kv.head_dim) {
    case 32: LaunchSplit<1>(kv, q, rows, q_heads, q_head_begin, group, kv_head_begin, positions, slots, blocks, max_blocks, splits, partials, stream); break;
    case 64: LaunchSplit<2>(kv, q, rows, q_heads, q_head_begin, group, kv_head_begin, positions, slots, blocks, max_blocks, splits, partials, stream); break;
    case 128: LaunchSplit<4>(kv, q, rows, q_heads, q_head_begin, group, kv_head_begin, positions, slots, blocks, max_blocks, splits, partials, stream); break;
    case 256: LaunchSplit<8>(kv, q, rows, q_heads, q_head_begin, group, kv_head_begin, positions, slots, blocks, max_blocks, splits, partials, stream); break;
    case 512: LaunchSplit<16>(kv, q, rows, q_heads, q_head_begin, group, kv_head_begin, positions, slots, blocks, max_blocks, splits, partials, stream); break;
    default:
      return Status::InvalidArgument("decode attention: head_dim " + S(kv.head_dim) + " is not 32, 64, 128, 256 or 512");
  }
  TEMPER_CUDA_TRY(cudaGetLastError());
  MergeKernel<<<dim3(q_heads, rows), kv.head_dim, 0, stream>>>(partials, out, q_heads, kv.head_dim, splits);
  TEMPER_CUDA_TRY(cudaGetLastError());
  return Status::OK();
}

}  // namespace temper::engine::cuda
