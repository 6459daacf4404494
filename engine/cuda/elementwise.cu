// The small element-wise steps between the matrix products: fp32 → bf16 operands for the prefill
// GEMMs, gathering the rows whose logits are wanted, and the final logit softcap (point 12).
#include <cuda_runtime.h>

#include "engine/cuda/cuda_status.h"
#include "engine/cuda/grid_dependency.h"
#include "engine/cuda/kernel_loading.h"
#include "engine/cuda/kernel_math.h"
#include "engine/cuda/kernels.h"

namespace temper::engine::cuda {
namespace {

using detail::S;

constexpr int kThreads = 256;

int GridFor(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 65535 ? blocks : 65535);
}

__global__ void ToBf16Kernel(const float* x, uint16_t* y, int64_t n) {
  AwaitPriorGrid();
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) y[i] = math::FloatToBf16(x[i]);
}

__global__ void GatherRowsKernel(const float* x, int64_t width, const int32_t* index, float* out) {
  AwaitPriorGrid();
  const float* src = x + int64_t{index[blockIdx.x]} * width;
  float* dst = out + int64_t{blockIdx.x} * width;
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x) dst[i] = src[i];
}

__global__ void SoftcapKernel(float* y, int64_t ld, int n, float cap) {
  AwaitPriorGrid();
  float* row = y + int64_t{blockIdx.y} * ld;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    row[i] = math::Softcap(row[i], cap);
  }
}

}  // namespace

Status LaunchToBf16(const float* x, uint16_t* y, int64_t n, cudaStream_t stream) {
  if (n < 1) return Status::InvalidArgument("to-bf16: " + S(n) + " elements");
  ToBf16Kernel<<<GridFor(n), kThreads, 0, stream>>>(x, y, n);
  TEMPER_CUDA_TRY(cudaGetLastError());
  return Status::OK();
}

Status LaunchGatherRows(const float* x, int64_t width, const int32_t* index, int n, float* out, cudaStream_t stream) {
  if (n < 1 || width < 1) return Status::InvalidArgument("gather rows: " + S(n) + " rows of " + S(width));
  GatherRowsKernel<<<n, kThreads, 0, stream>>>(x, width, index, out);
  TEMPER_CUDA_TRY(cudaGetLastError());
  return Status::OK();
}

Status LaunchSoftcap(float* y, int64_t ld, int rows, int n, float cap, cudaStream_t stream) {
  if (rows < 1 || n < 1 || ld < n || !(cap > 0)) {
    return Status::InvalidArgument("softcap: rows " + S(rows) + ", n " + S(n) + ", ld " + S(ld) + ", cap must be > 0");
  }
  const int x_blocks = GridFor(n) < 128 ? GridFor(n) : 128;
  SoftcapKernel<<<dim3(x_blocks, rows), kThreads, 0, stream>>>(y, ld, n, cap);
  TEMPER_CUDA_TRY(cudaGetLastError());
  return Status::OK();
}

Status LoadElementwiseKernels(AwaitingKernels* awaiting) {
  TEMPER_RETURN_IF_ERROR(LoadKernelCode(ToBf16Kernel, "ToBf16Kernel", awaiting));
  TEMPER_RETURN_IF_ERROR(LoadKernelCode(GatherRowsKernel, "GatherRowsKernel", awaiting));
  TEMPER_RETURN_IF_ERROR(LoadKernelCode(SoftcapKernel, "SoftcapKernel", awaiting));
  return Status::OK();
}

}  // namespace temper::engine::cuda
