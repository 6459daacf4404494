// bf16 GEMV for decode (1-8 activation rows): reading the weights once is what bounds a decode
// step, so the kernel is built to keep enough bytes in flight to saturate memory.
//
// One warp per output row. Each lane reads 16 bytes (8 weights) per load, and issues kUnroll
// such loads before it uses the first, so a warp has kUnroll · 512 bytes in flight. Bytes needed
// in flight are bandwidth × latency: an H100 (3.35 TB/s, ~0.7 µs) wants ~2.3 MB, 18 KB per SM; an
// L4 (300 GB/s, ~0.6 µs) ~180 KB, 3 KB per SM. At 8 warps per block and several blocks per SM, 4
// loads per lane give 16 KB per 8 warps, enough on both as long as the grid has a few thousand
// rows (every 31B matrix but k_proj at tp 4, whose 1,024 rows still keep 2 MB in flight).
// Weights are loaded with the streaming hint (evict first), so the activations, which every warp
// re-reads, stay in L1; the `rows` accumulators live in registers.
#include <cuda_runtime.h>

#include "engine/cuda/cuda_status.h"
#include "engine/cuda/kernel_loading.h"
#include "engine/cuda/kernel_math.h"
#include "engine/cuda/kernels.h"

namespace temper::engine::cuda {
namespace {

using detail::S;

constexpr int kWarpsPerBlock = 8;
constexpr int kUnroll = 4;
constexpr int kStep = 32 * 8;  // weights covered by one 16-byte load of every lane

// acc[r] += Σ_{j<8} w[j] · x[r][i + j] for the 8 bf16 weights packed in `packed`.
template <int R>
__device__ __forceinline__ void Accumulate(const uint4& packed, const float* __restrict__ x, int64_t x_stride, int i,
                                           float* acc) {
  const uint32_t words[4] = {packed.x, packed.y, packed.z, packed.w};
  float wf[8];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    wf[2 * k] = __uint_as_float(words[k] << 16);
    wf[2 * k + 1] = __uint_as_float(words[k] & 0xffff0000u);
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float4 a = __ldg(reinterpret_cast<const float4*>(x + r * x_stride + i));
    const float4 b = __ldg(reinterpret_cast<const float4*>(x + r * x_stride + i + 4));
    acc[r] +=
        a.x * wf[0] + a.y * wf[1] + a.z * wf[2] + a.w * wf[3] + b.x * wf[4] + b.y * wf[5] + b.z * wf[6] + b.w * wf[7];
  }
}

template <int R>
__global__ void GemvKernel(const float* __restrict__ x, int64_t x_stride, const uint16_t* __restrict__ w,
                           int64_t w_stride, float* __restrict__ y, int64_t y_stride, int in, int out, bool vec) {
  const int lane = threadIdx.x % 32;
  const int o = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
  if (o >= out) return;
  const uint16_t* row = w + o * w_stride;
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0;
  if (vec) {
    int i = lane * 8;
    for (; i + (kUnroll - 1) * kStep < in; i += kUnroll * kStep) {
      uint4 packed[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) packed[u] = __ldcs(reinterpret_cast<const uint4*>(row + i + u * kStep));
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) Accumulate<R>(packed[u], x, x_stride, i + u * kStep, acc);
    }
    for (; i < in; i += kStep) Accumulate<R>(__ldcs(reinterpret_cast<const uint4*>(row + i)), x, x_stride, i, acc);
  } else {
    for (int i = lane; i < in; i += 32) {
      const float wf = math::Bf16ToFloat(row[i]);
#pragma unroll
      for (int r = 0; r < R; ++r) acc[r] += x[r * x_stride + i] * wf;
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    float s = acc[r];
#pragma unroll
    for (int off = 16; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
    if (lane == 0) y[r * y_stride + o] = s;
  }
}

template <int R>
void Launch(const float* x, int64_t xs, const uint16_t* w, int64_t ws, float* y, int64_t ys, int in, int out, bool vec,
            cudaStream_t stream) {
  const int blocks = (out + kWarpsPerBlock - 1) / kWarpsPerBlock;
  GemvKernel<R><<<blocks, kWarpsPerBlock * 32, 0, stream>>>(x, xs, w, ws, y, ys, in, out, vec);
}

}  // namespace

Status LaunchGemvBf16(const float* x, int64_t x_stride, const uint16_t* w, int64_t w_stride, float* y, int64_t y_stride,
                      int rows, int in, int out, cudaStream_t stream) {
  if (rows < 1 || rows > 8 || in < 1 || out < 1) {
    return Status::InvalidArgument("GEMV: " + S(rows) + " rows (1-8), in " + S(in) + ", out " + S(out) +
                                   " are not a valid shape");
  }
  // 128-bit loads need 16-byte aligned weight rows and activation rows.
  const bool vec = in % 8 == 0 && w_stride % 8 == 0 && x_stride % 4 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(x) % 16 == 0;
  switch (rows) {
    case 1:
      Launch<1>(x, x_stride, w, w_stride, y, y_stride, in, out, vec, stream);
      break;
    case 2:
      Launch<2>(x, x_stride, w, w_stride, y, y_stride, in, out, vec, stream);
      break;
    case 3:
      Launch<3>(x, x_stride, w, w_stride, y, y_stride, in, out, vec, stream);
      break;
    case 4:
      Launch<4>(x, x_stride, w, w_stride, y, y_stride, in, out, vec, stream);
      break;
    case 5:
      Launch<5>(x, x_stride, w, w_stride, y, y_stride, in, out, vec, stream);
      break;
    case 6:
      Launch<6>(x, x_stride, w, w_stride, y, y_stride, in, out, vec, stream);
      break;
    case 7:
      Launch<7>(x, x_stride, w, w_stride, y, y_stride, in, out, vec, stream);
      break;
    default:
      Launch<8>(x, x_stride, w, w_stride, y, y_stride, in, out, vec, stream);
      break;
  }
  TEMPER_CUDA_TRY(cudaGetLastError());
  return Status::OK();
}

Status LoadGemvKernels() {
  TEMPER_RETURN_IF_ERROR(LoadKernelCode(GemvKernel<1>, "GemvKernel<1>"));
  TEMPER_RETURN_IF_ERROR(LoadKernelCode(GemvKernel<2>, "GemvKernel<2>"));
  TEMPER_RETURN_IF_ERROR(LoadKernelCode(GemvKernel<3>, "GemvKernel<3>"));
  TEMPER_RETURN_IF_ERROR(LoadKernelCode(GemvKernel<4>, "GemvKernel<4>"));
  TEMPER_RETURN_IF_ERROR(LoadKernelCode(GemvKernel<5>, "GemvKernel<5>"));
  TEMPER_RETURN_IF_ERROR(LoadKernelCode(GemvKernel<6>, "GemvKernel<6>"));
  TEMPER_RETURN_IF_ERROR(LoadKernelCode(GemvKernel<7>, "GemvKernel<7>"));
  TEMPER_RETURN_IF_ERROR(LoadKernelCode(GemvKernel<8>, "GemvKernel<8>"));
  return Status::OK();
}

}  // namespace temper::engine::cuda
