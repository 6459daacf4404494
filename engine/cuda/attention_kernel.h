// Attention's kernel on the tensor cores (attention.cu says how it works and why), as a template
// over the head_dim and whether the layer rebuilds its keys from V, with the pieces it is made of:
// the loads of a key's or value's dims from the cache or from this pass's fresh rows, where a
// position's row is, and the grid of blocks. attention.cu launches and loads it.
//
// Device code: included by .cu files only (and by the SIMT emulator's C++ build of them).
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "engine/cuda/grid_dependency.h"
#include "engine/cuda/kernel_math.h"
#include "engine/cuda/mma_fragments.h"
#include "engine/cuda/rank_ops.h"

namespace temper::engine::cuda::attention {

constexpr unsigned kAllLanes = 0xffffffffu;

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

using mma::Mma;
using mma::PackBf16;

constexpr int kHeads = 8;      // query heads a block: the value MMA's columns
constexpr int kTileKeys = 16;  // keys every warp takes at once: the value MMA's k

// Head dims of a piece: 32, or 16 at head_dim 32, where a piece and its RoPE partner are the whole
// head. In the score MMAs each of a row's 4 lanes holds kLaneDims contiguous dims of a piece (8:
// two k-steps; 4: one); in the value MMAs a piece is kMTiles m-tiles of 16 dims.
template <int HD>
constexpr int kPieceDims = HD >= 64 ? 32 : 16;
template <int HD>
constexpr int kLaneDims = kPieceDims<HD> / 4;
template <int HD>
constexpr int kMTiles = kPieceDims<HD> / 16;
// Warps a block: 4, or one per 64 head dims below head_dim 256 (each warp holds at least one
// piece and its RoPE partner), and one at head_dim 32.
template <int HD>
constexpr int kWarps = HD >= 256  ? 4
                       : HD >= 64 ? HD / 64
                                  : 1;

// First dim of piece i of warp w: the warp's pieces of the head's first half (w, w + kWarps, ...),
// then their RoPE partners head_dim / 2 further on.
template <int HD>
__device__ __forceinline__ int PieceBase(int w, int i) {
  constexpr int kLower = HD / (kPieceDims<HD> * kWarps<HD>) / 2;
  return kPieceDims<HD> * (w + kWarps<HD> * (i % kLower)) + (i < kLower ? 0 : HD / 2);
}

// Element e of two keys' value pieces as one pair of bf16 halves, x's in the low half.
template <int P>
__device__ __forceinline__ uint32_t PairOf(const Bf16Piece<P>& x, const Bf16Piece<P>& y, int e) {
  const uint32_t wx = x.word[e / 2], wy = y.word[e / 2];
  return e % 2 == 0 ? (wx & 0xffffu) | (wy << 16) : (wx >> 16) | (wy & 0xffff0000u);
}

// One block: KV head kvh of row r, up to kHeads query heads of its group, the keys of one split
// (attention.cu says how and why).
template <int HD, bool kEqV>
__global__ void __launch_bounds__(kWarps<HD> * 32)
    AttentionKernel(KvLayerView kv, const float* __restrict__ q, const float* fresh_k, const float* fresh_v,
                    RowTables t, HeadRange heads, int splits, int head_chunks, float* partials, float* out) {
  AwaitPriorGrid();
  constexpr int kBlockWarps = kWarps<HD>, kPieces = HD / (kPieceDims<HD> * kBlockWarps), kLower = kPieces / 2;
  constexpr int P = kLaneDims<HD>, M = kMTiles<HD>;
  static_assert(kLower >= 1, "each warp holds a piece and its RoPE partner");
  __shared__ float kn_s[HD];
  __shared__ float score_s[2][kBlockWarps][32][4];

  const GroupBlock block = GroupBlockOf(heads, splits, head_chunks, kHeads);
  const int r = block.r, split = block.split, kvh = block.kvh, h0 = block.heads.first, G = block.heads.count;
  if (G <= 0) return;  // the whole block: no barrier is skipped by part of it
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, c = lane % 4;
  const int width = kv.kv_heads * HD;
  const int64_t offset = int64_t{kvh} * HD;

  const int64_t pos = t.positions[r];
  const math::SplitSpan keys = math::SplitPositions(pos, kv.window, kv.sliding, splits, split);
  if (splits > 1 && keys.begin == keys.end) return;  // an unused split: the merge reads only the used ones
  const int slot = pos < 0 ? 0 : t.slots[r];
  const int32_t* table = t.blocks + int64_t{slot} * t.max_blocks;

  if constexpr (kEqV) {
    for (int i = tid; i < HD; i += kBlockWarps * 32) kn_s[i] = math::Bf16ToFloat(kv.k_norm[i]);
  }
  __syncthreads();

  int base_of[kPieces];
#pragma unroll
  for (int i = 0; i < kPieces; ++i) base_of[i] = PieceBase<HD>(warp, i);
  // Query head g's dims P·c .. P·c + P − 1 of each piece: the score MMA's A row g, a0 and a2 of
  // each of the piece's k-steps; heads past the block's are zeros.
  uint32_t qa[kPieces][P / 2] = {};
  if (g < G) {
    const float* qh = q + (int64_t{r} * heads.q_heads + h0 + g) * HD;
#pragma unroll
    for (int i = 0; i < kPieces; ++i) {
#pragma unroll
      for (int f = 0; f < P / 4; ++f) {
        const float4 x = *reinterpret_cast<const float4*>(qh + base_of[i] + P * c + 4 * f);
        qa[i][2 * f] = PackBf16(x.x, x.y);
        qa[i][2 * f + 1] = PackBf16(x.z, x.w);
      }
    }
  }

  const uint16_t* key_cache = kEqV ? kv.v : kv.k;
  const float* key_fresh = kEqV ? fresh_v : fresh_k;
  // This lane's scores of a tile are head g's of keys key_of[e]; its accumulators' columns are
  // heads 2c and 2c + 1.
  const int key_of[4] = {2 * c, 2 * c + 1, 2 * c + 8, 2 * c + 9};
  float m = -INFINITY, l = 0;  // head g's running max, and this lane's part of its sum of weights
  float acc[kPieces][M][4] = {};
  int parity = 0;
  for (int64_t base = keys.begin; base < keys.end; base += kTileKeys, parity ^= 1) {
    const int n = static_cast<int>(keys.end - base < kTileKeys ? keys.end - base : kTileKeys);  // >= 1
    int64_t mine = 0;  // lane i < n: where key base + i is
    if (lane < n) mine = KeySource(base + lane, kv, t, r, slot, table);

    // 1. Key rows g and g + 8 (the two n-tiles), dims P·c .. P·c + P − 1 of each piece.
    const int64_t key_source[2] = {__shfl_sync(kAllLanes, mine, g), __shfl_sync(kAllLanes, mine, g + 8)};
    const bool has_key[2] = {g < n, g + 8 < n};
    Bf16Piece<P> kp[kPieces][2];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
#pragma unroll
      for (int i = 0; i < kPieces; ++i) {
        kp[i][j] = has_key[j] ? LoadPiece<P>(key_cache, key_fresh, key_source[j], width, offset + base_of[i] + P * c)
                              : Bf16Piece<P>{};
      }
    }
    // The value rows of keys key_of[e], dims 2M·g .. 2M·g + 2M − 1 of each piece. They depend only
    // on where the keys are: loaded with the keys, the tile waits for memory once, not twice (on an
    // H200 that was faster than loading them after the score MMAs on 5 of 6 shapes, though it
    // costs about 60 registers at head_dim 512; bench/history/issue-49-whole-profile-in-minutes.md).
    Bf16Piece<2 * M> vp[kPieces][4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int64_t source = __shfl_sync(kAllLanes, mine, key_of[e]);
#pragma unroll
      for (int i = 0; i < kPieces; ++i) {
        vp[i][e] = key_of[e] < n ? LoadPiece<2 * M>(kv.v, fresh_v, source, width, offset + base_of[i] + 2 * M * g)
                                 : Bf16Piece<2 * M>{};
      }
    }
    if constexpr (kEqV) {  // K = RoPE(V ⊙ k_norm) at the key's own position (point 6), then bf16
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        if (!has_key[j]) continue;
        const int64_t at = (base + g + 8 * j) * kv.rope.angles;
#pragma unroll
        for (int i = 0; i < kLower; ++i) {
          const int d_lo = base_of[i] + P * c, d_hi = d_lo + HD / 2;
          float lo[P], hi[P];
#pragma unroll
          for (int e = 0; e < P; ++e) {
            lo[e] = kp[i][j][e] * kn_s[d_lo + e];
            hi[e] = kp[i + kLower][j][e] * kn_s[d_hi + e];
            if (d_lo + e < kv.rope.angles) {
              math::RopePair(lo[e], hi[e], kv.rope.cos[at + d_lo + e], kv.rope.sin[at + d_lo + e]);
            }
          }
#pragma unroll
          for (int e = 0; e < P / 2; ++e) {
            kp[i][j].word[e] = PackBf16(lo[2 * e], lo[2 * e + 1]);
            kp[i + kLower][j].word[e] = PackBf16(hi[2 * e], hi[2 * e + 1]);
          }
        }
      }
    }
    float s[2][4] = {};
#pragma unroll
    for (int i = 0; i < kPieces; ++i) {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
#pragma unroll
        for (int step = 0; step < P / 4; ++step) {
          Mma(s[j], qa[i][2 * step], 0, qa[i][2 * step + 1], 0, kp[i][j].word[2 * step], kp[i][j].word[2 * step + 1]);
        }
      }
    }
    float* mine_s = score_s[parity][warp][lane];
    mine_s[0] = s[0][0], mine_s[1] = s[0][1], mine_s[2] = s[1][0], mine_s[3] = s[1][1];
    __syncthreads();

    // 2. The whole scores, the same in every warp; head g's online softmax.
    float sc[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      sc[e] = score_s[parity][0][lane][e];
#pragma unroll
      for (int w = 1; w < kBlockWarps; ++w) sc[e] += score_s[parity][w][lane][e];
    }
    float tile_max = -INFINITY;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if (key_of[e] < n) tile_max = fmaxf(tile_max, sc[e]);
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(kAllLanes, tile_max, 1));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(kAllLanes, tile_max, 2));  // the quad holds all 16 keys
    const float m_new = fmaxf(m, tile_max);
    const float scale = m > -INFINITY ? expf(m - m_new) : 0.0f;
    float p[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) p[e] = key_of[e] < n ? expf(sc[e] - m_new) : 0.0f;
    const uint32_t p_low = PackBf16(p[0], p[1]), p_high = PackBf16(p[2], p[3]);  // Pᵀ's b0 and b1
    l = l * scale + ((math::Bf16ToFloat(p_low & 0xffffu) + math::Bf16ToFloat(p_low >> 16)) +
                     (math::Bf16ToFloat(p_high & 0xffffu) + math::Bf16ToFloat(p_high >> 16)));
    m = m_new;
    // Heads 2c and 2c + 1's scales are held by lanes 8c and 8c + 4.
    const float scale_even = __shfl_sync(kAllLanes, scale, 8 * c), scale_odd = __shfl_sync(kAllLanes, scale, 8 * c + 4);

    // 3. The values.
#pragma unroll
    for (int i = 0; i < kPieces; ++i) {
#pragma unroll
      for (int mt = 0; mt < M; ++mt) {
        float(&o)[4] = acc[i][mt];
        o[0] *= scale_even, o[1] *= scale_odd, o[2] *= scale_even, o[3] *= scale_odd;
        // A's rows g and g + 8 are elements mt and mt + M of the lane's value pieces.
        Mma(o, PairOf(vp[i][0], vp[i][1], mt), PairOf(vp[i][0], vp[i][1], mt + M), PairOf(vp[i][2], vp[i][3], mt),
            PairOf(vp[i][2], vp[i][3], mt + M), p_low, p_high);
      }
    }
  }

  l += __shfl_xor_sync(kAllLanes, l, 1);
  l += __shfl_xor_sync(kAllLanes, l, 2);  // head g's whole sum, in every lane of the quad
  const float sum_of[2] = {__shfl_sync(kAllLanes, l, 8 * c), __shfl_sync(kAllLanes, l, 8 * c + 4)};
#pragma unroll
  for (int i = 0; i < kPieces; ++i) {
#pragma unroll
    for (int mt = 0; mt < M; ++mt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int head = 2 * c + e % 2, d = base_of[i] + 2 * M * g + mt + (e < 2 ? 0 : M);
        if (head >= G) continue;
        const int64_t row_head = int64_t{r} * heads.q_heads + h0 + head;
        if (splits == 1) {
          out[row_head * HD + d] = sum_of[e % 2] > 0 ? acc[i][mt][e] / sum_of[e % 2] : 0.0f;
        } else {
          partials[(row_head * splits + split) * (HD + 2) + d] = acc[i][mt][e];
        }
      }
    }
  }
  if (splits > 1 && warp == 0 && c == 0 && g < G) {
    float* part = partials + ((int64_t{r} * heads.q_heads + h0 + g) * splits + split) * (HD + 2);
    part[HD] = m;
    part[HD + 1] = l;
  }
}

}  // namespace temper::engine::cuda::attention
