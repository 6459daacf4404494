// Where the kernel tests (cuda_kernels_test.cpp) run their kernels. The same cases build into two
// binaries, each of which defines these hooks:
//  * temper_cuda_tests (cuda_kernel_harness.cpp): CudaOps and the CUDA backend on GPU 0, skipped
//    without a GPU;
//  * temper_cuda_emulated_tests (emulation/emulated_kernel_harness.cpp): the same kernels' code
//    built as C++ and run by the SIMT emulator (emulation/simt.h), on every machine.
#pragma once

#include <memory>

#include "common/status.h"
#include "engine/cuda/device_backend.h"
#include "engine/cuda/rank_ops.h"
#include "engine/model/tensor_parallel.h"
#include "skip.h"

namespace temper::engine::cuda::testing {

// Why the kernels cannot run here, or null when they can.
const char* KernelsUnavailable();

// Rank 0's ops with the kernels under test (CudaOps, or EmulatedOps on `comm`).
std::unique_ptr<RankOps> CreateKernelOps(Communicator& comm);

// A device backend of `tp` ranks with the kernels under test (on GPU 0 for every rank, or
// emulated), on `config` and `weights`.
struct KernelBackend {
  std::unique_ptr<Communicator> comm;  // the emulated ranks' (null on a GPU)
  std::unique_ptr<DeviceBackend> backend;
};
Result<KernelBackend> CreateKernelBackend(int tp, const ModelConfig& config,
                                          std::shared_ptr<const ModelWeights> weights,
                                          const DeviceBackendOptions& options);

// Kernel cases start with this: where the kernels cannot run they end as skipped (skip.h).
#define TEMPER_SKIP_WITHOUT_KERNELS()                                                              \
  do {                                                                                             \
    if (const char* why = ::temper::engine::cuda::testing::KernelsUnavailable()) TEMPER_SKIP(why); \
  } while (0)

}  // namespace temper::engine::cuda::testing
