// Decode attention's split kernel on the tensor cores (attention_tensor_cores.h), a kernel
// candidate for engine/cuda/attention.cu's SIMT split kernel: the run that decides it follows the
// rule in bench/RESULTS.md ("The tensor-core attention: the rule for the decision"; issue 25's
// 8 K goal).
//
// Why: on an H200 (2026-11-27, bench/history/issue-25-cuda-decode-kernels.md) the SIMT kernel takes 134-137 us for a tp
// 1 full layer at 8,192 keys, 33.5 MB read at 250 GB/s: each further round of 4 keys costs about 15 us where its bytes
// take 2. It is bound by instructions and latency, not bytes: about 1,900 instructions a warp per round (16 score dots
// of 16 dims with 5-shuffle sums, RoPE of the rebuilt keys, the softmax, 16 value updates), 241-255 registers a thread,
// and a group of 8 query heads split over two blocks that each read and rebuild every key. Here one block takes all 8
// query heads of a KV head and the dots run on the tensor cores: about 3,600 warp-instructions per 16 keys of a KV head
// against the SIMT kernel's 15,200 (counted by hand). Decode attention is about 13% of an 8 K step with the SIMT
// kernel; the goal is at most 10%.
//
// Layout. A block is kWarps<HD> warps (4 from head_dim 256, HD / 64 below, 1 at 32) over one KV
// head, up to kHeads query heads of its group, one split of one row's keys, in tiles of 16 keys
// that every warp takes together. The warps split the head dims, in pieces of 32 (16 at head_dim
// 32): warp w holds pieces w, w + kWarps, ... of the head's first half and their RoPE partners
// head_dim / 2 further on, so a k_eq_v layer's key pairs stay in one lane. Per tile (the dims
// below are a 32-dim piece's; a 16-dim piece has half as many in each place):
//   1. Scores, S = Q · Kᵀ over the warp's dims: m16n8k16 MMAs with the query heads as A's rows
//      (rows 8-15 zero) and 8 keys as B's columns, two MMAs (n-tiles) for the tile's 16 keys.
//      The k order inside a piece is permuted so that lane 4g + c's A and B pieces are dims
//      8c .. 8c + 7 of the piece (two k-steps): one 16-byte load of key row g (and g + 8). On
//      k_eq_v layers the key is rebuilt there, K = RoPE(V ⊙ k_norm), and rounded to bf16.
//   2. The warps' partial scores meet in shared memory (double-buffered: one barrier a tile), and
//      every warp adds them in warp order, so all hold the same scores. Lane 4g + c then holds
//      head g's scores of keys 2c, 2c + 1, 2c + 8 and 2c + 9: exactly the B operand (Pᵀ, keys as k,
//      heads as columns) of the value MMA, so the online softmax's weights go to the tensor cores
//      without a shuffle.
//   3. Values, Oᵀ += Vᵀ · Pᵀ over the warp's dims: Vᵀ is A (dims as rows, the tile's keys as k).
//      Lane 4g + c reads 4 dims (8 bytes) of each of its 4 keys' value rows and pairs halves of two
//      keys into each A register; C's rows g and g + 8 are dims 4g + mt and 4g + 2 + mt of the
//      piece (m-tile mt), its columns the heads 2c and 2c + 1.
// The output and the partials are the SIMT kernel's (num, max, sum per query head and split), so
// attention.cu's merge kernel combines the splits, and the split count is AttentionSplits' (which
// counts blocks of 8 query heads, as these are).
//
// Numerics (differ from the SIMT kernel and its CPU twin, ReferenceOps::Attention): the queries,
// the keys (rebuilt in fp32 on k_eq_v layers, then rounded) and the softmax weights are bf16
// operands; products are exact and summed in fp32. Each head's sum of weights is the sum of the
// rounded weights, so an output is a true weighted mean of the values. Outputs stay independent of
// the other rows of a pass and of its row count, as the SIMT kernel's are.
#include "bench/attention_tensor_cores.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "bench/mma_fragments.h"
#include "engine/cuda/attention_kernel.h"
#include "engine/cuda/attention_launch.h"
#include "engine/cuda/cuda_status.h"
#include "engine/cuda/grid_dependency.h"
#include "engine/cuda/kernel_math.h"
#include "engine/cuda/kernels.h"

namespace temper::bench {
namespace {

using engine::cuda::AwaitPriorGrid;
using engine::cuda::HeadRange;
using engine::cuda::KvLayerView;
using engine::cuda::RowTables;
using mma::Mma;
using mma::PackBf16;
namespace attention = engine::cuda::attention;
namespace math = engine::cuda::math;

constexpr int kHeads = 8;      // query heads a block: the value MMA's columns
constexpr int kTileKeys = 16;  // keys every warp takes at once: the value MMA's k
constexpr unsigned kAllLanes = 0xffffffffu;

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
__device__ __forceinline__ uint32_t PairOf(const attention::Bf16Piece<P>& x, const attention::Bf16Piece<P>& y, int e) {
  const uint32_t wx = x.word[e / 2], wy = y.word[e / 2];
  return e % 2 == 0 ? (wx & 0xffffu) | (wy << 16) : (wx >> 16) | (wy & 0xffff0000u);
}

// kValuesWithKeys: a tile's value rows are loaded with its keys (one wait for memory a tile, about
// 60 more registers at head_dim 512), else after the score MMAs, just before the barrier.
template <int HD, bool kEqV, bool kValuesWithKeys>
__global__ void __launch_bounds__(kWarps<HD> * 32)
    AttentionTensorCoreKernel(KvLayerView kv, const float* __restrict__ q, const float* fresh_k, const float* fresh_v,
                              RowTables t, HeadRange heads, int splits, int head_chunks, float* partials, float* out) {
  AwaitPriorGrid();
  constexpr int kBlockWarps = kWarps<HD>, kPieces = HD / (kPieceDims<HD> * kBlockWarps), kLower = kPieces / 2;
  constexpr int P = kLaneDims<HD>, M = kMTiles<HD>;
  static_assert(kLower >= 1, "each warp holds a piece and its RoPE partner");
  __shared__ float kn_s[HD];
  __shared__ float score_s[2][kBlockWarps][32][4];

  const attention::GroupBlock block = attention::GroupBlockOf(heads, splits, head_chunks, kHeads);
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
    if (lane < n) mine = attention::KeySource(base + lane, kv, t, r, slot, table);

    // 1. Key rows g and g + 8 (the two n-tiles), dims P·c .. P·c + P − 1 of each piece.
    const int64_t key_source[2] = {__shfl_sync(kAllLanes, mine, g), __shfl_sync(kAllLanes, mine, g + 8)};
    const bool has_key[2] = {g < n, g + 8 < n};
    attention::Bf16Piece<P> kp[kPieces][2];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
#pragma unroll
      for (int i = 0; i < kPieces; ++i) {
        kp[i][j] = has_key[j] ? attention::LoadPiece<P>(key_cache, key_fresh, key_source[j], width,
                                                        offset + base_of[i] + P * c)
                              : attention::Bf16Piece<P>{};
      }
    }
    // The value rows of keys key_of[e], dims 2M·g .. 2M·g + 2M − 1 of each piece. They depend only
    // on where the keys are: loaded with the keys, the tile waits for memory once, not twice.
    attention::Bf16Piece<2 * M> vp[kPieces][4];
    auto load_values = [&] {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t source = __shfl_sync(kAllLanes, mine, key_of[e]);
#pragma unroll
        for (int i = 0; i < kPieces; ++i) {
          vp[i][e] = key_of[e] < n
                         ? attention::LoadPiece<2 * M>(kv.v, fresh_v, source, width, offset + base_of[i] + 2 * M * g)
                         : attention::Bf16Piece<2 * M>{};
        }
      }
    };
    if constexpr (kValuesWithKeys) load_values();
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
    if constexpr (!kValuesWithKeys) load_values();  // the barrier's wait covers them
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

template <int HD, bool kValuesWithKeys>
void LaunchOrder(const KvLayerView& kv, const float* q, const float* k, const float* v, float* out, int rows,
                 const RowTables& t, const HeadRange& heads, int splits, float* partials, cudaStream_t stream) {
  const attention::GroupGrid grid = attention::GroupGridOf(kv, heads, splits, rows, kHeads);
  constexpr int kThreads = kWarps<HD> * 32;
  if (kv.k) {
    AttentionTensorCoreKernel<HD, false, kValuesWithKeys>
        <<<grid.blocks, kThreads, 0, stream>>>(kv, q, k, v, t, heads, splits, grid.head_chunks, partials, out);
  } else {
    AttentionTensorCoreKernel<HD, true, kValuesWithKeys>
        <<<grid.blocks, kThreads, 0, stream>>>(kv, q, k, v, t, heads, splits, grid.head_chunks, partials, out);
  }
}

}  // namespace

const char* TensorCoreAttentionOrderName(TensorCoreAttentionOrder order) {
  switch (order) {
    case TensorCoreAttentionOrder::kValuesAfterScores:
      return "values loaded after the scores";
    case TensorCoreAttentionOrder::kValuesWithKeys:
      return "values loaded with the keys";
  }
  return "unknown order";
}

Status LaunchAttentionTensorCores(const KvLayerView& kv, const float* q, const float* k, const float* v, float* out,
                                  int rows, const RowTables& t, const HeadRange& heads, int splits, float* partials,
                                  TensorCoreAttentionOrder order, cudaStream_t stream) {
  constexpr const char* kWhat = "attention on the tensor cores";
  TEMPER_RETURN_IF_ERROR(engine::cuda::CheckAttentionArguments(kWhat, kv, rows, heads, splits, partials));
  if (order != TensorCoreAttentionOrder::kValuesAfterScores && order != TensorCoreAttentionOrder::kValuesWithKeys) {
    return Status::InvalidArgument(std::string(kWhat) + ": order " + std::to_string(static_cast<int>(order)) +
                                   " is not one of TensorCoreAttentionOrder's values");
  }
  TEMPER_RETURN_IF_ERROR(engine::cuda::ForAttentionHeadDim(kWhat, kv.head_dim, [&](auto hd) {
    constexpr int HD = decltype(hd)::value;
    if (order == TensorCoreAttentionOrder::kValuesWithKeys) {
      LaunchOrder<HD, true>(kv, q, k, v, out, rows, t, heads, splits, partials, stream);
    } else {
      LaunchOrder<HD, false>(kv, q, k, v, out, rows, t, heads, splits, partials, stream);
    }
  }));
  TEMPER_CUDA_TRY(cudaGetLastError());
  if (splits == 1) return Status::OK();
  return engine::cuda::LaunchAttentionMerge(partials, out, rows, heads.q_heads, kv.head_dim, splits, t.positions,
                                            kv.window, kv.sliding, stream);
}

}  // namespace temper::bench
