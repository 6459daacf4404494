// Fused RMSNorm kernels: the input norms, the per-head q/k/v norms with partial proportional RoPE,
// and the sandwich-norm residual update. One block per row; each row is read once and written
// once, with the sum of squares reduced in fp32 across the block.
#include <cuda_runtime.h>

#include "engine/cuda/cuda_status.h"
#include "engine/cuda/kernel_loading.h"
#include "engine/cuda/kernel_math.h"
#include "engine/cuda/kernels.h"

namespace temper::engine::cuda {
namespace {

using detail::S;

constexpr int kThreads = 256;

__device__ float BlockSum(float v, float* shared) {
  for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // `shared` may still be read from a previous call
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  float s = 0;
  for (int i = 0; i < static_cast<int>(blockDim.x / 32); ++i) s += shared[i];
  return s;
}

__global__ void NormRopeKernel(const float* x, float* out, const uint16_t* w, int n, float eps, RopeView rope,
                               const int64_t* positions, int rows_per_position) {
  __shared__ float shared[kThreads / 32];
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * n;
  float* outr = out + static_cast<int64_t>(blockIdx.x) * n;
  float sum_sq = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) sum_sq += xr[i] * xr[i];
  const float scale = math::RmsScale(BlockSum(sum_sq, shared), n, eps);
  const int64_t pos = rope.cos ? positions[blockIdx.x / rows_per_position] : -1;
  if (pos < 0) {  // no RoPE, or a padding row
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      const float v = xr[i] * scale;
      outr[i] = w ? v * math::Bf16ToFloat(w[i]) : v;
    }
    return;
  }
  // RoPE: each thread owns whole pairs (j, j + n/2), so in-place is safe.
  const int half = n / 2;
  for (int j = threadIdx.x; j < half; j += blockDim.x) {
    float a = xr[j] * scale, b = xr[j + half] * scale;
    if (w) {
      a *= math::Bf16ToFloat(w[j]);
      b *= math::Bf16ToFloat(w[j + half]);
    }
    if (j < rope.angles) math::RopePair(a, b, rope.cos[pos * rope.angles + j], rope.sin[pos * rope.angles + j]);
    outr[j] = a;
    outr[j + half] = b;
  }
}

__global__ void NormResidualKernel(float* x, const float* branch, const uint16_t* w, int n, float eps, float scale) {
  __shared__ float shared[kThreads / 32];
  const float* br = branch + static_cast<int64_t>(blockIdx.x) * n;
  float* xr = x + static_cast<int64_t>(blockIdx.x) * n;
  float sum_sq = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) sum_sq += br[i] * br[i];
  const float inv = math::RmsScale(BlockSum(sum_sq, shared), n, eps);
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    xr[i] = (xr[i] + (br[i] * inv) * math::Bf16ToFloat(w[i])) * scale;
  }
}

}  // namespace

Status LaunchNormRope(const float* x, float* out, const uint16_t* w, int rows, int n, float eps, const RopeView& rope,
                      const int64_t* positions, int rows_per_position, cudaStream_t stream) {
  if (rows < 1 || n < 1 ||
      (rope.cos && (n % 2 != 0 || rope.angles > n / 2 || !rope.sin || !positions || rows_per_position < 1))) {
    return Status::InvalidArgument("RMSNorm/RoPE: rows " + S(rows) + ", n " + S(n) + ", angles " + S(rope.angles) +
                                   " are not a valid shape");
  }
  NormRopeKernel<<<rows, kThreads, 0, stream>>>(x, out, w, n, eps, rope, positions, rows_per_position);
  TEMPER_CUDA_TRY(cudaGetLastError());
  return Status::OK();
}

Status LaunchNormResidual(float* x, const float* branch, const uint16_t* w, int rows, int n, float eps, float scale,
                          cudaStream_t stream) {
  if (rows < 1 || n < 1 || !w) {
    return Status::InvalidArgument("norm-residual: rows " + S(rows) + ", n " + S(n) + " (weight required)");
  }
  NormResidualKernel<<<rows, kThreads, 0, stream>>>(x, branch, w, n, eps, scale);
  TEMPER_CUDA_TRY(cudaGetLastError());
  return Status::OK();
}

Status LoadNormKernels() {
  TEMPER_RETURN_IF_ERROR(LoadKernelCode(NormRopeKernel, "NormRopeKernel"));
  TEMPER_RETURN_IF_ERROR(LoadKernelCode(NormResidualKernel, "NormResidualKernel"));
  return Status::OK();
}

}  // namespace temper::engine::cuda
