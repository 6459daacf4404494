// The decode GEMV's warp loop and its two kernels (gemv_bf16.cu says how they are built and why),
// as templates over R activation rows and M weight rows per warp, with the M the launchers choose
// for each R (RowsPerWarp): gemv_bf16.cu launches that one, bench/gemv_variants.cu times every M
// beside it.
//
// Device code: included by .cu files only (and by the SIMT emulator's C++ build of them).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "engine/cuda/grid_dependency.h"
#include "engine/cuda/kernel_math.h"
#include "engine/cuda/rank_ops.h"

namespace temper::engine::cuda::gemv {

constexpr int kWarpsPerBlock = 8;
constexpr int kLoadsInFlight = 4;
constexpr int kStep = 32 * 8;  // weights covered by one 16-byte load of every lane
// At least two blocks (16 warps) per multiprocessor: at most 128 registers a thread, which the
// 4-row warps of 8 activation rows would otherwise exceed (134), leaving one block and 16 KB in
// flight per SM, below the H100's 18 KB.
constexpr int kMinBlocksPerSm = 2;

// Bytes at the start of each weight row that a warp asks L2 for before it waits for the kernel
// before it (grid_dependency.h). The only memory read above that wait, and safe there: no kernel of
// a step writes weights. A GEMV launched early (a programmatic edge, sm_90) so has its first loads
// in L2 when the previous kernel ends, the DRAM streaming them while a short kernel (a norm, the
// attention's merge) runs. 4 KB of a block's 16 rows is 64 KB; at 2-3 blocks a multiprocessor
// waiting, 17-26 MB of an H100's 50 MB L2. Launched the ordinary way it is the block's own first
// loads, asked for a moment early. Not yet timed (bench/RESULTS.md, "Built since, not yet run on a GPU").
constexpr int kPrefetchBytesPerRow = 4096;

// Asks L2 for the 128-byte line that holds `p`: a hint, nothing in the emulator.
__device__ __forceinline__ void PrefetchL2(const void* p) {
#if defined(__CUDA_ARCH__)
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
#else
  (void)p;
#endif
}

template <int M>
__device__ __forceinline__ void PrefetchRowStarts(const uint16_t* const (&w)[M], int in) {
  const int lane = threadIdx.x % 32, bytes = 2 * in < kPrefetchBytesPerRow ? 2 * in : kPrefetchBytesPerRow;
#pragma unroll
  for (int m = 0; m < M; ++m) {
    for (int at = lane * 128; at < bytes; at += 32 * 128) PrefetchL2(reinterpret_cast<const char*>(w[m]) + at);
  }
}

// acc[r][m] += Σ_{j<8} w_m[j] · x[r][i + j] for the 8 bf16 weights of row m packed in packed[m].
template <int R, int M>
__device__ __forceinline__ void Accumulate(const uint4 (&packed)[M], const float* __restrict__ x, int in, int i,
                                           float (&acc)[R][M]) {
  float wf[M][8];
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const uint32_t words[4] = {packed[m].x, packed[m].y, packed[m].z, packed[m].w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      wf[m][2 * k] = __uint_as_float(words[k] << 16);
      wf[m][2 * k + 1] = __uint_as_float(words[k] & 0xffff0000u);
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float4 a = __ldg(reinterpret_cast<const float4*>(x + r * in + i));
    const float4 b = __ldg(reinterpret_cast<const float4*>(x + r * in + i + 4));
#pragma unroll
    for (int m = 0; m < M; ++m) {
      acc[r][m] += a.x * wf[m][0] + a.y * wf[m][1] + a.z * wf[m][2] + a.w * wf[m][3] + b.x * wf[m][4] + b.y * wf[m][5] +
                   b.z * wf[m][6] + b.w * wf[m][7];
    }
  }
}

// The warp's dot products of its M weight rows w[m] with the R activation rows of x ([R][in]),
// summed over the warp: every lane returns with the totals in acc.
template <int R, int M>
__device__ __forceinline__ void WarpDots(const float* __restrict__ x, int in, const uint16_t* const (&w)[M], bool vec,
                                         float (&acc)[R][M]) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int m = 0; m < M; ++m) acc[r][m] = 0;
  }
  if (vec) {
    constexpr int kUnroll = kLoadsInFlight / M > 0 ? kLoadsInFlight / M : 1;
    int i = lane * 8;
    for (; i + (kUnroll - 1) * kStep < in; i += kUnroll * kStep) {
      uint4 packed[kUnroll][M];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
        for (int m = 0; m < M; ++m) packed[u][m] = __ldcs(reinterpret_cast<const uint4*>(w[m] + i + u * kStep));
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) Accumulate<R, M>(packed[u], x, in, i + u * kStep, acc);
    }
    for (; i < in; i += kStep) {
      uint4 packed[M];
#pragma unroll
      for (int m = 0; m < M; ++m) packed[m] = __ldcs(reinterpret_cast<const uint4*>(w[m] + i));
      Accumulate<R, M>(packed, x, in, i, acc);
    }
  } else {
    for (int i = lane; i < in; i += 32) {
      float wf[M];
#pragma unroll
      for (int m = 0; m < M; ++m) wf[m] = math::Bf16ToFloat(w[m][i]);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const float xv = x[r * in + i];
#pragma unroll
        for (int m = 0; m < M; ++m) acc[r][m] += xv * wf[m];
      }
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int m = 0; m < M; ++m) {
#pragma unroll
      for (int off = 16; off > 0; off /= 2) acc[r][m] += __shfl_xor_sync(0xffffffffu, acc[r][m], off);
    }
  }
}

// Output o of the parts' concatenation: its part and its index within the part. Selects rather
// than an index into `parts`, which would put the kernel parameter in local memory.
struct PartOutput {
  int part, index;
};
__device__ __forceinline__ PartOutput Locate(const GemvParts& parts, int o) {
  const int end0 = parts.width[0], end1 = end0 + parts.width[1];
  const int part = o < end0 ? 0 : o < end1 ? 1 : 2;
  return {part, o - (part == 0 ? 0 : part == 1 ? end0 : end1)};
}
template <typename T>
__device__ __forceinline__ T Pick(const T (&values)[GemvParts::kMax], int part) {
  return part == 0 ? values[0] : part == 1 ? values[1] : values[2];
}

// Outputs o0 .. o0 + M - 1 of the parts' concatenation; outputs past the end repeat the last one
// (read, not written). Where each output goes is worked out again after the loop, so only the
// weight rows' addresses stay in registers through it.
template <int R, int M>
__global__ void __launch_bounds__(kWarpsPerBlock * 32, kMinBlocksPerSm)
    GemvKernel(const float* __restrict__ x, GemvParts parts, int in, int outputs, bool vec) {
  const int o0 = (blockIdx.x * kWarpsPerBlock + threadIdx.x / 32) * M;
  const uint16_t* w[M];
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const PartOutput at = Locate(parts, o0 + m < outputs ? o0 + m : outputs - 1);
    w[m] = Pick(parts.w, at.part) + static_cast<int64_t>(at.index) * in;
  }
  if (o0 < outputs) PrefetchRowStarts<M>(w, in);
  AwaitPriorGrid();
  if (o0 >= outputs) return;
  float acc[R][M];
  WarpDots<R, M>(x, in, w, vec, acc);
  if (threadIdx.x % 32 != 0) return;
#pragma unroll
  for (int m = 0; m < M; ++m) {
    if (o0 + m >= outputs) break;
    const PartOutput at = Locate(parts, o0 + m);
    float* y = Pick(parts.y, at.part) + at.index;
    const int width = Pick(parts.width, at.part);
#pragma unroll
    for (int r = 0; r < R; ++r) y[r * width] = acc[r][m];
  }
}

// Outputs o0 .. o0 + P - 1 of GeluTanh(x · gate) · (x · up): weight rows gate[o0..], up[o0..].
template <int R, int P>
__global__ void __launch_bounds__(kWarpsPerBlock * 32, kMinBlocksPerSm)
    GemvGegluKernel(const float* __restrict__ x, const uint16_t* __restrict__ gate, const uint16_t* __restrict__ up,
                    float* __restrict__ y, int in, int out, bool vec) {
  const int o0 = (blockIdx.x * kWarpsPerBlock + threadIdx.x / 32) * P;
  const uint16_t* w[2 * P];
#pragma unroll
  for (int m = 0; m < P; ++m) {
    const int64_t o = o0 + m < out ? o0 + m : out - 1;
    w[m] = gate + o * in;
    w[P + m] = up + o * in;
  }
  if (o0 < out) PrefetchRowStarts<2 * P>(w, in);
  AwaitPriorGrid();
  if (o0 >= out) return;
  float acc[R][2 * P];
  WarpDots<R, 2 * P>(x, in, w, vec, acc);
  if (threadIdx.x % 32 != 0) return;
#pragma unroll
  for (int m = 0; m < P; ++m) {
    if (o0 + m >= out) break;
#pragma unroll
    for (int r = 0; r < R; ++r) y[r * out + o0 + m] = math::GeluTanh(acc[r][m]) * acc[r][P + m];
  }
}

// Weight rows per warp for R activation rows (gemv_bf16.cu says why), and the GeGLU outputs per
// warp (each needs a gate row and an up row).
constexpr int RowsPerWarp(int rows) { return rows == 1 ? 2 : 4; }
constexpr int GegluOutputsPerWarp(int rows) { return RowsPerWarp(rows) > 1 ? RowsPerWarp(rows) / 2 : 1; }

// f(std::integral_constant<int, rows>) for rows 1-8.
template <typename F>
auto ForRows(int rows, F&& f) {
  switch (rows) {
    case 1:
      return f(std::integral_constant<int, 1>{});
    case 2:
      return f(std::integral_constant<int, 2>{});
    case 3:
      return f(std::integral_constant<int, 3>{});
    case 4:
      return f(std::integral_constant<int, 4>{});
    case 5:
      return f(std::integral_constant<int, 5>{});
    case 6:
      return f(std::integral_constant<int, 6>{});
    case 7:
      return f(std::integral_constant<int, 7>{});
    default:
      return f(std::integral_constant<int, 8>{});
  }
}

// Blocks of kWarpsPerBlock warps for `outputs` outputs, `per_warp` to a warp.
inline int Blocks(int outputs, int per_warp) {
  const int warps = (outputs + per_warp - 1) / per_warp;
  return (warps + kWarpsPerBlock - 1) / kWarpsPerBlock;
}

}  // namespace temper::engine::cuda::gemv
