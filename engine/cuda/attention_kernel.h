// Decode attention's split kernel (attention.cu says how it works and why), as a template over the
// head_dim, the query heads a block takes and the keys a warp loads at once, with the launcher of
// its grid: attention.cu launches its choice for each head_dim (kMaxHeads, kKeysAtOnce);
// bench/attention_variants.cu times others beside it.
//
// Device code: included by .cu files only (and by the SIMT emulator's C++ build of them).
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "engine/cuda/grid_dependency.h"
#include "engine/cuda/kernel_math.h"
#include "engine/cuda/rank_ops.h"

namespace temper::engine::cuda::attention {

constexpr int kWarps = 4;
constexpr unsigned kAllLanes = 0xffffffffu;

// Dims of each half of a head that a lane holds (lanes past HD / 2P hold none: head_dim 32).
template <int HD>
constexpr int kDimsPerHalf = HD >= 64 ? HD / 64 : 1;
// Keys a warp loads before it uses the first, and query heads a block takes at most: attention.cu's
// choice for each head_dim (bench/attention_variants.cu times others).
template <int HD>
constexpr int kKeysAtOnce = HD >= 512 ? 4 : 8;
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

// The grid of a call's split half with heads_per_block query heads a block: one block per KV
// head, chunk of the group and split (x), per row (y).
struct GroupGrid {
  int head_chunks;
  dim3 blocks;
};
inline GroupGrid GroupGridOf(const KvLayerView& kv, const HeadRange& heads, int splits, int rows, int heads_per_block) {
  const int head_chunks = (heads.group + heads_per_block - 1) / heads_per_block;
  return {head_chunks, dim3(kv.kv_heads * head_chunks * splits, rows)};
}

// Where a block of that grid works: row r, split `split` of the row's keys, the rank's KV head
// kvh, and its query heads (at most `per_block` of kvh's group; count <= 0 for none).
struct GroupBlock {
  int r, split, kvh;
  math::HeadSpan heads;
};
__device__ __forceinline__ GroupBlock GroupBlockOf(const HeadRange& heads, int splits, int head_chunks, int per_block) {
  const int split = blockIdx.x % splits;
  const int chunk = (blockIdx.x / splits) % head_chunks;
  const int kvh = blockIdx.x / (splits * head_chunks);
  return {
      static_cast<int>(blockIdx.y), split, kvh,
      math::BlockHeads(heads.q_heads, heads.q_head_begin, heads.group, heads.kv_head_begin + kvh, chunk, per_block)};
}

// One block: KV head kvh of row r, query heads h0 .. h0 + G - 1 (G <= GM), keys of one split, KW
// keys a warp at a time.
template <int HD, int GM, int KW, bool kEqV>
__global__ void __launch_bounds__(kWarps * 32)
    GroupAttentionKernel(KvLayerView kv, const float* __restrict__ q, const float* fresh_k, const float* fresh_v,
                         RowTables t, HeadRange heads, int splits, int head_chunks, float* partials, float* out) {
  AwaitPriorGrid();
  constexpr int P = kDimsPerHalf<HD>, kHolders = HD / 2 / P;
  __shared__ float q_s[GM][HD];
  __shared__ float kn_s[HD];
  __shared__ float acc_s[kWarps][GM][HD];
  __shared__ float max_s[kWarps][GM], sum_s[kWarps][GM];

  const GroupBlock block = GroupBlockOf(heads, splits, head_chunks, GM);
  const int r = block.r, split = block.split, kvh = block.kvh, h0 = block.heads.first, G = block.heads.count;
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
    // Online softmax per query head, and the values from the pieces in registers. (Unpacking each
    // key's value once for all the heads instead saved 1% of decode attention on an H200 and cost
    // prefill 16%: more registers, fewer blocks a multiprocessor; bench/history/issue-25-cuda-decode-kernels.md,
    // 2026-11-27.)
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

}  // namespace temper::engine::cuda::attention
