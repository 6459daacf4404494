// bf16 GEMV for decode (1-8 activation rows): reading the weights once is what bounds a decode
// step, so the kernel is built to keep enough bytes in flight to saturate memory.
//
// Each warp computes M weight rows (outputs). Each lane reads 16 bytes (8 weights) of every one of
// its M rows per step, and issues kLoadsInFlight such loads before it uses the first, so a warp has
// kLoadsInFlight · 512 bytes in flight. Bytes needed in flight are bandwidth × latency: an H100
// (3.35 TB/s, ~0.7 µs) wants ~2.3 MB, 18 KB per SM; an L4 (300 GB/s, ~0.6 µs) ~180 KB, 3 KB per
// SM. At 8 warps per block and several blocks per SM, 4 loads per lane give 16 KB per 8 warps,
// enough on both as long as the grid has a few thousand rows.
//
// Activations: every warp re-reads the fp32 activation rows (from L1), 2 · R 16-byte loads per
// step. With one weight row per warp that is 16 activation loads per 16 weight bytes at batch 8,
// which bound the batch-8 GEMV at 14-23% of the copy bandwidth on the H200 (bench/RESULTS.md).
// So a warp takes M = 4 weight rows from 3 activation rows up and reuses each activation load for
// all of them: 4 activation loads per 16 weight bytes at batch 8, M = 2 at 2 rows, M = 1 at batch 1.
// Each output's sum is formed in the same order whatever M is.
//
// Weights are loaded with the streaming hint (evict first), so the activations stay in L1; the
// R · M accumulators live in registers.
//
// Two kernels share that loop: the GEMV over up to three parts (q, k and v in one launch), and the
// MLP's gate and up products with the GeGLU applied in the epilogue (a warp's M rows are P gate
// rows and the same P up rows).
#include <cuda_runtime.h>

#include <type_traits>

#include "engine/cuda/cuda_status.h"
#include "engine/cuda/kernel_loading.h"
#include "engine/cuda/kernel_math.h"
#include "engine/cuda/kernels.h"

namespace temper::engine::cuda {
namespace {

using detail::S;

constexpr int kWarpsPerBlock = 8;
constexpr int kLoadsInFlight = 4;
constexpr int kStep = 32 * 8;  // weights covered by one 16-byte load of every lane
// At least two blocks (16 warps) per multiprocessor: at most 128 registers a thread, which the
// 4-row warps of 8 activation rows would otherwise exceed (134), leaving one block and 16 KB in
// flight per SM, below the H100's 18 KB.
constexpr int kMinBlocksPerSm = 2;

// Weight rows per warp for R activation rows (see the file comment), and the GeGLU outputs per
// warp (each needs a gate row and an up row).
constexpr int RowsPerWarp(int rows) { return rows == 1 ? 1 : rows == 2 ? 2 : 4; }
constexpr int GegluOutputsPerWarp(int rows) { return RowsPerWarp(rows) > 1 ? RowsPerWarp(rows) / 2 : 1; }

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
  if (o0 >= outputs) return;
  const uint16_t* w[M];
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const PartOutput at = Locate(parts, o0 + m < outputs ? o0 + m : outputs - 1);
    w[m] = Pick(parts.w, at.part) + static_cast<int64_t>(at.index) * in;
  }
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
  if (o0 >= out) return;
  const uint16_t* w[2 * P];
#pragma unroll
  for (int m = 0; m < P; ++m) {
    const int64_t o = o0 + m < out ? o0 + m : out - 1;
    w[m] = gate + o * in;
    w[P + m] = up + o * in;
  }
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

int Blocks(int outputs, int per_warp) {
  const int warps = (outputs + per_warp - 1) / per_warp;
  return (warps + kWarpsPerBlock - 1) / kWarpsPerBlock;
}

// 128-bit loads need 16-byte aligned weight and activation rows.
bool Vectorizable(const float* x, int in) { return in % 8 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0; }
bool Aligned16(const uint16_t* w) { return reinterpret_cast<uintptr_t>(w) % 16 == 0; }

}  // namespace

Status LaunchGemvBf16(const float* x, const GemvParts& parts, int rows, int in, cudaStream_t stream) {
  const int outputs = parts.outputs();
  bool parts_ok = true, vec = Vectorizable(x, in);
  for (int p = 0; p < GemvParts::kMax; ++p) {
    if (parts.width[p] < 0 || (parts.width[p] > 0 && (!parts.w[p] || !parts.y[p]))) parts_ok = false;
    if (parts.width[p] > 0) vec = vec && Aligned16(parts.w[p]);
  }
  if (rows < 1 || rows > 8 || in < 1 || outputs < 1 || !parts_ok) {
    return Status::InvalidArgument("GEMV: " + S(rows) + " rows (1-8), in " + S(in) + ", " + S(outputs) +
                                   " outputs (each part with weights and output) are not a valid shape");
  }
  ForRows(rows, [&](auto r) {
    constexpr int R = decltype(r)::value, M = RowsPerWarp(R);
    GemvKernel<R, M><<<Blocks(outputs, M), kWarpsPerBlock * 32, 0, stream>>>(x, parts, in, outputs, vec);
  });
  TEMPER_CUDA_TRY(cudaGetLastError());
  return Status::OK();
}

Status LaunchGemvGeglu(const float* x, const uint16_t* gate, const uint16_t* up, float* y, int rows, int in, int out,
                       cudaStream_t stream) {
  if (rows < 1 || rows > 8 || in < 1 || out < 1) {
    return Status::InvalidArgument("GEMV GeGLU: " + S(rows) + " rows (1-8), in " + S(in) + ", out " + S(out) +
                                   " are not a valid shape");
  }
  const bool vec = Vectorizable(x, in) && Aligned16(gate) && Aligned16(up);
  ForRows(rows, [&](auto r) {
    constexpr int R = decltype(r)::value, P = GegluOutputsPerWarp(R);
    GemvGegluKernel<R, P><<<Blocks(out, P), kWarpsPerBlock * 32, 0, stream>>>(x, gate, up, y, in, out, vec);
  });
  TEMPER_CUDA_TRY(cudaGetLastError());
  return Status::OK();
}

Status LoadGemvKernels() {
  for (int rows = 1; rows <= 8; ++rows) {
    TEMPER_RETURN_IF_ERROR(ForRows(rows, [](auto r) -> Status {
      constexpr int R = decltype(r)::value;
      const Status gemv = LoadKernelCode(GemvKernel<R, RowsPerWarp(R)>, "GemvKernel");
      return gemv.ok() ? LoadKernelCode(GemvGegluKernel<R, GegluOutputsPerWarp(R)>, "GemvGegluKernel") : gemv;
    }));
  }
  return Status::OK();
}

}  // namespace temper::engine::cuda
