// The decode GEMV on the tensor cores (gemv_tensor_cores.h), a kernel candidate for
// engine/cuda/gemv_bf16.cu: the run that decides it follows the rule in bench/RESULTS.md ("The
// tensor-core decode GEMV: the rule for the decision").
//
// Why: at 8 activation rows the SIMT kernel spends 64 FMAs and 4-16 activation loads on each 16
// bytes of weights and reads at 41-57% of the copy bandwidth on an H200; one mma.sync m16n8k16
// takes a 16 x 16 weight tile against 8 activation rows at once, the same instructions at 1 row
// as at 8. Earlier tensor-core layouts (gemv_mma.cu, deleted once an H200 had timed them:
// bench/history/issue-25-cuda-decode-kernels.md) read at 81-85% at 8 rows but 84-91% at 1 row,
// where the SIMT kernel reads at 98-103%. In all of them a lane loaded its own fragment pieces, so
// one load instruction read 64 bytes of each of 8 rows, where the SIMT kernel's reads 512
// contiguous bytes of one row. This kernel reads as the SIMT kernel does and reorders through
// shared memory.
//
// Layout: a block is one tile of 16 weight rows, the MMA's A: 16 outputs of the parts'
// concatenation, or 8 GeGLU outputs (their gate rows, then their up rows). Its warps each take a
// contiguous share of the inputs, in stages of kRunBytes of each of the tile's rows: each load
// instruction covers 512 contiguous bytes of one row (kRunBytes 512) or 256 of each of two (256),
// 16 bytes a lane. A warp stores a stage in its own part of shared memory and reads back each
// lane's fragment pieces, 8 inputs of rows g and g + 8 (the MMA's k order permuted the same way
// for A and B, so each piece is one 16-byte load). The next stage's loads are issued before the
// current stage's MMAs, so a warp keeps a stage in flight: 4 KB (256) or 8 KB (512), against the
// SIMT kernel's 2 KB. Per 16 weight bytes a lane issues 1 global load, 1 shared store, 1 shared
// load and 1 MMA. The warps' partial sums meet in shared memory and are added in warp order.
//
// Numerics: B must be bf16, so the activations are rounded to nearest even, as the prefill GEMM's
// operands already are (engine/cuda/rank_forward.cpp); the products are exact and summed in fp32.
// An output's sums depend on neither the other rows (an MMA's column j reads only B's column j)
// nor `rows`: a verification pass's rows equal a decode step's, as with the SIMT kernel.
#include "bench/gemv_tensor_cores.h"

#include <cuda_runtime.h>

#include <string>

#include "bench/mma_fragments.h"
#include "engine/cuda/cuda_status.h"
#include "engine/cuda/gemv_kernel.h"
#include "engine/cuda/grid_dependency.h"
#include "engine/cuda/kernel_math.h"

namespace temper::bench {
namespace {

using engine::cuda::AwaitPriorGrid;
using engine::cuda::GemvParts;
using engine::cuda::detail::S;
using mma::Mma;
using mma::PackBf16;
namespace gemv = engine::cuda::gemv;
namespace math = engine::cuda::math;

constexpr int kTileRows = 16;  // weight rows of a block: the MMA's M
constexpr int kColumns = 8;    // activation rows of one MMA: its N
constexpr int kChunk = 32;     // inputs a warp's MMA pair takes: the 4 lanes of a row x 8 each

template <int kRunBytes>
struct Staging {
  static_assert(kRunBytes == 256 || kRunBytes == 512, "runs of 256 or 512 bytes");
  static constexpr int kWarps = 8 * 256 / kRunBytes;  // 32 KB of stages a block either way
  static constexpr int kChunks = kRunBytes / (2 * kChunk);
  static constexpr int kUnits = kRunBytes / 16;   // 16-byte units of a row in a stage
  static constexpr int kRowsALoad = 32 / kUnits;  // rows one load instruction covers
  static constexpr int kLoads = kTileRows / kRowsALoad;
  // Blocks a multiprocessor where shared memory allows (an L4's 100 KB holds 2 of either): 24
  // warps of 256-byte runs (at most 85 registers), 16 of 512, whose 64 registers of loads in
  // flight need up to 128 (6 blocks would leave 80 and spill). 96 or 128 KB in flight a
  // multiprocessor, where an H200 needs about 36 and an L4 about 3.
  static constexpr int kMinBlocksPerSm = kRunBytes == 256 ? 3 : 4;

  // Where unit `unit` of tile row `row` lies in a warp's stage. Odd rows are rotated by 4 units
  // (64 bytes), so that the 8 lanes of a fragment read's phase (rows g and g + 1, units 4p .. 4p +
  // 3) and of a store's (one row, 8 consecutive units) fall on 8 different 16-byte bank groups.
  __device__ __forceinline__ static int Unit(int row, int unit) { return row * kUnits + (unit ^ 4 * (row & 1)); }
};

// What a block computes: tile row m's weights, and where its sums go. Parts: outputs o0 .. o0 + 15
// of the parts' concatenation (rows past the end repeat the last, read and not written). GeGLU:
// outputs o0 .. o0 + 7, tile rows 0-7 their gate rows and 8-15 their up rows.
struct Products {
  GemvParts parts;  // parts; or gate in w[0], up in w[1], y[0] the GeGLU's output
  int outputs;
  bool geglu;

  __device__ __forceinline__ int FirstOutput() const { return blockIdx.x * (geglu ? kTileRows / 2 : kTileRows); }
  __device__ __forceinline__ const uint16_t* Row(int m, int in) const {
    if (geglu) {
      // Selects rather than indexes parts.w, which would put the kernel parameter in local memory.
      const int o = FirstOutput() + m % 8;
      return (m < 8 ? parts.w[0] : parts.w[1]) + static_cast<int64_t>(o < outputs ? o : outputs - 1) * in;
    }
    const int o = FirstOutput() + m;
    const gemv::PartOutput at = gemv::Locate(parts, o < outputs ? o : outputs - 1);
    return gemv::Pick(parts.w, at.part) + static_cast<int64_t>(at.index) * in;
  }
};

template <int kRunBytes>
__global__ void __launch_bounds__(Staging<kRunBytes>::kWarps * 32, Staging<kRunBytes>::kMinBlocksPerSm)
    GemvTensorCoreKernel(const float* __restrict__ x, Products products, int rows, int in) {
  using St = Staging<kRunBytes>;
  __shared__ uint4 stage_s[St::kWarps][kTileRows * St::kUnits];
  __shared__ float partial[St::kWarps][kTileRows][kColumns];
  // The tile's weight rows, worked out once: kept in registers through the loop, a lane's 8-16
  // row addresses would spill.
  __shared__ const uint16_t* rows_s[kTileRows];
  if (threadIdx.x < kTileRows) rows_s[threadIdx.x] = products.Row(threadIdx.x, in);
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  // This warp's chunks of 32 inputs, [begin, end): its share of the row, the remainder spread so
  // that no two warps differ by more than one chunk.
  const int chunks = in / kChunk, begin = chunks * warp / St::kWarps, end = chunks * (warp + 1) / St::kWarps;
  // This lane's unit of the rows each load instruction covers, and which of them it loads.
  const int load_unit = lane % St::kUnits, load_row = lane / St::kUnits;

  // The first stage of every warp's share, asked of L2 before the wait for the kernel before
  // (grid_dependency.h): no kernel of a step writes weights.
  if (begin < end) {
    constexpr int kLines = kTileRows * kRunBytes / 128;
#pragma unroll
    for (int line = lane; line < kLines; line += 32) {
      const char* row = reinterpret_cast<const char*>(rows_s[line / (kRunBytes / 128)] + begin * kChunk);
      gemv::PrefetchL2(row + 128 * (line % (kRunBytes / 128)));
    }
  }
  AwaitPriorGrid();

  const bool has_row = g < rows;
  const float* xs = x + static_cast<int64_t>(has_row ? g : 0) * in + 8 * t;
  uint4* stage = stage_s[warp];
  uint4 next[St::kLoads];
  // Loads the stage of chunks first .. first + kChunks - 1 (those before `end`) into `next`.
  auto load = [&](int first) {
#pragma unroll
    for (int j = 0; j < St::kLoads; ++j) {
      if (first + load_unit / 4 < end) {
        const uint16_t* row = rows_s[St::kRowsALoad * j + load_row] + first * kChunk;
        next[j] = __ldcs(reinterpret_cast<const uint4*>(row) + load_unit);
      }
    }
  };
  float c[4] = {};
  if (begin < end) load(begin);
  for (int first = begin; first < end; first += St::kChunks) {
    // The last stage's fragments are read before it is overwritten. (mma.sync orders no memory;
    // the emulator's MMA is made of shuffles, so there this barrier's absence would not show.)
    __syncwarp();
#pragma unroll
    for (int j = 0; j < St::kLoads; ++j) {
      if (first + load_unit / 4 < end) stage[St::Unit(St::kRowsALoad * j + load_row, load_unit)] = next[j];
    }
    __syncwarp();
    if (first + St::kChunks < end) load(first + St::kChunks);
#pragma unroll
    for (int p = 0; p < St::kChunks; ++p) {
      if (first + p >= end) break;
      const uint4 a0 = stage[St::Unit(g, 4 * p + t)], a1 = stage[St::Unit(g + 8, 4 * p + t)];
      // B's column g is activation row g (zeros past `rows`), inputs 8t .. 8t + 7 of the chunk.
      uint32_t b[4] = {0, 0, 0, 0};
      if (has_row) {
        const float4 lo = __ldg(reinterpret_cast<const float4*>(xs + (first + p) * kChunk));
        const float4 hi = __ldg(reinterpret_cast<const float4*>(xs + (first + p) * kChunk + 4));
        b[0] = PackBf16(lo.x, lo.y);
        b[1] = PackBf16(lo.z, lo.w);
        b[2] = PackBf16(hi.x, hi.y);
        b[3] = PackBf16(hi.z, hi.w);
      }
      // The MMAs see the chunk's inputs in another order (k = 2t, 2t + 1, 2t + 8, 2t + 9 of the
      // first are inputs 8t .. 8t + 3, of the second 8t + 4 .. 8t + 7), the same for A and B.
      Mma(c, a0.x, a1.x, a0.y, a1.y, b[0], b[1]);
      Mma(c, a0.z, a1.z, a0.w, a1.w, b[2], b[3]);
    }
  }

  // C's element (m, n) is tile row m and activation row n.
  partial[warp][g][2 * t] = c[0];
  partial[warp][g][2 * t + 1] = c[1];
  partial[warp][g + 8][2 * t] = c[2];
  partial[warp][g + 8][2 * t + 1] = c[3];
  __syncthreads();
  auto sum = [&](int m, int r) {
    float s = 0;
    for (int v = 0; v < St::kWarps; ++v) s += partial[v][m][r];
    return s;
  };
  const int o0 = products.FirstOutput();
  if (products.geglu) {
    for (int e = threadIdx.x; e < kTileRows / 2 * kColumns; e += St::kWarps * 32) {
      const int r = e / (kTileRows / 2), m = e % (kTileRows / 2);
      if (r >= rows || o0 + m >= products.outputs) continue;
      products.parts.y[0][static_cast<int64_t>(r) * products.outputs + o0 + m] =
          math::GeluTanh(sum(m, r)) * sum(m + 8, r);
    }
    return;
  }
  for (int e = threadIdx.x; e < kTileRows * kColumns; e += St::kWarps * 32) {
    const int r = e / kTileRows, m = e % kTileRows;
    if (r >= rows || o0 + m >= products.outputs) continue;
    const gemv::PartOutput at = gemv::Locate(products.parts, o0 + m);
    float* y = gemv::Pick(products.parts.y, at.part);
    y[static_cast<int64_t>(r) * gemv::Pick(products.parts.width, at.part) + at.index] = sum(m, r);
  }
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

Status Launch(const float* x, const Products& products, int rows, int in, int run_bytes, cudaStream_t stream,
              const std::string& what) {
  std::string wrong;
  if (rows < 1 || rows > kColumns) wrong = "rows " + S(rows) + " (1-8)";
  if (wrong.empty() && (in < kChunk || in % kChunk != 0)) wrong = "in " + S(in) + " is not a positive multiple of 32";
  if (wrong.empty() && products.outputs < 1) wrong = S(products.outputs) + " outputs";
  if (wrong.empty() && run_bytes != 256 && run_bytes != 512) wrong = "runs of " + S(run_bytes) + " bytes (256 or 512)";
  for (int p = 0; p < GemvParts::kMax && wrong.empty(); ++p) {
    if (products.parts.w[p] && (!Aligned16(products.parts.w[p]) || !products.parts.y[p])) {
      wrong = "weights of part " + S(p) + " not 16-byte aligned, or without an output";
    }
  }
  if (wrong.empty() && !Aligned16(x)) wrong = "x not 16-byte aligned";
  if (!wrong.empty()) return Status::InvalidArgument(what + " on the tensor cores: " + wrong);
  const int per_block = products.geglu ? kTileRows / 2 : kTileRows;
  const int blocks = (products.outputs + per_block - 1) / per_block;
  if (run_bytes == 256) {
    GemvTensorCoreKernel<256><<<blocks, Staging<256>::kWarps * 32, 0, stream>>>(x, products, rows, in);
  } else {
    GemvTensorCoreKernel<512><<<blocks, Staging<512>::kWarps * 32, 0, stream>>>(x, products, rows, in);
  }
  TEMPER_CUDA_TRY(cudaGetLastError());
  return Status::OK();
}

}  // namespace

Status LaunchGemvTensorCores(const float* x, const GemvParts& parts, int rows, int in, int run_bytes,
                             cudaStream_t stream) {
  for (int p = 0; p < GemvParts::kMax; ++p) {
    if (parts.width[p] < 0 || (parts.width[p] > 0 && !parts.w[p])) {
      return Status::InvalidArgument("GEMV on the tensor cores: part " + S(p) + " of width " + S(parts.width[p]) +
                                     " without weights");
    }
  }
  return Launch(x, Products{parts, parts.outputs(), false}, rows, in, run_bytes, stream, "GEMV");
}

Status LaunchGemvGegluTensorCores(const float* x, const uint16_t* gate, const uint16_t* up, float* y, int rows, int in,
                                  int out, int run_bytes, cudaStream_t stream) {
  if (!gate || !up || !y) return Status::InvalidArgument("GEMV GeGLU on the tensor cores: gate, up and y are needed");
  // Gate and up as two parts without widths, both writing y (Products says how a block reads them).
  GemvParts parts;
  parts.w[0] = gate;
  parts.w[1] = up;
  parts.y[0] = parts.y[1] = y;
  return Launch(x, Products{parts, out, true}, rows, in, run_bytes, stream, "GEMV GeGLU");
}

}  // namespace temper::bench
