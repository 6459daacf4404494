// The kernel tests' hooks (kernel_harness.h) in temper_cuda_tests: the kernels on GPU 0.
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_ops.h"
#include "engine/cuda/kernel_harness.h"
#include "engine/cuda_test_support.h"

namespace temper::engine::cuda::testing {

const char* KernelsUnavailable() { return HaveGpu() ? nullptr : "no CUDA device present"; }

std::unique_ptr<RankOps> CreateKernelOps(Communicator& /*comm*/) {
  auto ops = CudaOps::Create(0, 0, nullptr, {});
  if (!ops.ok()) FAIL(ops.status().ToString());
  return std::move(*ops);
}

Result<KernelBackend> CreateKernelBackend(int tp, const ModelConfig& config,
                                          std::shared_ptr<const ModelWeights> weights,
                                          const DeviceBackendOptions& options) {
  CudaBackendOptions cuda;
  cuda.devices.assign(static_cast<size_t>(tp), 0);
  cuda.backend = options;
  KernelBackend made;
  TEMPER_ASSIGN_OR_RETURN(made.backend, CreateCudaBackend(config, std::move(weights), cuda));
  return made;
}

}  // namespace temper::engine::cuda::testing
