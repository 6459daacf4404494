// Attention over the KV cache and this pass's fresh keys, split-KV ("flash decoding") with the
// query heads of a group together. One block takes one KV head of one row, over one split of the
// row's visible keys, for the query heads that share that KV head (up to kMaxHeads; larger groups
// take several blocks), so each key and value is read once for the heads of a block.
//
// Each of the block's kWarps warps takes kKeysAtOnce consecutive keys at a time, and its lanes split
// the head dims: lane l holds dims [P·l, P·l + P) of each half of the head, so a k_eq_v layer's RoPE
// pairs (dim j with j + head_dim/2) stay in one lane. All of a round's K and V pieces (and RoPE
// angles) are loaded before the first is used: one trip to memory for up to 8 keys. The scores are
// the lanes' partial dots summed over the warp, the online softmax runs per warp, and the values
// come from the pieces already in registers; on k_eq_v layers V is the very piece the key was
// rebuilt from (K = RoPE(V ⊙ k_norm)), so each row is read once. The block's warps then meet in
// shared memory. A kernel that gave each thread one key's whole row took 16-24 dependent rounds
// of loads per 32-key split and ran 1.6-2.9x slower on an H200 (bench/RESULTS.md, 2026-11-27).
//
// Decode rows use several splits, merged by a second kernel; how many runs on the GPU is the
// row's key count's business (UsedSplits: a split needs kMinKeysPerSplit keys; the blocks of
// unused splits leave at once), so one captured graph serves short and long contexts. Prefill rows
// use one split and write directly.
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

constexpr int kWarps = 4;
constexpr unsigned kAllLanes = 0xffffffffu;

// Dims of each half of a head that a lane holds (lanes past HD / 2P hold none: head_dim 32).
template <int HD>
constexpr int kDimsPerHalf = HD >= 64 ? HD / 64 : 1;
// Keys a warp loads before it uses the first.
template <int HD>
constexpr int kKeysAtOnce = HD >= 512 ? 4 : 8;
// Query heads a block takes at most.
template <int HD>
constexpr int kMaxHeads = HD >= 512 ? 4 : 8;

// P bf16 values, two to a 32-bit word, the lower index in the low half.
template <int P>
struct Bf16Piece {
  uint32_t word[(P + 1) / 2];
  __device__ __forceinline__ float operator[](int i) const {
    return math::Bf16ToFloat(static_cast<uint16_t>(word[i / 2] >> (16 * (i % 2))));
  }
};

template <int P>
__device__ __forceinline__ Bf16Piece<P> LoadCached(const uint16_t* p) {
  Bf16Piece<P> b;
  if constexpr (P == 8) {
    const uint4 u = *reinterpret_cast<const uint4*>(p);
    b.word[0] = u.x, b.word[1] = u.y, b.word[2] = u.z, b.word[3] = u.w;
  } else if constexpr (P == 4) {
    const uint2 u = *reinterpret_cast<const uint2*>(p);
    b.word[0] = u.x, b.word[1] = u.y;
  } else if constexpr (P == 2) {
    b.word[0] = *reinterpret_cast<const uint32_t*>(p);
  } else {
    static_assert(P == 1, "1, 2, 4 or 8 dims a half");
    b.word[0] = p[0];
  }
  return b;
}

// This pass's fp32 values rounded to bf16, as the cache holds them once written.
template <int P>
__device__ __forceinline__ Bf16Piece<P> LoadFresh(const float* p) {
  Bf16Piece<P> b = {};
#pragma unroll
  for (int i = 0; i < P; ++i) b.word[i / 2] |= uint32_t{math::FloatToBf16(p[i])} << (16 * (i % 2));
  return b;
}

// Dims [at, at + P) of the key or value at `source`: cache row source (>= 0) or fresh row
// -(source + 1).
template <int P>
__device__ __forceinline__ Bf16Piece<P> LoadPiece(const uint16_t* cache, const float* fresh, int64_t source, int width,
                                                  int64_t at) {
  return source >= 0 ? LoadCached<P>(cache + source * width + at) : LoadFresh<P>(fresh + (-source - 1) * width + at);
}

// Where position p's K and V rows are: this pass's fresh row f as -(f + 1) from `chunk_start` on,
// a cache row (>= 0) before.
__device__ __forceinline__ int64_t KeySource(int64_t p, const KvLayerView& kv, const RowTables& t, int r, int slot,
                                             const int32_t* table) {
  if (p >= t.chunk_start[r]) return -(t.first_row[r] + (p - t.chunk_start[r]) + 1);
  return math::KvRow(p, kv.sliding, kv.ring, slot, table, kv.block_tokens);
}

// One block: KV head kvh of row r, query heads h0 .. h0 + G - 1 (G <= GM), keys of one split.
template <int HD, int GM, bool kEqV>
__global__ void __launch_bounds__(kWarps * 32)
    GroupAttentionKernel(KvLayerView kv, const float* __restrict__ q, const float* fresh_k, const float* fresh_v,
                         RowTables t, HeadRange heads, int splits, int head_chunks, float* partials, float* out) {
  constexpr int P = kDimsPerHalf<HD>, KW = kKeysAtOnce<HD>, kHolders = HD / 2 / P;
  __shared__ float q_s[GM][HD];
  __shared__ float kn_s[HD];
  __shared__ float acc_s[kWarps][GM][HD];
  __shared__ float max_s[kWarps][GM], sum_s[kWarps][GM];

  const int r = blockIdx.y;
  const int split = blockIdx.x % splits;
  const int chunk = (blockIdx.x / splits) % head_chunks;
  const int kvh = blockIdx.x / (splits * head_chunks);
  const math::HeadSpan block_heads =
      math::BlockHeads(heads.q_heads, heads.q_head_begin, heads.group, heads.kv_head_begin + kvh, chunk, GM);
  const int h0 = block_heads.first, G = block_heads.count;
  if (G <= 0) return;  // the whole block: no barrier is skipped by part of it
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int width = kv.kv_heads * HD;
  const int64_t offset = int64_t{kvh} * HD;

  const int64_t pos = t.positions[r];
  const math::SplitSpan keys = math::SplitPositions(pos, kv.window, kv.sliding, splits, split);
  const int64_t begin = keys.begin, end = keys.end;
  if (splits > 1 && begin == end) return;  // an unused split: the merge reads only the used ones
  const int slot = pos < 0 ? 0 : t.slots[r];
  const int32_t* table = t.blocks + int64_t{slot} * t.max_blocks;

  for (int i = tid; i < G * HD; i += kWarps * 32) {
    q_s[i / HD][i % HD] = q[(int64_t{r} * heads.q_heads + h0 + i / HD) * HD + i % HD];
  }
  if constexpr (kEqV) {
    for (int i = tid; i < HD; i += kWarps * 32) kn_s[i] = math::Bf16ToFloat(kv.k_norm[i]);
  }
  __syncthreads();

  const bool holds = lane < kHolders;
  const int d_lo = P * (holds ? lane : 0), d_hi = HD / 2 + d_lo;
  const uint16_t* key_cache = kEqV ? kv.v : kv.k;
  const float* key_fresh = kEqV ? fresh_v : fresh_k;
  float m[GM], l[GM], acc[GM][2 * P];
#pragma unroll
  for (int g = 0; g < GM; ++g) {
    m[g] = -INFINITY;
    l[g] = 0;
#pragma unroll
    for (int i = 0; i < 2 * P; ++i) acc[g][i] = 0;
  }

  for (int64_t base = begin + warp * KW; base < end; base += kWarps * KW) {
    const int n = static_cast<int>(end - base < KW ? end - base : KW);  // keys of this round, >= 1
    int64_t mine = 0;                                                   // lane i < n: where key base + i is
    if (lane < n) mine = KeySource(base + lane, kv, t, r, slot, table);
    // Every load of the round before any use.
    Bf16Piece<P> k_lo[KW] = {}, k_hi[KW] = {}, v_lo[KW] = {}, v_hi[KW] = {};
    float cos_k[KW][P] = {}, sin_k[KW][P] = {};
#pragma unroll
    for (int kk = 0; kk < KW; ++kk) {
      const int64_t source = __shfl_sync(kAllLanes, mine, kk);
      if (kk >= n || !holds) continue;
      k_lo[kk] = LoadPiece<P>(key_cache, key_fresh, source, width, offset + d_lo);
      k_hi[kk] = LoadPiece<P>(key_cache, key_fresh, source, width, offset + d_hi);
      if constexpr (kEqV) {
        const int64_t at = (base + kk) * kv.rope.angles;
#pragma unroll
        for (int i = 0; i < P; ++i) {
          if (d_lo + i < kv.rope.angles) {
            cos_k[kk][i] = kv.rope.cos[at + d_lo + i];
            sin_k[kk][i] = kv.rope.sin[at + d_lo + i];
          }
        }
      } else {
        v_lo[kk] = LoadPiece<P>(kv.v, fresh_v, source, width, offset + d_lo);
        v_hi[kk] = LoadPiece<P>(kv.v, fresh_v, source, width, offset + d_hi);
      }
    }
    // Scores: each lane's part of the dot, summed over the warp. Point 6 on k_eq_v layers:
    // K = RoPE(V ⊙ k_norm) at the key's own position.
    float s[KW][GM];
#pragma unroll
    for (int kk = 0; kk < KW; ++kk) {
      float key[2 * P];
#pragma unroll
      for (int i = 0; i < P; ++i) {
        key[i] = k_lo[kk][i];
        key[P + i] = k_hi[kk][i];
        if constexpr (kEqV) {
          key[i] *= kn_s[d_lo + i];
          key[P + i] *= kn_s[d_hi + i];
          if (d_lo + i < kv.rope.angles) math::RopePair(key[i], key[P + i], cos_k[kk][i], sin_k[kk][i]);
        }
      }
#pragma unroll
      for (int g = 0; g < GM; ++g) {
        s[kk][g] = -INFINITY;
        if (g >= G || kk >= n) continue;  // the same for the whole warp
        float dot = 0;
        if (holds) {
#pragma unroll
          for (int i = 0; i < P; ++i) dot += q_s[g][d_lo + i] * key[i] + q_s[g][d_hi + i] * key[P + i];
        }
#pragma unroll
        for (int o = 16; o > 0; o /= 2) dot += __shfl_xor_sync(kAllLanes, dot, o);
        s[kk][g] = dot;
      }
    }
    // Online softmax per query head, and the values from the pieces in registers.
#pragma unroll
    for (int g = 0; g < GM; ++g) {
      if (g >= G) continue;
      float m_new = m[g];
#pragma unroll
      for (int kk = 0; kk < KW; ++kk) m_new = fmaxf(m_new, s[kk][g]);
      const float scale = l[g] > 0 ? expf(m[g] - m_new) : 0.0f;
      l[g] *= scale;
#pragma unroll
      for (int i = 0; i < 2 * P; ++i) acc[g][i] *= scale;
#pragma unroll
      for (int kk = 0; kk < KW; ++kk) {
        if (kk >= n) continue;
        const float weight = expf(s[kk][g] - m_new);
        l[g] += weight;
        const Bf16Piece<P>& lo = kEqV ? k_lo[kk] : v_lo[kk];
        const Bf16Piece<P>& hi = kEqV ? k_hi[kk] : v_hi[kk];
#pragma unroll
        for (int i = 0; i < P; ++i) {
          acc[g][i] += weight * lo[i];
          acc[g][P + i] += weight * hi[i];
        }
      }
      m[g] = m_new;
    }
  }

  // The warps' states meet in shared memory: the block's maximum, each warp weighted to it.
#pragma unroll
  for (int g = 0; g < GM; ++g) {
    if (g >= G) continue;
    if (lane == 0) {
      max_s[warp][g] = m[g];
      sum_s[warp][g] = l[g];
    }
    if (holds) {
#pragma unroll
      for (int i = 0; i < P; ++i) {
        acc_s[warp][g][d_lo + i] = acc[g][i];
        acc_s[warp][g][d_hi + i] = acc[g][P + i];
      }
    }
  }
  __syncthreads();
  for (int e = tid; e < G * HD; e += kWarps * 32) {
    const int g = e / HD, d = e % HD;
    float block_max = -INFINITY;
    for (int w = 0; w < kWarps; ++w) block_max = fmaxf(block_max, max_s[w][g]);
    float num = 0, den = 0;
    for (int w = 0; w < kWarps; ++w) {
      const float weight = math::SplitWeight(math::SoftmaxState{max_s[w][g], sum_s[w][g]}, block_max);
      num += weight * acc_s[w][g][d];
      den += weight * sum_s[w][g];
    }
    const int64_t row_head = int64_t{r} * heads.q_heads + h0 + g;
    if (splits == 1) {
      out[row_head * HD + d] = den > 0 ? num / den : 0.0f;
    } else {
      float* part = partials + (row_head * splits + split) * (HD + 2);
      part[d] = num;
      if (d == 0) {
        part[HD] = block_max;
        part[HD + 1] = den;
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

template <int HD, int GM>
void LaunchGroup(const KvLayerView& kv, const float* q, const float* k, const float* v, float* out, int rows,
                 const RowTables& t, const HeadRange& heads, int splits, float* partials, cudaStream_t stream) {
  const int head_chunks = (heads.group + GM - 1) / GM;
  const dim3 grid(kv.kv_heads * head_chunks * splits, rows);
  if (kv.k) {
    GroupAttentionKernel<HD, GM, false>
        <<<grid, kWarps * 32, 0, stream>>>(kv, q, k, v, t, heads, splits, head_chunks, partials, out);
  } else {
    GroupAttentionKernel<HD, GM, true>
        <<<grid, kWarps * 32, 0, stream>>>(kv, q, k, v, t, heads, splits, head_chunks, partials, out);
  }
}

// The fewest query heads a block is compiled for that hold the group (or kMaxHeads of it).
template <int HD>
void LaunchHeads(const KvLayerView& kv, const float* q, const float* k, const float* v, float* out, int rows,
                 const RowTables& t, const HeadRange& heads, int splits, float* partials, cudaStream_t stream) {
  const int wanted = heads.group < kMaxHeads<HD> ? heads.group : kMaxHeads<HD>;
  if (wanted <= 2) {
    LaunchGroup<HD, 2>(kv, q, k, v, out, rows, t, heads, splits, partials, stream);
  } else if (wanted <= 4 || kMaxHeads<HD> == 4) {
    LaunchGroup<HD, 4>(kv, q, k, v, out, rows, t, heads, splits, partials, stream);
  } else {
    LaunchGroup<HD, kMaxHeads<HD>>(kv, q, k, v, out, rows, t, heads, splits, partials, stream);
  }
}

}  // namespace

int AttentionSplits(int sm_count, int kv_heads, int group, int rows, int max_splits) {
  // Counted with up to kSplitHeads query heads a block; at head_dim 512 a block takes half as
  // many (kMaxHeads), and the blocks double, which leaves each multiprocessor a few.
  constexpr int kSplitHeads = 8;
  const int blocks = kv_heads * ((group + kSplitHeads - 1) / kSplitHeads) * rows;
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
    LaunchHeads<decltype(hd)::value>(kv, q, k, v, out, rows, t, heads, splits, partials, stream);
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
  Status status;
  auto load = [&](auto hd) {
    constexpr int HD = decltype(hd)::value;
    for (Status loaded : {LoadKernelCode(GroupAttentionKernel<HD, 2, false>, "GroupAttentionKernel"),
                          LoadKernelCode(GroupAttentionKernel<HD, 2, true>, "GroupAttentionKernel"),
                          LoadKernelCode(GroupAttentionKernel<HD, 4, false>, "GroupAttentionKernel"),
                          LoadKernelCode(GroupAttentionKernel<HD, 4, true>, "GroupAttentionKernel"),
                          LoadKernelCode(GroupAttentionKernel<HD, kMaxHeads<HD>, false>, "GroupAttentionKernel"),
                          LoadKernelCode(GroupAttentionKernel<HD, kMaxHeads<HD>, true>, "GroupAttentionKernel")}) {
      if (status.ok()) status = loaded;
    }
  };
  for (int hd : {32, 64, 128, 256, 512}) TEMPER_RETURN_IF_ERROR(ForAttentionHeadDim("attention", hd, load));
  TEMPER_RETURN_IF_ERROR(status);
  TEMPER_RETURN_IF_ERROR(LoadKernelCode(MergeKernel, "MergeKernel"));
  return Status::OK();
}

}  // namespace temper::engine::cuda
