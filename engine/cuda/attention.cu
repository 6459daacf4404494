// Attention over the KV cache and this pass's fresh keys, split-KV ("flash decoding") with the
// query heads of a group together. One block takes one KV head of one row, over one split of the
// row's visible keys, for every query head that shares that KV head (up to kMaxGroup; larger groups
// take several blocks), so each key and value is read once for the whole group. Keys go in tiles
// of kTile:
//   1. scores: thread i takes key i of the tile and reads its whole row with 16-byte loads (many
//      loads in flight per thread, no shuffles), dotting it with the group's queries from shared
//      memory. k_eq_v layers rebuild the key from V as RoPE(V ⊙ k_norm) there, pairing the two
//      halves of the row in one thread;
//   2. online softmax: one warp per query head takes the tile's max, rescales its running sum
//      and turns the scores into weights;
//   3. values: each thread owns head_dim / kTile dims (at least one) and adds Σ weight · V for
//      every query head of the group, reading each value once.
// Decode rows use several splits, merged by a second kernel; how many runs on the GPU is
// the row's key count's business (UsedSplits: a split needs kMinKeysPerSplit keys), so one
// captured graph serves short and long contexts. Prefill rows use one split and write directly.
//
// Fresh keys (this pass's, not yet in the cache) are rounded to bf16 first, so a key reads the
// same whether it comes from the cache or not. The addressing and merge math is kernel_math.h's,
// which the CPU tests check; ReferenceOps::Attention is the CPU twin.
#include <cuda_runtime.h>

#include <algorithm>

#include "engine/cuda/attention_launch.h"
#include "engine/cuda/cuda_status.h"
#include "engine/cuda/kernel_loading.h"
#include "engine/cuda/kernel_math.h"
#include "engine/cuda/kernels.h"

namespace temper::engine::cuda {
namespace {

using detail::S;

__global__ void KvWriteKernel(KvLayerView kv, const float* k, const float* v, RowTables t) {
  const int r = blockIdx.x;
  const int64_t pos = t.positions[r];
  if (math::KvWriteSkips(pos, kv.sliding, kv.ring, t.chunk_end[r])) return;
  const int width = kv.kv_heads * kv.head_dim;
  const int slot = t.slots[r];
  const int64_t row =
      math::KvRow(pos, kv.sliding, kv.ring, slot, t.blocks + int64_t{slot} * t.max_blocks, kv.block_tokens);
  for (int i = threadIdx.x; i < width; i += blockDim.x) {
    kv.v[row * width + i] = math::FloatToBf16(v[int64_t{r} * width + i]);
    if (kv.k) kv.k[row * width + i] = math::FloatToBf16(k[int64_t{r} * width + i]);
  }
}

constexpr int kTile = 128;    // keys per tile, one per thread of a block in the score phase
constexpr int kMaxGroup = 8;  // query heads per block
constexpr int kWarps = kTile / 32;

// 8 bf16 values at p (16-byte aligned) as floats.
__device__ __forceinline__ void Load8(const uint16_t* p, float* out) {
  const uint4 u = *reinterpret_cast<const uint4*>(p);
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = __uint_as_float(w[i] << 16);
    out[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}

// 8 fresh fp32 values rounded to bf16, as the cache would hold them.
__device__ __forceinline__ void Load8Fresh(const float* p, float* out) {
#pragma unroll
  for (int i = 0; i < 8; ++i) out[i] = math::RoundToBf16(p[i]);
}

// N contiguous bf16 values at p (aligned to 2N bytes) as floats, in one load.
template <int N>
__device__ __forceinline__ void LoadDims(const uint16_t* p, float* out) {
  if constexpr (N == 4) {
    const uint2 u = *reinterpret_cast<const uint2*>(p);
    out[0] = __uint_as_float(u.x << 16);
    out[1] = __uint_as_float(u.x & 0xffff0000u);
    out[2] = __uint_as_float(u.y << 16);
    out[3] = __uint_as_float(u.y & 0xffff0000u);
  } else if constexpr (N == 2) {
    const uint32_t u = *reinterpret_cast<const uint32_t*>(p);
    out[0] = __uint_as_float(u << 16);
    out[1] = __uint_as_float(u & 0xffff0000u);
  } else {
    static_assert(N == 1, "1, 2 or 4 dims per thread");
    out[0] = math::Bf16ToFloat(p[0]);
  }
}

// Where a key's K and V rows are: a cache row (>= 0) or fresh row f as -(f + 1).
__device__ __forceinline__ int64_t KeySource(int64_t p, const KvLayerView& kv, const RowTables& t, int r, int slot,
                                             const int32_t* table) {
  if (p >= t.chunk_start[r]) return -(t.first_row[r] + (p - t.chunk_start[r]) + 1);
  return math::KvRow(p, kv.sliding, kv.ring, slot, table, kv.block_tokens);
}

// Dims [8c, 8c + 8) of head kvh at `source` from the cache (bf16) or this pass (fp32, rounded).
__device__ __forceinline__ void LoadKey8(const uint16_t* cache, const float* fresh, int64_t source, int width,
                                         int64_t offset, float* out) {
  if (source >= 0) {
    Load8(cache + source * width + offset, out);
  } else {
    Load8Fresh(fresh + (-source - 1) * width + offset, out);
  }
}

template <int HD>
__global__ void __launch_bounds__(kTile)
    GroupAttentionKernel(KvLayerView kv, const float* q, const float* fresh_k, const float* fresh_v, RowTables t,
                         HeadRange heads, int splits, int head_chunks, float* partials, float* out) {
  static_assert(HD % 16 == 0, "rows are read in 16-byte pieces, pairing the halves on k_eq_v layers");
  constexpr int kDims = HD >= kTile ? HD / kTile : 1;  // value dims per thread in phase 3
  __shared__ float q_s[kMaxGroup][HD];
  __shared__ float w_s[kMaxGroup][kTile];  // scores, then softmax weights
  __shared__ float kn_s[HD];
  __shared__ int64_t source_s[kTile];
  __shared__ float max_s[kMaxGroup], sum_s[kMaxGroup], scale_s[kMaxGroup];

  const int r = blockIdx.y;
  const int split = blockIdx.x % splits;
  const int chunk = (blockIdx.x / splits) % head_chunks;
  const int kvh = blockIdx.x / (splits * head_chunks);
  // The rank's query heads that read KV head kvh, then this block's chunk of them.
  const math::HeadSpan block_heads =
      math::BlockHeads(heads.q_heads, heads.q_head_begin, heads.group, heads.kv_head_begin + kvh, chunk, kMaxGroup);
  const int h0 = block_heads.first, G = block_heads.count;
  if (G <= 0) return;  // the whole block: no barrier is skipped by part of it
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int width = kv.kv_heads * HD;
  const int64_t offset = int64_t{kvh} * HD;

  const int64_t pos = t.positions[r];
  const math::SplitSpan keys = math::SplitPositions(pos, kv.window, kv.sliding, splits, split);
  const int64_t begin = keys.begin, end = keys.end;
  const int slot = pos < 0 ? 0 : t.slots[r];
  const int32_t* table = t.blocks + int64_t{slot} * t.max_blocks;

  for (int i = tid; i < G * HD; i += kTile) {
    q_s[i / HD][i % HD] = q[(int64_t{r} * heads.q_heads + h0 + i / HD) * HD + i % HD];
  }
  if (!kv.k) {
    for (int i = tid; i < HD; i += kTile) kn_s[i] = math::Bf16ToFloat(kv.k_norm[i]);
  }
  if (tid < kMaxGroup) {
    max_s[tid] = -INFINITY;
    sum_s[tid] = 0;
  }
  float acc[kMaxGroup][kDims];
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
#pragma unroll
    for (int j = 0; j < kDims; ++j) acc[g][j] = 0;
  }
  const int d0 = tid * kDims;  // phase 3: this thread's dims [d0, d0 + kDims)
  __syncthreads();

  for (int64_t base = begin; base < end; base += kTile) {
    const int count = static_cast<int>(end - base < kTile ? end - base : kTile);
    // 1. Scores.
    if (tid < count) {
      const int64_t p = base + tid;
      const int64_t source = KeySource(p, kv, t, r, slot, table);
      source_s[tid] = source;
      float dot[kMaxGroup] = {};
      if (kv.k) {
#pragma unroll 4
        for (int c = 0; c < HD / 8; ++c) {
          float key[8];
          LoadKey8(kv.k, fresh_k, source, width, offset + 8 * c, key);
#pragma unroll
          for (int g = 0; g < kMaxGroup; ++g) {
            if (g < G) {
#pragma unroll
              for (int i = 0; i < 8; ++i) dot[g] += q_s[g][8 * c + i] * key[i];
            }
          }
        }
      } else {
        // Point 6: K = RoPE(V ⊙ k_norm) at the key's own position; dim j pairs with j + HD/2.
        const float* cos_p = kv.rope.cos + p * kv.rope.angles;
        const float* sin_p = kv.rope.sin + p * kv.rope.angles;
#pragma unroll 2
        for (int c = 0; c < HD / 16; ++c) {
          float lo[8], hi[8];
          LoadKey8(kv.v, fresh_v, source, width, offset + 8 * c, lo);
          LoadKey8(kv.v, fresh_v, source, width, offset + HD / 2 + 8 * c, hi);
#pragma unroll
          for (int i = 0; i < 8; ++i) {
            const int j = 8 * c + i;
            lo[i] *= kn_s[j];
            hi[i] *= kn_s[j + HD / 2];
            if (j < kv.rope.angles) math::RopePair(lo[i], hi[i], cos_p[j], sin_p[j]);
          }
#pragma unroll
          for (int g = 0; g < kMaxGroup; ++g) {
            if (g < G) {
#pragma unroll
              for (int i = 0; i < 8; ++i) dot[g] += q_s[g][8 * c + i] * lo[i] + q_s[g][HD / 2 + 8 * c + i] * hi[i];
            }
          }
        }
      }
#pragma unroll
      for (int g = 0; g < kMaxGroup; ++g) {
        if (g < G) w_s[g][tid] = dot[g];
      }
    }
    __syncthreads();
    // 2. Online softmax, one warp per query head.
    for (int g = warp; g < G; g += kWarps) {
      float m = -INFINITY;
      for (int i = lane; i < count; i += 32) m = fmaxf(m, w_s[g][i]);
#pragma unroll
      for (int o = 16; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
      const float m_new = fmaxf(max_s[g], m);
      float sum = 0;
      for (int i = lane; i < count; i += 32) {
        const float e = expf(w_s[g][i] - m_new);
        w_s[g][i] = e;
        sum += e;
      }
#pragma unroll
      for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
      if (lane == 0) {
        const float scale = sum_s[g] > 0 ? expf(max_s[g] - m_new) : 0.0f;
        scale_s[g] = scale;
        sum_s[g] = sum_s[g] * scale + sum;
        max_s[g] = m_new;
      }
    }
    __syncthreads();
    // 3. Values.
    if (d0 < HD) {
#pragma unroll
      for (int g = 0; g < kMaxGroup; ++g) {
        if (g < G) {
#pragma unroll
          for (int j = 0; j < kDims; ++j) acc[g][j] *= scale_s[g];
        }
      }
#pragma unroll 4
      for (int i = 0; i < count; ++i) {
        const int64_t source = source_s[i];
        float val[kDims];
        if (source >= 0) {
          LoadDims<kDims>(kv.v + source * width + offset + d0, val);
        } else {
          const float* vp = fresh_v + (-source - 1) * width + offset + d0;
#pragma unroll
          for (int j = 0; j < kDims; ++j) val[j] = math::RoundToBf16(vp[j]);
        }
#pragma unroll
        for (int g = 0; g < kMaxGroup; ++g) {
          if (g < G) {
            const float w = w_s[g][i];
#pragma unroll
            for (int j = 0; j < kDims; ++j) acc[g][j] += w * val[j];
          }
        }
      }
    }
    __syncthreads();  // before the next tile overwrites the weights and sources
  }

  // Out: the normalised rows (one split), or this split's partial state for MergeKernel.
  if (d0 < HD) {
#pragma unroll
    for (int g = 0; g < kMaxGroup; ++g) {
      if (g >= G) continue;
      const int64_t row_head = int64_t{r} * heads.q_heads + h0 + g;
      if (splits == 1) {
        const float inv = sum_s[g] > 0 ? 1.0f / sum_s[g] : 0.0f;
#pragma unroll
        for (int j = 0; j < kDims; ++j) out[row_head * HD + d0 + j] = acc[g][j] * inv;
      } else {
        float* part = partials + (row_head * splits + split) * (HD + 2);
#pragma unroll
        for (int j = 0; j < kDims; ++j) part[d0 + j] = acc[g][j];
        if (tid == 0) {
          part[HD] = max_s[g];
          part[HD + 1] = sum_s[g];
        }
      }
    }
  }
}

constexpr int kMergeChunk = 64;  // splits whose weights a merge block stages at a time
constexpr int kMergeDims = 2;    // output dims per merge thread

int MergeThreads(int hd) { return std::max(kMergeChunk, (hd + kMergeDims - 1) / kMergeDims); }

// One block per (row, query head) merges the row's used splits (UsedSplits of its key count; the
// rest are empty): the largest of the splits' maxima M first, then each split's weight
// exp(max_s − M) once, staged in shared memory, then per dim Σ_s weight_s · acc_s[d] over
// Σ_s weight_s · sum_s. The loads of different splits are independent, so many are in flight; a
// merge that folds the splits one after another waits for each (it took 33 us of a sliding layer's
// 42 us at 16 keys on the H200 with 64 splits, bench/RESULTS.md).
__global__ void MergeKernel(const float* partials, float* out, int q_heads, int hd, int splits,
                            const int64_t* positions, int window, bool sliding) {
  __shared__ float weight_s[kMergeChunk], sum_s[kMergeChunk], reduce_s[32];
  const int h = blockIdx.x, r = blockIdx.y, tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int64_t stride = hd + 2;
  const float* part = partials + (int64_t{r} * q_heads + h) * splits * stride;
  int used = 0;  // padding rows: none, and a zero output
  const int64_t pos = positions[r];
  if (pos >= 0) used = math::UsedSplits(pos - math::WindowStart(pos, window, sliding) + 1, splits);

  float m = -INFINITY;  // an empty split's max is -inf
  for (int s = tid; s < used; s += blockDim.x) m = fmaxf(m, part[s * stride + hd]);
#pragma unroll
  for (int o = 16; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (lane == 0) reduce_s[warp] = m;
  __syncthreads();
  m = -INFINITY;
  for (int i = 0; i < static_cast<int>(blockDim.x / 32); ++i) m = fmaxf(m, reduce_s[i]);

  float acc[kMergeDims] = {}, denominator = 0;
  for (int first = 0; first < used; first += kMergeChunk) {
    const int n = min(kMergeChunk, used - first);
    __syncthreads();  // the previous chunk's weights are read by every thread
    if (tid < n) {
      const float* ps = part + (first + tid) * stride;
      const math::SoftmaxState state{ps[hd], ps[hd + 1]};
      weight_s[tid] = math::SplitWeight(state, m);
      sum_s[tid] = state.sum;
    }
    __syncthreads();
#pragma unroll 8
    for (int i = 0; i < n; ++i) {
      const float* ps = part + (first + i) * stride;
      const float w = weight_s[i];
      denominator += w * sum_s[i];
#pragma unroll
      for (int j = 0; j < kMergeDims; ++j) {
        const int d = tid + j * blockDim.x;
        if (d < hd) acc[j] += w * ps[d];
      }
    }
  }
  float* o = out + (int64_t{r} * q_heads + h) * hd;
#pragma unroll
  for (int j = 0; j < kMergeDims; ++j) {
    const int d = tid + j * blockDim.x;
    if (d < hd) o[d] = denominator > 0 ? acc[j] / denominator : 0.0f;
  }
}

template <int HD>
void LaunchGroup(const KvLayerView& kv, const float* q, const float* k, const float* v, float* out, int rows,
                 const RowTables& t, const HeadRange& heads, int splits, float* partials, cudaStream_t stream) {
  const int head_chunks = (heads.group + kMaxGroup - 1) / kMaxGroup;
  const dim3 grid(kv.kv_heads * head_chunks * splits, rows);
  GroupAttentionKernel<HD><<<grid, kTile, 0, stream>>>(kv, q, k, v, t, heads, splits, head_chunks, partials, out);
}

}  // namespace

int AttentionSplits(int sm_count, int kv_heads, int group, int rows, int max_splits) {
  const int blocks = kv_heads * ((group + kMaxGroup - 1) / kMaxGroup) * rows;
  const int wanted = (2 * sm_count + blocks - 1) / std::max(blocks, 1);
  return std::clamp(wanted, 1, std::max(max_splits, 1));
}

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
  TEMPER_RETURN_IF_ERROR(CheckAttentionArguments("attention", kv, rows, heads, splits, partials));
  TEMPER_RETURN_IF_ERROR(ForAttentionHeadDim("attention", kv.head_dim, [&](auto hd) {
    LaunchGroup<decltype(hd)::value>(kv, q, k, v, out, rows, t, heads, splits, partials, stream);
  }));
  TEMPER_CUDA_TRY(cudaGetLastError());
  if (splits == 1) return Status::OK();
  return LaunchAttentionMerge(partials, out, rows, heads.q_heads, kv.head_dim, splits, t.positions, kv.window,
                              kv.sliding, stream);
}

Status LaunchAttentionMerge(const float* partials, float* out, int rows, int q_heads, int head_dim, int splits,
                            const int64_t* positions, int window, bool sliding, cudaStream_t stream) {
  if (rows < 1 || q_heads < 1 || head_dim < 1 || splits < 2 || !partials) {
    return Status::InvalidArgument("attention merge: rows " + S(rows) + ", q_heads " + S(q_heads) + ", head_dim " +
                                   S(head_dim) + ", splits " + S(splits) + " (at least 2, with partials)");
  }
  MergeKernel<<<dim3(q_heads, rows), MergeThreads(head_dim), 0, stream>>>(partials, out, q_heads, head_dim, splits,
                                                                          positions, window, sliding);
  TEMPER_CUDA_TRY(cudaGetLastError());
  return Status::OK();
}

Status LoadAttentionKernels() {
  TEMPER_RETURN_IF_ERROR(LoadKernelCode(KvWriteKernel, "KvWriteKernel"));
  TEMPER_RETURN_IF_ERROR(LoadKernelCode(GroupAttentionKernel<32>, "GroupAttentionKernel<32>"));
  TEMPER_RETURN_IF_ERROR(LoadKernelCode(GroupAttentionKernel<64>, "GroupAttentionKernel<64>"));
  TEMPER_RETURN_IF_ERROR(LoadKernelCode(GroupAttentionKernel<128>, "GroupAttentionKernel<128>"));
  TEMPER_RETURN_IF_ERROR(LoadKernelCode(GroupAttentionKernel<256>, "GroupAttentionKernel<256>"));
  TEMPER_RETURN_IF_ERROR(LoadKernelCode(GroupAttentionKernel<512>, "GroupAttentionKernel<512>"));
  TEMPER_RETURN_IF_ERROR(LoadKernelCode(MergeKernel, "MergeKernel"));
  return Status::OK();
}

}  // namespace temper::engine::cuda
