// CpuBackend: the reference implementation of Backend, fp32 compute over bf16 weights.
//
// It runs `tp` tensor-parallel ranks, each in its own thread with its own weight shards (views
// into the shared weights, cut as tensor_parallel.h describes), its own KV storage and its own
// helper threads for matrix products; the ranks meet in an in-process all-reduce with a fixed
// summation order. With tp = 1 it is the plain single-device forward pass. The forward pass itself
// is engine/cpu/forward.cpp, readable top to bottom.
//
// Ownership: shares ownership of the weights. Thread safety: as Backend (one driving thread).
#pragma once

#include <memory>
#include <vector>

#include "engine/backend.h"
#include "engine/forward_batch.h"
#include "engine/kv_cache.h"
#include "engine/model/drafter_weights.h"
#include "engine/model/model_config.h"
#include "engine/model/tensor_parallel.h"
#include "engine/model/weights.h"
#include "engine/thread_pool.h"

namespace temper::engine {

namespace cpu {
struct RankContext;
struct RopeTable;
}  // namespace cpu

struct CpuBackendOptions {
  int tp = 1;
  // Threads in all (split evenly over the ranks, at least one each); 0: one per hardware thread.
  int threads = 0;
  // Longest sequence a Forward may reach (at most max_position_embeddings); sizes the RoPE
  // tables. 0: min(max_position_embeddings, 8192).
  int64_t max_context = 0;
  KvCacheOptions kv;
  // Gemma 4's MTP drafter for this model (Draft), or null. Its heads split over the ranks like the
  // target's: each rank's drafter query heads read KV heads that rank holds.
  std::shared_ptr<const DrafterWeights> drafter;
};

class CpuBackend final : public Backend {
 public:
  // Errors: InvalidArgument for options that do not fit the model (tp that cannot split the
  // heads, max_context outside [1, max_position_embeddings]); ResourceExhausted when the KV
  // cache cannot be allocated.
  static Result<std::unique_ptr<CpuBackend>> Create(const ModelConfig& config,
                                                    std::shared_ptr<const ModelWeights> weights,
                                                    const CpuBackendOptions& options);
  ~CpuBackend() override;
  CpuBackend(const CpuBackend&) = delete;
  CpuBackend& operator=(const CpuBackend&) = delete;

  const ModelConfig& config() const override { return config_; }
  Result<SequenceId> AddSequence() override;
  Status ReleaseSequence(SequenceId seq) override;
  Result<int64_t> SequenceLength(SequenceId seq) const override;
  Status Truncate(SequenceId seq, int64_t length) override;
  int64_t context_limit() const override { return options_.max_context; }
  KvUsage kv_usage() const override;
  Result<SnapshotId> TakeSnapshot(SequenceId seq) override;
  Result<SequenceId> ForkSnapshot(SnapshotId snap) override;
  Status ReleaseSnapshot(SnapshotId snap) override;
  Result<ForwardResult> Forward(std::span<const ForwardItem> batch, const ForwardOptions& options) override;
  bool has_drafter() const override { return options_.drafter != nullptr; }
  Result<DraftResult> Draft(std::span<const DraftRequest> requests, const DraftOptions& options) override;

  int tp() const { return static_cast<int>(ranks_.size()); }

 private:
  CpuBackend(const ModelConfig& config, std::shared_ptr<const ModelWeights> weights, const CpuBackendOptions& options);
  // Gives every rank its share of options_.drafter. InvalidArgument when the drafter was not made
  // for this model or its heads cannot be split over the ranks like the target's.
  Status AttachDrafter(const std::vector<RankShard>& shards);

  ModelConfig config_;
  std::shared_ptr<const ModelWeights> weights_;
  CpuBackendOptions options_;
  KvPager pager_;
  std::vector<std::unique_ptr<cpu::RopeTable>> rope_;  // one per layer kind, shared by the ranks
  std::vector<std::unique_ptr<cpu::RankContext>> ranks_;
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<WorkerGroup> rank_threads_;
  // Per logit row of the last Forward, the sequence and position it was computed at: Draft starts
  // from those rows' hidden states (each rank's head input).
  std::vector<LogitRowPosition> hidden_rows_;
};

}  // namespace temper::engine
