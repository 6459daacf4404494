// LoadKernelCode: a kernel's code loaded on the current device now, rather than at its first launch.
//
// Since CUDA 12.2 the runtime loads a kernel's code lazily, at its first launch, and a load may wait
// for the device to drain. Our all-reduce kernel spins on the device until every peer rank's
// all-reduce has begun, so a peer whose next launch is a kernel's first waits for a drain that never
// comes: the ranks deadlock, and after 20 s the all-reduce traps and the context dies. Each rank
// therefore loads every kernel it can launch when it is created (CudaOps::Create, DeviceAllReduce::
// Create), before the first all-reduce; cuBLASLt's kernels are loaded by running each GEMM shape once
// (WarmGemms, device_rank.h). cudaFuncGetAttributes references the kernel, which loads its code.
//
// The loaders also list the kernels that begin with AwaitPriorGrid (grid_dependency.h), which are
// all of engine/cuda's but the all-reduce's: a captured graph's edges into those, and only those,
// may become programmatic (programmatic_edges.h). A kernel that does not wait (the all-reduce's,
// NCCL's, cuBLASLt's) keeps its ordinary edges.
//
// Built only with nvcc. Thread safety: as the CUDA runtime.
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <unordered_set>

#include "engine/cuda/cuda_status.h"

namespace temper::engine::cuda {

// Kernels that begin with AwaitPriorGrid, by their host-side address (what a graph's kernel node
// holds as its function).
class AwaitingKernels {
 public:
  void Add(const void* kernel) { kernels_.insert(kernel); }
  bool Contains(const void* kernel) const { return kernels_.count(kernel) > 0; }

 private:
  std::unordered_set<const void*> kernels_;
};

// Loads `kernel`, and lists it in `awaiting` unless that is null (a kernel that does not wait).
template <typename Kernel>
Status LoadKernelCode(Kernel* kernel, const char* name, AwaitingKernels* awaiting) {
  cudaFuncAttributes attributes{};
  const cudaError_t e = cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(kernel));
  if (e != cudaSuccess) {
    return CudaStatus(e, "cudaFuncGetAttributes", __FILE__, __LINE__)
        .WithContext(std::string("loading kernel ") + name);
  }
  if (awaiting) awaiting->Add(reinterpret_cast<const void*>(kernel));
  return Status::OK();
}

}  // namespace temper::engine::cuda
