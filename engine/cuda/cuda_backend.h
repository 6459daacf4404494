// The CUDA backend: a DeviceBackend whose ranks are GPUs (CudaOps), one host thread and one stream
// per rank, all in this process. Several ranks may share a GPU (that is how tp 2/4 are tested on
// one card). Start-up measures each GPU's free memory, plans it (memory_plan.h: weights, then
// every buffer, then the rings, then `kv_memory_fraction` of the rest for the paged KV pool),
// brings up the all-reduce (P2P transfer test, NCCL when it loads), loads the weight shards, and
// logs nothing: the caller reports CudaBackendInfo.
//
// In a build without nvcc, CreateCudaBackend answers Unimplemented with the reason, so callers need
// no build switches of their own.
//
// Thread safety: as Backend.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/cuda/device_backend.h"
#include "engine/model/model_config.h"
#include "engine/model/weights.h"

namespace temper::engine::cuda {

struct CudaBackendOptions {
  std::vector<int> devices;         // CUDA ordinal of each rank (may repeat); tp = devices.size()
  double kv_memory_fraction = 0.9;  // of what is left after weights, workspace and rings
  // A captured step's kernels launch while the kernel before them finishes, on GPUs that can
  // (sm_90 and later; programmatic_edges.h). Off only to measure what it saves.
  bool programmatic_edges = true;
  // Everything but kv.max_tokens, which the memory plan sets.
  DeviceBackendOptions backend;
};

// What start-up found and planned, per GPU, for logs and temper-bench.
struct CudaBackendInfo {
  struct Gpu {
    int device = 0;
    std::string name;
    int ranks = 0;
    uint64_t free_before = 0;  // cudaMemGetInfo before anything was allocated
    uint64_t weight_bytes = 0, kv_bytes = 0, workspace_bytes = 0, all_reduce_bytes = 0;
    uint64_t reserve_bytes = 0;  // kept for CUDA's (and NCCL's) own memory: an estimate (memory_plan.h)
    uint64_t margin_bytes = 0;   // planned to stay free beyond the reserve
    uint64_t free_after = 0;     // cudaMemGetInfo once the backend is up: what the reserve really left
  };
  std::vector<Gpu> gpus;
  std::string all_reduce;           // the algorithm a decode step's all-reduce takes, and why
  int64_t kv_capacity_tokens = 0;   // paged KV pool, in tokens
  bool programmatic_edges = false;  // captured steps' kernels launch early (asked for, and every GPU runs it)
};

// Errors: Unimplemented in a build without CUDA; InvalidArgument for an empty or unknown device
// list (naming the ordinal and the devices present); ResourceExhausted naming the GPU when the
// plan does not fit; the CUDA error of a failing call, naming it.
Result<std::unique_ptr<DeviceBackend>> CreateCudaBackend(const ModelConfig& config,
                                                         std::shared_ptr<const ModelWeights> weights,
                                                         const CudaBackendOptions& options,
                                                         CudaBackendInfo* info = nullptr);

// Whether this build has the CUDA backend.
bool CudaBackendBuilt();

}  // namespace temper::engine::cuda
