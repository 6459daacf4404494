// Seeded synthetic weights filled on the device, for benchmarks of shapes whose real weights are
// not at hand (31B: 61 GB would take minutes to generate and upload from the host). Every element
// is a pure function of (seed, index), so ReferenceOps fills the very same values.
#include <cuda_runtime.h>

#include "engine/cuda/cuda_status.h"
#include "engine/cuda/grid_dependency.h"
#include "engine/cuda/kernel_loading.h"
#include "engine/cuda/kernel_math.h"
#include "engine/cuda/kernels.h"

namespace temper::engine::cuda {
namespace {

using detail::S;

__global__ void FillSyntheticKernel(uint16_t* dst, int64_t n, uint64_t seed, float mean, float halfwidth) {
  AwaitPriorGrid();
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float u = math::SyntheticUniform(seed, static_cast<uint64_t>(i));
    dst[i] = math::FloatToBf16(mean + halfwidth * (2.0f * u - 1.0f));
  }
}

}  // namespace

Status LaunchFillSynthetic(uint16_t* dst, int64_t n, uint64_t seed, float mean, float halfwidth, cudaStream_t stream) {
  if (n < 1) return Status::InvalidArgument("synthetic fill: " + S(n) + " elements");
  FillSyntheticKernel<<<1024, 256, 0, stream>>>(dst, n, seed, mean, halfwidth);
  TEMPER_CUDA_TRY(cudaGetLastError());
  return Status::OK();
}

Status LoadSyntheticKernels(AwaitingKernels* awaiting) {
  TEMPER_RETURN_IF_ERROR(LoadKernelCode(FillSyntheticKernel, "FillSyntheticKernel", awaiting));
  return Status::OK();
}

}  // namespace temper::engine::cuda
