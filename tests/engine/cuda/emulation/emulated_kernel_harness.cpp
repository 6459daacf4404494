// The kernel tests' hooks (kernel_harness.h) in temper_cuda_emulated_tests: the kernels run by the
// SIMT emulator on host memory (EmulatedOps).
#include "engine/cuda/emulation/emulated_ops.h"
#include "engine/cuda/kernel_harness.h"

namespace temper::engine::cuda::testing {

const char* KernelsUnavailable() { return nullptr; }

std::unique_ptr<RankOps> CreateKernelOps(Communicator& comm) {
  return std::make_unique<EmulatedOps>(comm, 0, size_t{4} << 30);
}

Result<KernelBackend> CreateKernelBackend(int tp, const ModelConfig& config,
                                          std::shared_ptr<const ModelWeights> weights,
                                          const DeviceBackendOptions& options) {
  KernelBackend made;
  made.comm = std::make_unique<Communicator>(tp);
  std::vector<std::unique_ptr<RankOps>> ops;
  for (int r = 0; r < tp; ++r) {
    ops.push_back(std::make_unique<EmulatedOps>(*made.comm, r, size_t{256} << 20));
  }
  DeviceBackendOptions sized = options;
  if (sized.kv.max_tokens == KvCacheOptions{}.max_tokens) sized.kv.max_tokens = 1024;  // the GPU's plan sets it there
  TEMPER_ASSIGN_OR_RETURN(made.backend, DeviceBackend::Create(config, std::move(weights), std::move(ops), sized));
  return made;
}

}  // namespace temper::engine::cuda::testing
