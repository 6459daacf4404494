// DeviceBackend: the Backend of the tensor-parallel device path, over one RankOps per rank. With
// CudaOps it is the CUDA backend (cuda_backend.h builds it: one GPU, or several, per rank); with
// ReferenceOps it runs the very same host logic on the CPU, which is how that logic is tested.
//
// A Forward call is cut into passes of at most `max_rows` tokens: each item contributes a chunk,
// earlier items first, and an item longer than what is left goes on in the next pass (attention
// over the cache plus the chunk makes chunked prefill equal to a whole one). A pass whose items
// are all single tokens with no more rows than the largest graph bucket is a decode step: it runs
// as the bucket's captured graph (RankOps::Capture on every rank first, then Replay), its spare
// rows padded with rows that write nothing; other passes run eagerly. Creation runs every GEMM
// shape a pass can use on every rank (WarmGemms), so no pass loads a kernel for the first time
// while a peer's all-reduce spins.
//
// Sequence and block bookkeeping is KvPager's, exactly as in the CPU backend, so both backends
// make the same paging decisions; snapshots copy the sliding rings and share full-layer blocks.
//
// Ownership: shares the host weights (null for synthetic weights); owns the ranks' ops.
// Thread safety: as Backend (one driving thread); the ranks run in threads of their own.
#pragma once

#include <algorithm>
#include <memory>
#include <set>
#include <vector>

#include "engine/backend.h"
#include "engine/cuda/device_rank.h"
#include "engine/forward_batch.h"
#include "engine/kv_cache.h"
#include "engine/model/drafter_weights.h"
#include "engine/model/weights.h"
#include "engine/thread_pool.h"

namespace temper::engine::cuda {

struct DeviceBackendOptions {
  int64_t max_context = 0;      // 0: min(max_position_embeddings, 8192)
  KvCacheOptions kv;            // kv.max_tokens: the paged pool, in tokens (a multiple of block_tokens)
  int max_batch = 8;            // largest decode step run as a graph (graph buckets up to it)
  int max_rows = 512;           // tokens per pass
  int decode_splits = 64;       // split-KV parts of a decode row
  int top_candidates = 64;      // sampling candidates per row and rank; 0: always full logits
  bool graphs = true;           // decode steps as captured graphs
  uint64_t synthetic_seed = 1;  // for weights == null
  // Gemma 4's MTP drafter for the model (Draft), or null; its heads split like the target's
  // (CheckDeviceDrafter).
  std::shared_ptr<const DrafterWeights> drafter;
};

// The per-rank and per-device memory DeviceBackend holds, for `temper-bench` and logs.
struct DeviceMemoryReport {
  uint64_t weight_bytes = 0, kv_bytes = 0, workspace_bytes = 0;  // one rank
  int64_t kv_capacity_tokens = 0;
};

class DeviceBackend final : public Backend {
 public:
  // `ops[r]` is rank r's; every rank's shard follows PlanShards(config, ops.size()). `weights`
  // null: seeded synthetic weights (options.synthetic_seed). Errors: InvalidArgument for options
  // that do not fit the model; ResourceExhausted when a rank's memory does not hold it all.
  static Result<std::unique_ptr<DeviceBackend>> Create(const ModelConfig& config,
                                                       std::shared_ptr<const ModelWeights> weights,
                                                       std::vector<std::unique_ptr<RankOps>> ops,
                                                       const DeviceBackendOptions& options);
  ~DeviceBackend() override;
  DeviceBackend(const DeviceBackend&) = delete;
  DeviceBackend& operator=(const DeviceBackend&) = delete;

  const ModelConfig& config() const override { return config_; }
  Result<SequenceId> AddSequence() override;
  Status ReleaseSequence(SequenceId seq) override;
  Result<int64_t> SequenceLength(SequenceId seq) const override;
  Status Truncate(SequenceId seq, int64_t length) override;
  // The largest graph bucket (max_batch), beyond which a pass runs eagerly with full logit rows,
  // and at most kMaxGemvRows: a larger pass's products go through the GEMM (bf16 activations), so
  // its rows would differ from decode steps' and drafts would change the output.
  int64_t max_decode_rows() const override { return std::min<int64_t>(options_.max_batch, kMaxGemvRows); }
  int64_t context_limit() const override { return options_.max_context; }
  KvUsage kv_usage() const override;
  Result<SnapshotId> TakeSnapshot(SequenceId seq) override;
  Result<SequenceId> ForkSnapshot(SnapshotId snap) override;
  Status ReleaseSnapshot(SnapshotId snap) override;
  Result<ForwardResult> Forward(std::span<const ForwardItem> batch, const ForwardOptions& options) override;
  int sample_candidates() const override { return options_.top_candidates; }
  Result<std::vector<float>> LogitsRow(int64_t row) const override;
  bool has_drafter() const override { return options_.drafter != nullptr; }
  // The drafter's steps run eagerly, in groups of at most kMaxDraftRows sequences, with a host
  // round trip per step that merges the ranks' best candidates into the next step's tokens.
  Result<DraftResult> Draft(std::span<const DraftRequest> requests, const DraftOptions& options) override;

  int tp() const { return static_cast<int>(ranks_.size()); }
  DeviceMemoryReport memory() const;
  // Decode steps served by a captured graph so far (for tests and the bench).
  int64_t graph_steps() const { return graph_steps_; }

 private:
  struct Pass;
  DeviceBackend(const ModelConfig& config, std::shared_ptr<const ModelWeights> weights,
                const DeviceBackendOptions& options);
  // Runs fn(rank) on every rank's thread; the first error, naming the rank.
  Status OnRanks(const std::function<Status(DeviceRank&)>& fn);
  std::vector<Pass> CutIntoPasses(std::span<const ForwardItem> batch, bool candidates, int64_t* out_rows) const;
  void PadToBucket(Pass& pass) const;
  Status RunPassOnRanks(const Pass& pass, float* logits, float* hidden);
  // Uploads the block tables of `seqs` to `d`.
  Status UploadBlockTables(DeviceRank& d, std::span<const int> seqs) const;
  // One group of Draft's requests (at most kMaxDraftRows, each with its drafter position).
  Status DraftGroup(std::span<const DraftRequest> requests, std::span<const int64_t> positions, bool keep_logits,
                    std::span<std::vector<int32_t>> tokens, std::span<float> logits, int steps_stride);
  // Each rank's candidates of output rows [0, rows), merged per row.
  Result<std::vector<LogitCandidates>> GatherCandidates(std::span<const ForwardItem> batch, int64_t rows);

  ModelConfig config_;
  std::shared_ptr<const ModelWeights> weights_;
  DeviceBackendOptions options_;
  KvPager pager_;
  std::vector<int> buckets_;
  std::vector<std::unique_ptr<DeviceRank>> ranks_;
  std::unique_ptr<WorkerGroup> rank_threads_;
  int64_t graph_steps_ = 0;
  std::set<int> captured_steps_;  // graph keys every rank has captured
  // Output rows of the last Forward still held in every rank's logits buffer (LogitsRow).
  int64_t resident_rows_ = 0;
  // The sequence and position of each of those rows, whose final-norm hidden states the ranks'
  // head_in holds for Draft.
  std::vector<LogitRowPosition> resident_positions_;
};

}  // namespace temper::engine::cuda
