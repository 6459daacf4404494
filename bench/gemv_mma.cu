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
// The staged layouts are the engine's tensor-core GEMV (engine/cuda/gemv_tensor_cores.cu, which
// says why), timed here beside the layouts it grew from: in every layout above a lane loads its
// own fragment pieces, so one load instruction reads 64 bytes (4 lanes) of each of 8 weight rows,
// where the SIMT kernel's reads 512 contiguous bytes of one row; the one layout with longer runs,
// 32 bytes a lane, read fastest at 1 row (91%, below).
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

#include "engine/cuda/cuda_status.h"
#include "engine/cuda/kernel_math.h"
#include "engine/cuda/kernels.h"
#include "engine/cuda/mma_fragments.h"

namespace temper::bench {
namespace {

namespace math = engine::cuda::math;
using engine::cuda::mma::Mma;
using engine::cuda::mma::PackBf16;

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
  if (run != 0) {
    return engine::cuda::LaunchGemvTensorCores(x, engine::cuda::GemvParts().Add(w, y, out), rows, in, run, stream);
  }
  if (layout.weights_as_b && tiles == 1) {
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
