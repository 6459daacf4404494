#include "engine/cuda/cuda_backend.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#if TEMPER_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "engine/cuda/all_reduce.h"
#include "engine/cuda/cuda_ops.h"
#include "engine/cuda/cuda_status.h"
#include "engine/cuda/device_drafter.h"
#include "engine/cuda/kernels.h"
#include "engine/cuda/memory_plan.h"
#endif

namespace temper::engine::cuda {

#if !TEMPER_HAVE_CUDA

bool CudaBackendBuilt() { return false; }

Result<std::unique_ptr<DeviceBackend>> CreateCudaBackend(const ModelConfig&, std::shared_ptr<const ModelWeights>,
                                                         const CudaBackendOptions& options, CudaBackendInfo*) {
  return Status::Unimplemented(fmt::format(
      "GPUs [{}] ask for the CUDA backend, which is not in this build: nvcc was not found when it was configured "
      "(deploy/setup.sh builds it when /usr/local/cuda/bin/nvcc exists)",
      fmt::join(options.devices, ", ")));
}

#else

bool CudaBackendBuilt() { return true; }

Result<std::unique_ptr<DeviceBackend>> CreateCudaBackend(const ModelConfig& config,
                                                         std::shared_ptr<const ModelWeights> weights,
                                                         const CudaBackendOptions& options, CudaBackendInfo* info) {
  const std::vector<int>& devices = options.devices;
  if (devices.empty()) return Status::InvalidArgument("CUDA backend: no GPUs given (one ordinal per rank)");
  if (config.hidden_size > kNormResidualMaxWidth) {
    return Status::InvalidArgument(fmt::format("CUDA backend: hidden_size {} is wider than its row kernels take ({})",
                                               config.hidden_size, kNormResidualMaxWidth));
  }
  RequestQueueConnections();  // before the first CUDA call creates a context
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    return Status::InvalidArgument(
        fmt::format("CUDA backend: GPUs [{}] were asked for, but no CUDA device is usable ({})",
                    fmt::join(devices, ", "), e == cudaSuccess ? "none present" : cudaGetErrorString(e)));
  }
  for (int d : devices) {
    if (d < 0 || d >= count) {
      return Status::InvalidArgument(
          fmt::format("CUDA backend: GPU {} does not exist; this machine has {} (ordinals 0-{})", d, count, count - 1));
    }
  }
  const int tp = static_cast<int>(devices.size());
  TEMPER_ASSIGN_OR_RETURN(std::vector<RankShard> shards, PlanShards(config, tp));

  // Each GPU's free memory before anything of ours is on it, and how many ranks share it.
  std::map<int, CudaBackendInfo::Gpu> gpus;
  for (int d : devices) {
    CudaBackendInfo::Gpu& g = gpus[d];
    if (g.ranks++ > 0) continue;
    g.device = d;
    TEMPER_CUDA_TRY(cudaSetDevice(d));
    size_t free = 0, total = 0;
    TEMPER_CUDA_TRY(cudaMemGetInfo(&free, &total));
    g.free_before = free;
    cudaDeviceProp props{};
    TEMPER_CUDA_TRY(cudaGetDeviceProperties(&props, d));
    g.name = props.name;
  }

  // The paged pool gets the same number of blocks on every rank: the smallest any GPU can hold.
  const DeviceBackendOptions& b = options.backend;
  const bool one_gpu_per_rank = gpus.size() == devices.size();
  int64_t blocks = -1;
  std::map<int, GpuMemoryPlan> plans;  // per GPU, before the pool was cut to the smallest
  for (int r = 0; r < tp; ++r) {
    const CudaBackendInfo::Gpu& g = gpus[devices[r]];
    MemoryPlanInput in;
    in.free_bytes = g.free_before;
    in.kv_fraction = options.kv_memory_fraction;
    in.ranks_on_device = g.ranks;
    in.max_batch = b.max_batch;
    in.max_prefill_tokens = b.max_rows;
    in.max_sequences = b.kv.max_sequences;
    in.max_snapshots = b.kv.max_snapshots;
    in.block_tokens = b.kv.block_tokens;
    in.attention_splits = b.decode_splits;
    in.max_context = b.max_context > 0 ? b.max_context : std::min<int64_t>(config.max_position_embeddings, 8192);
    in.top_candidates = b.top_candidates;
    in.tp = tp;
    in.nccl = tp > 1 && one_gpu_per_rank;  // where NCCL may come up (it serves prefill's large messages)
    if (b.drafter) {
      const DrafterRankBytes drafter = DeviceDrafterBytes(b.drafter->config(), shards[r]);
      in.drafter_weight_bytes = drafter.weights;
      in.drafter_workspace_bytes = drafter.workspace;
    }
    Result<GpuMemoryPlan> plan = PlanGpuMemory(config, shards[r], in);
    if (!plan.ok()) return plan.status().WithContext(fmt::format("GPU {} ({})", g.device, g.name));
    blocks = blocks < 0 ? plan->num_blocks : std::min(blocks, plan->num_blocks);
    plans[devices[r]] = *plan;
  }

  std::shared_ptr<DeviceAllReduce> all_reduce;
  if (tp > 1) {
    TEMPER_ASSIGN_OR_RETURN(std::unique_ptr<DeviceAllReduce> made, DeviceAllReduce::Create(devices, {}));
    all_reduce = std::move(made);
  }
  std::vector<std::unique_ptr<RankOps>> ops;
  bool programmatic_edges = true;
  for (int r = 0; r < tp; ++r) {
    Result<std::unique_ptr<CudaOps>> rank =
        CudaOps::Create(devices[r], r, all_reduce, {.programmatic_edges = options.programmatic_edges});
    if (!rank.ok()) return rank.status().WithContext(fmt::format("rank {} on GPU {}", r, devices[r]));
    programmatic_edges = programmatic_edges && (*rank)->programmatic_edges();
    ops.push_back(std::move(*rank));
  }
  DeviceBackendOptions backend = b;
  backend.kv.max_tokens = blocks * b.kv.block_tokens;
  TEMPER_ASSIGN_OR_RETURN(std::unique_ptr<DeviceBackend> made,
                          DeviceBackend::Create(config, std::move(weights), std::move(ops), backend));
  if (info) {
    *info = CudaBackendInfo{};
    const DeviceMemoryReport m = made->memory();
    for (auto& [d, g] : gpus) {
      const GpuMemoryPlan& plan = plans[d];
      g.weight_bytes = m.weight_bytes * g.ranks;
      g.kv_bytes = m.kv_bytes * g.ranks;
      g.workspace_bytes = m.workspace_bytes * g.ranks;
      g.all_reduce_bytes = plan.all_reduce_bytes;
      g.reserve_bytes = plan.reserve_bytes;
      // The pool may be smaller than this GPU's plan (every rank takes the smallest): the rest adds
      // to the margin.
      g.margin_bytes =
          plan.margin_bytes + plan.kv_pool_bytes - static_cast<uint64_t>(blocks) * plan.rank.block * g.ranks;
      TEMPER_CUDA_TRY(cudaSetDevice(d));
      size_t free = 0, total = 0;
      TEMPER_CUDA_TRY(cudaMemGetInfo(&free, &total));
      g.free_after = free;
      info->gpus.push_back(g);
    }
    info->kv_capacity_tokens = m.kv_capacity_tokens;
    if (all_reduce) {
      const AllReduceTopology& t = all_reduce->topology();
      info->all_reduce =
          fmt::format("{} for a decode step (P2P {}, NCCL {})",
                      AllReduceAlgoName(ChooseAllReduce(t, sizeof(float) * static_cast<uint64_t>(config.hidden_size))),
                      t.p2p_ok ? "passed the transfer test" : "absent", t.nccl_available ? "up" : "unavailable");
    } else {
      info->all_reduce = "none (tp 1)";
    }
    info->programmatic_edges = programmatic_edges;
  }
  return made;
}

#endif

}  // namespace temper::engine::cuda
