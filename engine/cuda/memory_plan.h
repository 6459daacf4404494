// GpuMemoryPlan: how one GPU's memory is divided among the tensor-parallel ranks it hosts.
//
// Order of claims (the reference deployment's vLLM ran out of memory capturing graphs on a 24 GB
// card because buffers were allocated after the KV pool took "the rest"): first the weights of every
// rank on the device, then every activation buffer and graph workspace for the largest batch and
// prefill chunk (allocated once at start-up, never during a forward pass), then the sliding-window
// rings of every sequence and snapshot slot, and only then the paged KV pool, sized as a configured
// fraction of what is left after a reserve for what CUDA allocates on its own. KV is stored in bf16;
// k_eq_v layers store V only. What the pool leaves of the rest is the plan's margin, reported.
//
// Pure host arithmetic, so it is unit-tested everywhere (tests/engine/cuda/cuda_memory_plan_test.cpp).
// Thread safety: values only.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "engine/cuda/all_reduce_protocol.h"
#include "engine/model/model_config.h"
#include "engine/model/tensor_parallel.h"

namespace temper::engine::cuda {

struct MemoryPlanInput {
  uint64_t free_bytes = 0;        // cudaMemGetInfo's free memory before anything is allocated
  double kv_fraction = 0.9;       // share of the memory left after weights, workspace and rings
  int ranks_on_device = 1;        // ranks sharing this GPU (tp 2/4 tested on one device)
  int max_batch = 8;              // largest decode batch (largest graph bucket)
  int max_prefill_tokens = 2048;  // largest prefill chunk
  int max_sequences = 8;
  int max_snapshots = 0;
  int block_tokens = 16;
  int attention_splits = 64;   // split-KV partitions per (row, head) in decode attention
  int64_t max_context = 8192;  // positions the RoPE and block tables cover
  int top_candidates = 64;     // sampling candidates per row (their buffers and sort scratch)
  int tp = 1;                  // ranks in the group: each rank's all-reduce buffers hold tp slots
  uint64_t all_reduce_slot_bytes = all_reduce::kDefaultSlotBytes;
  bool nccl = false;  // NCCL runs on this GPU (tp > 1, one GPU per rank)
  // The MTP drafter's share of each rank (DeviceDrafterBytes), when the backend runs one.
  uint64_t drafter_weight_bytes = 0;
  uint64_t drafter_workspace_bytes = 0;
};

// The cuBLASLt workspace each rank allocates for prefill GEMMs.
constexpr uint64_t kGemmWorkspaceBytes = 32ull << 20;
// What CUDA takes for each rank on a GPU after start-up measured its free memory, none of it through
// our allocations: the code of every kernel (ours, and cuBLASLt's for every GEMM bucket: WarmGemms),
// the rank's cuBLASLt handle and streams, and its decode graphs. An estimate, checked against the free
// memory left once the backend is up (CudaBackendInfo::Gpu::free_after): the 31B shape measured
// 0.48 GiB at tp 1 on an H100 and 1.92 GiB for tp 4 on one H200 (2026-11-26). Per rank, because ranks
// sharing a GPU each capture their own graphs: a per-GPU 256 MiB let tp 4 on one H100 run out.
constexpr uint64_t kCudaReservePerRankBytes = 512ull << 20;
// NCCL's own buffers where it runs: by default 4 MiB per channel, peer and protocol (NCCL_BUFFSIZE),
// a few channels over PCIe. An estimate, per GPU, checked the same way.
constexpr uint64_t kNcclReserveBytes = 512ull << 20;

// Bytes of one rank (all per rank; multiply by ranks_on_device for the GPU).
struct RankBytes {
  uint64_t weights = 0;
  uint64_t workspace = 0;     // activations, RoPE tables, split-KV partials, logits, candidates, GEMM workspace
  uint64_t all_reduce = 0;    // receive slots and flags (tp > 1)
  uint64_t ring_per_seq = 0;  // all sliding layers' K and V rings of one sequence
  uint64_t block = 0;         // one paged block, all full layers
  uint64_t kv_per_token = 0;  // full layers only: block / block_tokens
};

struct GpuMemoryPlan {
  RankBytes rank;
  int ranks_on_device = 1;
  uint64_t weight_bytes = 0;       // whole GPU
  uint64_t workspace_bytes = 0;    // whole GPU
  uint64_t all_reduce_bytes = 0;   // whole GPU
  uint64_t ring_bytes = 0;         // whole GPU: sequence and snapshot rings
  uint64_t reserve_bytes = 0;      // whole GPU: CUDA's own (kCudaReservePerRankBytes each), NCCL's where it runs
  uint64_t kv_pool_bytes = 0;      // whole GPU: paged blocks
  int64_t num_blocks = 0;          // paged blocks per rank (every rank has the same count)
  int64_t kv_capacity_tokens = 0;  // num_blocks * block_tokens
  uint64_t margin_bytes = 0;       // whole GPU: free memory no claim above takes
};

// Bytes of `shard`'s weights (its views of the bf16 checkpoint; norms replicated).
uint64_t RankWeightBytes(const ModelConfig& config, const RankShard& shard);
// Bytes of one rank's start-up buffers for `input`'s limits: what DeviceRank allocates besides
// weights and KV (DeviceRankWorkspaceBytes), and the GEMM workspace.
uint64_t RankWorkspaceBytes(const ModelConfig& config, const RankShard& shard, const MemoryPlanInput& input);

// Errors: InvalidArgument for a fraction outside (0, 1] or non-positive limits; ResourceExhausted
// (naming the bytes wanted and free) when the weights, workspace, all-reduce buffers, rings and
// reserve do not fit, or not even one block per sequence fits in the pool.
Result<GpuMemoryPlan> PlanGpuMemory(const ModelConfig& config, const RankShard& shard, const MemoryPlanInput& input);

}  // namespace temper::engine::cuda
