// The decode GEMV on the tensor cores (gemv_mma.h), a candidate to replace the SIMT kernel of
// engine/cuda/gemv_bf16.cu from 2 activation rows up, or at every row count.
//
// Why: the SIMT kernel multiplies in fp32 on the CUDA cores. At 8 activation rows each 16 bytes of
// weights cost 64 FMAs and 16 activation loads (4 with M = 4 weight rows a warp), and on an H100
// the 8-row GEMV reads at 55-73% of the copy bandwidth (bench/RESULTS.md). One m16n8k16 MMA takes
// a 16 × 16 weight tile and 8 activation rows at once: per 16 weight bytes a lane issues one eighth
// of an MMA, and the activations cost 32 bytes of loads per 32 weight bytes read (2 float4), the
// same at 1 row as at 8. Weights still stream with 16-byte loads, kLoadsInFlight a lane, as in
// gemv_bf16.cu; the MMA's k order is permuted so that each lane's A and B pieces are 8 consecutive
// inputs of one row (MmaChunk), which keeps both loads 16-byte wide.
//
// Layout: a block is kWarpsPerBlock warps over the same T tiles of outputs; warp v takes the
// chunks of 32 inputs v, v + 8, v + 16, ..., so the block's warps together read 512 contiguous bytes
// of each weight row per round. The warps' partial sums meet in shared memory and are added in warp
// order. A tile is 16 weight rows when the weights are the MMA's A, or 8 when they are its B (and
// the activations its A, whose rows 8-15 are zeros: twice the MMAs, still few). Why both: on an
// H200 (2026-11-27, bench/RESULTS.md) the 16-row tiles read at 86% of the copy bandwidth at 1 row,
// against 98% for the SIMT kernel's 8 rows a block: a tp 1 gate projection is 1,344 blocks of 172 KB,
// 3.4 rounds of the 396 that fit at once, and the last round runs 40% full. 8-row blocks halve the
// step.
//
// The staged layouts (GemvMmaStagedKernel) ask whether the loads' shape is what costs the 1-row
// case. In every layout above a lane loads its own fragment pieces, so one load instruction reads
// 64 bytes (4 lanes) of each of 8 weight rows; the SIMT kernel's reads 512 contiguous bytes of
// one row. The one layout with longer runs, 32 bytes a lane, read fastest at 1 row (91%, below).
// Staged, a warp loads 256- or 512-byte runs of its tile's rows into shared memory and reads its
// fragments back from there: per 16 weight bytes a lane issues 1 global load, 1 shared store, 1
// shared load and 1 MMA, with no bank conflicts (Staging::Unit). Its warps split the row into
// contiguous shares, not interleaved chunks, so that a warp's stages are contiguous.
//
// Numerics: B must be bf16, so the activations are rounded to bf16 (round to nearest even), as the
// prefill GEMM's operands already are (engine/cuda/rank_forward.cpp); the products are exact and
// summed in fp32. Each output row's sums are independent of the other rows (an MMA's column j reads
// only B's column j) and of `rows`: used at every row count it would keep a verification pass's
// rows equal to a decode step's, as the SIMT kernel does today.
//
// Verdict so far (H200, 2026-11-27, bench/RESULTS.md): at 8 rows it reads at 81-85% of the copy
// bandwidth where the SIMT kernel reads at 41-57% (1.5-1.7x faster), but at 1 row it reads at
// 84-88% where the SIMT kernel with M = 2 reads at 103%, and a decode step is mostly 1-row GEMVs.
// Using it from 3 rows up only would make a row's logits depend on how many rows share its pass
// (bf16 activations, another summation order), which breaks speculation's exactness (a greedy
// verification pass must give the tokens that 1-row steps give) and batch invariance. So the
// engine keeps the SIMT kernel at every row count until a layout reads as fast as it at 1 row.
// Tried and dropped: each warp its own 8-row tiles over the whole row (no cross-warp sum), 91%
// at 1 row at best, and 42% on a tp 4 shard (too few blocks). The staged layouts are not yet
// timed (2026-11-27).
#include "bench/gemv_mma.h"

#include <cuda_runtime.h>

#include <string>

#include "bench/mma_fragments.h"
#include "engine/cuda/cuda_status.h"
#include "engine/cuda/kernel_math.h"

namespace temper::bench {
namespace {

namespace math = engine::cuda::math;

constexpr int kWarpsPerBlock = 8;
constexpr int kColumns = 8;        // activation rows of one MMA
constexpr int kChunk = 32;         // inputs of one chunk: the 4 lanes of a row × 8 weights each
constexpr int kLoadsInFlight = 8;  // 16-byte weight loads a lane issues before it uses the first

// The chunk's 8 inputs 8t .. 8t + 7 of activation row g (zeros past `rows`) as four bf16 pairs.
__device__ __forceinline__ void LoadActivations(const float* __restrict__ xs, bool has_row, uint32_t (&pairs)[4]) {
  pairs[0] = pairs[1] = pairs[2] = pairs[3] = 0;
  if (!has_row) return;
  const float4 lo = __ldg(reinterpret_cast<const float4*>(xs));
  const float4 hi = __ldg(reinterpret_cast<const float4*>(xs + 4));
  pairs[0] = PackBf16(lo.x, lo.y);
  pairs[1] = PackBf16(lo.z, lo.w);
  pairs[2] = PackBf16(hi.x, hi.y);
  pairs[3] = PackBf16(hi.z, hi.w);
}

// One chunk of 32 inputs for lane 4g + t, as two MMAs a tile. The MMAs see the chunk's inputs in
// another order (k = 2t, 2t + 1, 2t + 8, 2t + 9 of the first are inputs 8t .. 8t + 3, of the
// second 8t + 4 .. 8t + 7), the same for both operands, so their sums are the chunk's products.
//   Weights as A (kHalves 2): a[tile][0] and a[tile][1] are the lane's 16-byte pieces of weight
//   rows g and g + 8 of the tile, B's column g is activation row g.
//   Weights as B (kHalves 1): a[tile][0] is the piece of weight row g of the tile, B's column g;
//   A's row g is activation row g, its rows g + 8 are zeros.
template <int T, int kHalves>
__device__ __forceinline__ void MmaChunk(const uint4 (&a)[T][kHalves], const uint32_t (&x)[4], float (&c)[T][4]) {
#pragma unroll
  for (int tile = 0; tile < T; ++tile) {
    if constexpr (kHalves == 2) {
      Mma(c[tile], a[tile][0].x, a[tile][1].x, a[tile][0].y, a[tile][1].y, x[0], x[1]);
      Mma(c[tile], a[tile][0].z, a[tile][1].z, a[tile][0].w, a[tile][1].w, x[2], x[3]);
    } else {
      Mma(c[tile], x[0], 0, x[1], 0, a[tile][0].x, a[tile][0].y);
      Mma(c[tile], x[2], 0, x[3], 0, a[tile][0].z, a[tile][0].w);
    }
  }
}

// Outputs o0 .. o0 + T·kTileRows - 1 (o0 = T·kTileRows · block), tiles of 16 weight rows (the
// MMA's A, kHalves 2) or of 8 (its B, kHalves 1); outputs past `out` repeat the last weight row
// (read, not written).
template <int T, int kHalves>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    GemvMmaKernel(const float* __restrict__ x, const uint16_t* __restrict__ w, float* __restrict__ y, int rows, int in,
                  int out) {
  constexpr int kTileRows = 8 * kHalves;
  __shared__ float partial[kWarpsPerBlock][T * kTileRows][kColumns];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int o0 = blockIdx.x * T * kTileRows;
  const uint16_t* rows_of_lane[T][kHalves];
#pragma unroll
  for (int tile = 0; tile < T; ++tile) {
#pragma unroll
    for (int half = 0; half < kHalves; ++half) {
      const int o = o0 + tile * kTileRows + 8 * half + g;
      rows_of_lane[tile][half] = w + static_cast<int64_t>(o < out ? o : out - 1) * in + 8 * t;
    }
  }
  const bool has_row = g < rows;
  const float* xs = x + static_cast<int64_t>(has_row ? g : 0) * in + 8 * t;

  float c[T][4] = {};
  // Rounds of kUnroll chunks, the last one partly empty (its loads predicated off), so that no
  // chunk waits for another's loads: a warp's 21 chunks of a 5376-wide row are 3 rounds.
  constexpr int kUnroll = kLoadsInFlight / (kHalves * T);
  const int chunks = in / kChunk;
  for (int first = warp; first < chunks; first += kUnroll * kWarpsPerBlock) {
    uint4 a[kUnroll][T][kHalves] = {};
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int chunk = first + u * kWarpsPerBlock;
      if (chunk >= chunks) continue;
#pragma unroll
      for (int tile = 0; tile < T; ++tile) {
#pragma unroll
        for (int half = 0; half < kHalves; ++half) {
          a[u][tile][half] = __ldcs(reinterpret_cast<const uint4*>(rows_of_lane[tile][half] + chunk * kChunk));
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int chunk = first + u * kWarpsPerBlock;
      if (chunk >= chunks) continue;
      uint32_t pairs[4];
      LoadActivations(xs + chunk * kChunk, has_row, pairs);
      MmaChunk<T, kHalves>(a[u], pairs, c);
    }
  }

  // C's element (m, n) of a tile is weight row m and activation row n with the weights as A, the
  // other way round as B (whose C rows g + 8 are the zero rows').
#pragma unroll
  for (int tile = 0; tile < T; ++tile) {
    if constexpr (kHalves == 2) {
      partial[warp][tile * kTileRows + g][2 * t] = c[tile][0];
      partial[warp][tile * kTileRows + g][2 * t + 1] = c[tile][1];
      partial[warp][tile * kTileRows + g + 8][2 * t] = c[tile][2];
      partial[warp][tile * kTileRows + g + 8][2 * t + 1] = c[tile][3];
    } else {
      partial[warp][tile * kTileRows + 2 * t][g] = c[tile][0];
      partial[warp][tile * kTileRows + 2 * t + 1][g] = c[tile][1];
    }
  }
  __syncthreads();
  // One output a thread, consecutive threads on consecutive outputs of a row.
  for (int e = threadIdx.x; e < T * kTileRows * kColumns; e += kWarpsPerBlock * 32) {
    const int r = e / (T * kTileRows), local = e % (T * kTileRows), o = o0 + local;
    if (r >= rows || o >= out) continue;
    float sum = 0;
    for (int v = 0; v < kWarpsPerBlock; ++v) sum += partial[v][local][r];
    y[static_cast<int64_t>(r) * out + o] = sum;
  }
}

// The staged layouts: one tile of 16 weight rows (the MMA's A) a block, whose warps each take a
// contiguous share of the inputs, in stages of kRunBytes of each of the tile's rows. A warp reads
// a stage as the SIMT kernel reads its rows: each load instruction covers 512 contiguous bytes of
// one row (kRunBytes 512) or 256 of each of two (256), 16 bytes a lane. It stores them in its own
// part of shared memory and reads back each lane's fragment pieces (8 inputs of rows g and g + 8,
// as MmaChunk's k order wants them). The next stage's loads are issued before the current stage's
// MMAs, so a warp keeps a stage in flight: 4 KB (256) or 8 KB (512), against the SIMT kernel's 2
// KB. Both take 32 KB of shared memory for the stages a block: 8 warps of 256-byte runs, or 4 of
// 512.
template <int kRunBytes>
struct Staging {
  static_assert(kRunBytes == 256 || kRunBytes == 512, "runs of 256 or 512 bytes");
  static constexpr int kWarps = 8 * 256 / kRunBytes;
  static constexpr int kChunks = kRunBytes / (2 * kChunk);  // chunks of 32 inputs a stage
  static constexpr int kUnits = kRunBytes / 16;             // 16-byte units of a row in a stage
  static constexpr int kRowsALoad = 32 / kUnits;            // rows one load instruction covers
  static constexpr int kLoads = 16 / kRowsALoad;            // 16-byte loads a lane, a stage
  // Blocks a multiprocessor where shared memory allows (an L4's 100 KB holds 2 blocks of either):
  // 24 warps of 256-byte runs (at most 85 registers; ptxas: 68 on sm_89, 76 on sm_90, 113
  // unbounded), 16 of 512, whose 64 registers of loads in flight need up to 128 (ptxas: 128, no
  // spills; 6 blocks would leave 80 and spill 172-252 bytes). 96 or 128 KB in flight a
  // multiprocessor, where an H200 needs about 36.
  static constexpr int kMinBlocksPerSm = kRunBytes == 256 ? 3 : 4;

  // Where unit `unit` of tile row `row` lies in a warp's stage. Odd rows are rotated by 4 units
  // (64 bytes), so that the 8 lanes of a fragment read's phase (rows g and g + 1, units 4p .. 4p +
  // 3) and of a store's (one row, 8 consecutive units) fall on 8 different 16-byte bank groups.
  __device__ __forceinline__ static int Unit(int row, int unit) { return row * kUnits + (unit ^ 4 * (row & 1)); }
};

template <int kRunBytes>
__global__ void __launch_bounds__(Staging<kRunBytes>::kWarps * 32, Staging<kRunBytes>::kMinBlocksPerSm)
    GemvMmaStagedKernel(const float* __restrict__ x, const uint16_t* __restrict__ w, float* __restrict__ y, int rows,
                        int in, int out) {
  using S = Staging<kRunBytes>;
  __shared__ uint4 stage_s[S::kWarps][16 * S::kUnits];
  __shared__ float partial[S::kWarps][16][kColumns];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int o0 = blockIdx.x * 16;
  // This warp's chunks of 32 inputs, [begin, end): its share of the row, the remainder spread so
  // that no two warps differ by more than one chunk.
  const int chunks = in / kChunk, begin = chunks * warp / S::kWarps, end = chunks * (warp + 1) / S::kWarps;
  // This lane's unit of the rows each load instruction covers, and which of them it loads.
  const int load_unit = lane % S::kUnits, load_row = lane / S::kUnits;
  const bool has_row = g < rows;
  const float* xs = x + static_cast<int64_t>(has_row ? g : 0) * in + 8 * t;
  uint4* stage = stage_s[warp];

  uint4 next[S::kLoads];
  // Loads the stage of chunks first .. first + kChunks - 1 (those before `end`) into `next`.
  auto load = [&](int first) {
#pragma unroll
    for (int j = 0; j < S::kLoads; ++j) {
      const int o = o0 + S::kRowsALoad * j + load_row;
      const uint16_t* row = w + static_cast<int64_t>(o < out ? o : out - 1) * in;
      if (first + load_unit / 4 < end) {
        next[j] = __ldcs(reinterpret_cast<const uint4*>(row + first * kChunk) + load_unit);
      }
    }
  };
  float c[1][4] = {};
  if (begin < end) load(begin);
  for (int first = begin; first < end; first += S::kChunks) {
    // The last stage's fragments are read before it is overwritten. (mma.sync orders no memory;
    // the emulator's MMA is made of shuffles, so there this barrier's absence would not show.)
    __syncwarp();
#pragma unroll
    for (int j = 0; j < S::kLoads; ++j) {
      if (first + load_unit / 4 < end) stage[S::Unit(S::kRowsALoad * j + load_row, load_unit)] = next[j];
    }
    __syncwarp();
    if (first + S::kChunks < end) load(first + S::kChunks);
#pragma unroll
    for (int p = 0; p < S::kChunks; ++p) {
      if (first + p >= end) break;
      const uint4 a[1][2] = {{stage[S::Unit(g, 4 * p + t)], stage[S::Unit(g + 8, 4 * p + t)]}};
      uint32_t pairs[4];
      LoadActivations(xs + (first + p) * kChunk, has_row, pairs);
      MmaChunk<1, 2>(a, pairs, c);
    }
  }

  partial[warp][g][2 * t] = c[0][0];
  partial[warp][g][2 * t + 1] = c[0][1];
  partial[warp][g + 8][2 * t] = c[0][2];
  partial[warp][g + 8][2 * t + 1] = c[0][3];
  __syncthreads();
  for (int e = threadIdx.x; e < 16 * kColumns; e += S::kWarps * 32) {
    const int r = e / 16, local = e % 16, o = o0 + local;
    if (r >= rows || o >= out) continue;
    float sum = 0;
    for (int v = 0; v < S::kWarps; ++v) sum += partial[v][local][r];
    y[static_cast<int64_t>(r) * out + o] = sum;
  }
}

template <int kRunBytes>
void LaunchStaged(const float* x, const uint16_t* w, float* y, int rows, int in, int out, cudaStream_t stream) {
  GemvMmaStagedKernel<kRunBytes>
      <<<(out + 15) / 16, Staging<kRunBytes>::kWarps * 32, 0, stream>>>(x, w, y, rows, in, out);
}

template <int T, int kHalves>
void Launch(const float* x, const uint16_t* w, float* y, int rows, int in, int out, cudaStream_t stream) {
  constexpr int kBlockRows = T * 8 * kHalves;
  const int blocks = (out + kBlockRows - 1) / kBlockRows;
  GemvMmaKernel<T, kHalves><<<blocks, kWarpsPerBlock * 32, 0, stream>>>(x, w, y, rows, in, out);
}

}  // namespace

Status LaunchGemvMma(const float* x, const uint16_t* w, float* y, int rows, int in, int out, MmaLayout layout,
                     cudaStream_t stream) {
  const std::string where = "GEMV on the tensor cores: ";
  if (rows < 1 || rows > kColumns) return Status::InvalidArgument(where + "rows " + std::to_string(rows) + " (1-8)");
  if (in < kChunk || in % kChunk != 0) {
    return Status::InvalidArgument(where + "in " + std::to_string(in) + " is not a positive multiple of 32");
  }
  if (out < 1) return Status::InvalidArgument(where + "out " + std::to_string(out) + " is not positive");
  if (reinterpret_cast<uintptr_t>(x) % 16 != 0 || reinterpret_cast<uintptr_t>(w) % 16 != 0) {
    return Status::InvalidArgument(where + "x and w must be 16-byte aligned");
  }
  const int tiles = layout.tiles;
  const int run = layout.staged_run_bytes;
  if (run != 0 && (layout.weights_as_b || tiles != 1 || (run != 256 && run != 512))) {
    return Status::InvalidArgument(where + "staged runs of " + std::to_string(run) +
                                   " bytes: a staged layout reads runs of 256 or 512 bytes into 1 tile of 16 weight "
                                   "rows, as the MMA's A");
  }
  if (run == 256) {
    LaunchStaged<256>(x, w, y, rows, in, out, stream);
  } else if (run == 512) {
    LaunchStaged<512>(x, w, y, rows, in, out, stream);
  } else if (layout.weights_as_b && tiles == 1) {
    Launch<1, 1>(x, w, y, rows, in, out, stream);
  } else if (layout.weights_as_b && tiles == 2) {
    Launch<2, 1>(x, w, y, rows, in, out, stream);
  } else if (!layout.weights_as_b && tiles == 1) {
    Launch<1, 2>(x, w, y, rows, in, out, stream);
  } else if (!layout.weights_as_b && tiles == 2) {
    Launch<2, 2>(x, w, y, rows, in, out, stream);
  } else if (!layout.weights_as_b && tiles == 4) {
    Launch<4, 2>(x, w, y, rows, in, out, stream);
  } else {
    return Status::InvalidArgument(where + "tiles " + std::to_string(tiles) +
                                   " (1 or 2 of 8 weight rows, 1, 2 or 4 of 16)");
  }
  TEMPER_CUDA_TRY(cudaGetLastError());
  return Status::OK();
}

}  // namespace temper::bench
