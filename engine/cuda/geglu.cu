// GeGLU: the MLP's gelu_tanh(gate) · up, element-wise, 4 elements per thread.
#include <cuda_runtime.h>

#include "engine/cuda/cuda_status.h"
#include "engine/cuda/grid_dependency.h"
#include "engine/cuda/kernel_loading.h"
#include "engine/cuda/kernel_math.h"
#include "engine/cuda/kernels.h"

namespace temper::engine::cuda {
namespace {

using detail::S;

__global__ void GegluKernel(float* gate, const float* up, int64_t n) {
  AwaitPriorGrid();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    gate[i] = math::GeluTanh(gate[i]) * up[i];
  }
}

}  // namespace

Status LaunchGeglu(float* gate, const float* up, int64_t n, cudaStream_t stream) {
  if (n < 1) return Status::InvalidArgument("GeGLU: " + S(n) + " elements");
  const int64_t blocks = (n + 4 * 256 - 1) / (4 * 256);
  GegluKernel<<<static_cast<int>(blocks < 65535 ? blocks : 65535), 256, 0, stream>>>(gate, up, n);
  TEMPER_CUDA_TRY(cudaGetLastError());
  return Status::OK();
}

Status LoadGegluKernels(AwaitingKernels* awaiting) {
  TEMPER_RETURN_IF_ERROR(LoadKernelCode(GegluKernel, "GegluKernel", awaiting));
  return Status::OK();
}

}  // namespace temper::engine::cuda
