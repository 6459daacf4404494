#include "engine/cuda/device_backend.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "engine/cuda/device_drafter.h"
#include "engine/cuda/graph_buckets.h"
#include "engine/forward_batch.h"
#include "engine/logit_candidates.h"
#include "engine/model/tensor_parallel.h"

namespace temper::engine::cuda {

// One pass as the host prepares it: the bytes of its inputs (PassInputLayout), and what maps its
// rows back to the batch.
struct DeviceBackend::Pass {
  PassShape shape;
  std::vector<char> inputs;
  std::vector<int> seqs;             // sequences with rows in this pass (their block tables go up)
  std::vector<int64_t> batch_token;  // pass row -> index among the batch's tokens (for hidden states)
  int graph_bucket = -1;             // >= 0: run as that bucket's captured graph
  int real_rows = 0;                 // logit rows before padding to the bucket
};

DeviceBackend::DeviceBackend(const ModelConfig& config, std::shared_ptr<const ModelWeights> weights,
                             const DeviceBackendOptions& options)
    : config_(config), weights_(std::move(weights)), options_(options), pager_(options.kv) {}

DeviceBackend::~DeviceBackend() = default;

Result<std::unique_ptr<DeviceBackend>> DeviceBackend::Create(const ModelConfig& config,
                                                             std::shared_ptr<const ModelWeights> weights,
                                                             std::vector<std::unique_ptr<RankOps>> ops,
                                                             const DeviceBackendOptions& options) {
  if (weights && weights->num_layers() != config.num_layers) {
    return Status::InvalidArgument("device backend: the weights do not belong to this config");
  }
  DeviceBackendOptions opts = options;
  if (opts.max_context == 0) opts.max_context = std::min<int64_t>(config.max_position_embeddings, 8192);
  if (opts.max_context < 1 || opts.max_context > config.max_position_embeddings) {
    return Status::InvalidArgument(
        fmt::format("device backend: max_context {} is outside [1, max_position_embeddings = {}]", opts.max_context,
                    config.max_position_embeddings));
  }
  const KvCacheOptions& kv = opts.kv;
  if (kv.max_sequences < 1 || kv.block_tokens < 1 || kv.max_tokens < kv.block_tokens || kv.max_snapshots < 0) {
    return Status::InvalidArgument(fmt::format(
        "device backend: KV options must be positive and hold one block (max_sequences {}, block_tokens {}, "
        "max_tokens {}, max_snapshots {})",
        kv.max_sequences, kv.block_tokens, kv.max_tokens, kv.max_snapshots));
  }
  if (opts.max_batch < 1 || opts.max_rows < opts.max_batch || opts.decode_splits < 1 || opts.top_candidates < 0 ||
      opts.top_candidates > 256) {
    return Status::InvalidArgument(fmt::format(
        "device backend: max_batch {} must be >= 1 and <= max_rows {}, decode_splits {} >= 1, top_candidates {} in "
        "[0, 256]",
        opts.max_batch, opts.max_rows, opts.decode_splits, opts.top_candidates));
  }
  if (ops.empty()) return Status::InvalidArgument("device backend: no ranks");
  const int tp = static_cast<int>(ops.size());
  TEMPER_ASSIGN_OR_RETURN(std::vector<RankShard> shards, PlanShards(config, tp));
  for (const RankShard& s : shards) {
    if (opts.top_candidates > s.vocab.size()) {
      return Status::InvalidArgument(
          fmt::format("device backend: top_candidates {} exceeds rank {}'s {} vocabulary rows", opts.top_candidates,
                      s.rank, s.vocab.size()));
    }
  }

  std::unique_ptr<DeviceBackend> b(new DeviceBackend(config, std::move(weights), opts));
  b->buckets_ = GraphBuckets(opts.max_batch);
  RankLimits limits;
  limits.max_rows = opts.max_rows;
  limits.max_out_rows = std::max(kv.max_sequences, opts.max_batch);
  limits.max_sequences = kv.max_sequences;
  limits.max_snapshots = kv.max_snapshots;
  limits.max_context = opts.max_context;
  limits.block_tokens = kv.block_tokens;
  limits.num_blocks = b->pager_.num_blocks();
  limits.decode_splits = opts.decode_splits;
  limits.top_candidates = opts.top_candidates;
  for (int r = 0; r < tp; ++r) {
    auto rank = std::make_unique<DeviceRank>();
    rank->config = &b->config_;
    rank->shard = shards[r];
    rank->limits = limits;
    rank->ops = std::move(ops[r]);
    b->ranks_.push_back(std::move(rank));
  }
  b->rank_threads_ = std::make_unique<WorkerGroup>(tp);
  const ModelWeights* host = b->weights_.get();
  TEMPER_RETURN_IF_ERROR(b->OnRanks([&](DeviceRank& d) { return BuildDeviceRank(d, host, opts.synthetic_seed); }));
  if (const DrafterWeights* drafter = opts.drafter.get()) {
    if (!config.model_type.starts_with("gemma4")) {
      return Status::Unimplemented(
          fmt::format("device backend: the MTP drafter drafts for Gemma 4 targets only; the target model is '{}'",
                      config.model_type));
    }
    Result<std::vector<Range>> heads = PlanDrafterHeads(drafter->config(), config, shards);
    if (!heads.ok()) return heads.status().WithContext("device backend");
    TEMPER_RETURN_IF_ERROR(b->OnRanks([&](DeviceRank& d) -> Status {
      TEMPER_RETURN_IF_ERROR(CheckDeviceDrafter(d, drafter->config()));
      return BuildDeviceDrafter(d, *drafter);
    }));
  }
  // Every GEMM kernel a pass can launch, loaded before the first all-reduce (device_rank.h).
  TEMPER_RETURN_IF_ERROR(b->OnRanks([](DeviceRank& d) -> Status {
    const Status warmed = WarmGemms(d);
    return warmed.ok() ? d.ops->Synchronize() : warmed;
  }));
  return b;
}

Status DeviceBackend::OnRanks(const std::function<Status(DeviceRank&)>& fn) {
  std::vector<Status> status(ranks_.size());
  rank_threads_->Run([&](int r) { status[r] = fn(*ranks_[r]); });
  for (size_t r = 0; r < status.size(); ++r) {
    if (!status[r].ok()) return status[r].WithContext(fmt::format("rank {}", r));
  }
  return Status::OK();
}

Result<SequenceId> DeviceBackend::AddSequence() { return pager_.AddSequence(); }

Status DeviceBackend::ReleaseSequence(SequenceId seq) { return pager_.Release(seq); }

Result<int64_t> DeviceBackend::SequenceLength(SequenceId seq) const { return pager_.LiveLength(seq); }

// The rows past the new end stay on the devices; nothing reads them before they are written again.
Status DeviceBackend::Truncate(SequenceId seq, int64_t length) { return pager_.Truncate(seq, length); }

KvUsage DeviceBackend::kv_usage() const {
  KvUsage u = pager_.Usage();
  for (const auto& rank : ranks_) {
    for (int l = 0; l < config_.num_layers; ++l) {
      const DeviceLayer& dl = rank->layers[l];
      const uint64_t row = sizeof(uint16_t) * static_cast<uint64_t>(dl.kv_width) * (dl.k_eq_v ? 1 : 2);
      if (dl.kv.sliding) {
        u.window_bytes += row * static_cast<uint64_t>(RingSlots(config_));
      } else {
        u.block_bytes += row * static_cast<uint64_t>(pager_.block_tokens());
      }
    }
  }
  return u;
}

DeviceMemoryReport DeviceBackend::memory() const {
  const DeviceRank& r = *ranks_[0];
  return {r.weight_bytes, r.kv_bytes, r.workspace_bytes,
          static_cast<int64_t>(pager_.num_blocks()) * pager_.block_tokens()};
}

namespace {

// Copies the sliding rings of ring slot `from` in `src` to slot `to` in `dst` (K and V), per
// sliding layer, on every layer of `d`.
Status CopyRings(DeviceRank& d, bool to_snapshot, int seq, int snap) {
  for (DeviceLayer& l : d.layers) {
    if (!l.kv.sliding) continue;
    const size_t rows = static_cast<size_t>(l.kv.ring);
    const size_t bytes = sizeof(uint16_t) * rows * l.kv_width;
    const size_t seq_off = static_cast<size_t>(seq) * rows * l.kv_width;
    const size_t snap_off = static_cast<size_t>(snap) * rows * l.kv_width;
    auto copy = [&](uint16_t* ring, uint16_t* snaps) {
      return to_snapshot ? d.ops->CopyOnDevice(snaps + snap_off, ring + seq_off, bytes)
                         : d.ops->CopyOnDevice(ring + seq_off, snaps + snap_off, bytes);
    };
    TEMPER_RETURN_IF_ERROR(copy(l.kv.v, l.snap_v));
    if (l.kv.k) TEMPER_RETURN_IF_ERROR(copy(l.kv.k, l.snap_k));
  }
  return Status::OK();
}

}  // namespace

Result<SnapshotId> DeviceBackend::TakeSnapshot(SequenceId seq) {
  TEMPER_ASSIGN_OR_RETURN(int snap, pager_.TakeSnapshot(seq));
  Status s = OnRanks([&](DeviceRank& d) { return CopyRings(d, /*to_snapshot=*/true, seq, snap); });
  if (!s.ok()) {
    (void)pager_.ReleaseSnapshot(snap);
    return s;
  }
  return snap;
}

Result<SequenceId> DeviceBackend::ForkSnapshot(SnapshotId snap) {
  TEMPER_ASSIGN_OR_RETURN(KvFork fork, pager_.ForkSnapshot(snap));
  Status s = OnRanks([&](DeviceRank& d) -> Status {
    TEMPER_RETURN_IF_ERROR(CopyRings(d, /*to_snapshot=*/false, fork.seq, snap));
    if (fork.copy_from < 0) return Status::OK();
    // The fork's private copy of the snapshot's partly filled last block, on every full layer.
    for (DeviceLayer& l : d.layers) {
      if (l.kv.sliding) continue;
      const size_t block = static_cast<size_t>(d.limits.block_tokens) * l.kv_width;
      const size_t bytes = sizeof(uint16_t) * block;
      TEMPER_RETURN_IF_ERROR(
          d.ops->CopyOnDevice(l.kv.v + fork.copy_to * block, l.kv.v + fork.copy_from * block, bytes));
      if (l.kv.k) {
        TEMPER_RETURN_IF_ERROR(
            d.ops->CopyOnDevice(l.kv.k + fork.copy_to * block, l.kv.k + fork.copy_from * block, bytes));
      }
    }
    return Status::OK();
  });
  if (!s.ok()) {
    (void)pager_.Release(fork.seq);
    return s;
  }
  return fork.seq;
}

Status DeviceBackend::ReleaseSnapshot(SnapshotId snap) { return pager_.ReleaseSnapshot(snap); }

Status DeviceBackend::UploadBlockTables(DeviceRank& d, std::span<const int> seqs) const {
  const int max_blocks = d.limits.max_blocks();
  for (int seq : seqs) {
    std::span<const int32_t> blocks = pager_.Blocks(seq);
    const size_t n = std::min<size_t>(blocks.size(), static_cast<size_t>(max_blocks));
    if (n > 0) {
      TEMPER_RETURN_IF_ERROR(
          d.ops->CopyToDevice(d.block_tables + int64_t{seq} * max_blocks, blocks.data(), sizeof(int32_t) * n));
    }
  }
  return Status::OK();
}

Status DeviceBackend::RunPassOnRanks(const Pass& pass, float* logits, float* hidden) {
  // A decode step's graph is captured on every rank before any rank replays it (RankOps::Capture).
  // A captured step may read per-step values only from device memory: the shape is the bucket's,
  // fixed at capture, and everything else is uploaded before each replay. A bucket has one graph
  // with candidates and one without.
  const int key = 2 * pass.graph_bucket + (pass.shape.candidates ? 1 : 0);
  if (pass.graph_bucket >= 0 && !captured_steps_.count(key)) {
    const PassShape shape = pass.shape;
    TEMPER_RETURN_IF_ERROR(OnRanks([&](DeviceRank& d) {
      DeviceRank* rank = &d;
      return d.ops->Capture(key, [rank, shape] { return RunPass(*rank, shape, {}); });
    }));
    captured_steps_.insert(key);
  }
  return OnRanks([&](DeviceRank& d) -> Status {
    const PassInputLayout layout(d.limits);
    TEMPER_RETURN_IF_ERROR(d.ops->CopyToDevice(d.pass_inputs, pass.inputs.data(), layout.bytes));
    TEMPER_RETURN_IF_ERROR(UploadBlockTables(d, pass.seqs));
    if (pass.graph_bucket < 0) return RunPass(d, pass.shape, PassOutput{logits, hidden});
    TEMPER_RETURN_IF_ERROR(d.ops->Replay(key));
    if (!logits) return Status::OK();
    // Only the real rows' logits (the leading ones) leave the device.
    const int vocab = d.vocab_rows();
    return d.ops->CopyRowsToHost(logits + d.shard.vocab.begin, sizeof(float) * config_.vocab_size, d.logits,
                                 sizeof(float) * vocab, pass.real_rows);
  });
}

// Cuts `batch` into passes of at most max_rows tokens: items in order, each taking what room is
// left, so an item's logit rows (all its tokens, or its last) come out in batch order across
// passes (an item starts in a pass only when every earlier one ends there). Sets *out_rows.
std::vector<DeviceBackend::Pass> DeviceBackend::CutIntoPasses(std::span<const ForwardItem> batch, bool candidates,
                                                              int64_t* out_rows) const {
  const RankLimits& limits = ranks_[0]->limits;
  const PassInputLayout layout(limits);
  std::vector<Pass> passes;
  std::vector<int64_t> done(batch.size(), 0);
  std::vector<int64_t> token_base(batch.size(), 0);
  for (size_t i = 1; i < batch.size(); ++i)
    token_base[i] = token_base[i - 1] + static_cast<int64_t>(batch[i - 1].tokens.size());
  *out_rows = 0;
  for (bool more = true; more;) {
    Pass pass;
    pass.inputs.assign(layout.bytes, 0);
    char* in = pass.inputs.data();
    auto at = [&](size_t offset, int row, auto value) {
      std::memcpy(in + offset + row * sizeof(value), &value, sizeof(value));
    };
    int rows = 0, logit_rows = 0;
    // Decode rows: each item a single token, or a next token with its drafts (all its rows logit
    // rows, the whole item in this pass). They run the split attention and may be a graph step.
    bool decode_rows = true;
    pass.shape.out_begin = static_cast<int>(*out_rows);
    for (size_t i = 0; i < batch.size() && rows < limits.max_rows; ++i) {
      const ForwardItem& item = batch[i];
      const int64_t n = static_cast<int64_t>(item.tokens.size());
      if (done[i] == n) continue;
      const int64_t take = std::min<int64_t>(n - done[i], limits.max_rows - rows);
      const int64_t start = pager_.Length(item.seq) + done[i];
      const int first_row = rows;
      const bool drafted = item.all_logits && take == n && n <= kMaxDraftTokens + 1;
      decode_rows = decode_rows && ((take == 1 && !item.all_logits) || drafted);
      pass.seqs.push_back(item.seq);
      for (int64_t t = 0; t < take; ++t, ++rows) {
        at(layout.tokens, rows, item.tokens[done[i] + t]);
        at(layout.positions, rows, start + t);
        at(layout.slots, rows, static_cast<int32_t>(item.seq));
        at(layout.chunk_start, rows, start);
        at(layout.first_row, rows, static_cast<int32_t>(first_row));
        at(layout.chunk_end, rows, start + take);
        pass.batch_token.push_back(token_base[i] + done[i] + t);
        if (item.all_logits || done[i] + t == n - 1) {
          at(layout.logit_index, logit_rows, static_cast<int32_t>(rows));
          at(layout.temperatures, static_cast<int>((*out_rows + logit_rows) % limits.max_out_rows), item.temperature);
          ++logit_rows;
        }
      }
      done[i] += take;
    }
    *out_rows += logit_rows;
    pass.shape.candidates = candidates;
    pass.shape.rows = rows;
    pass.shape.logit_rows = logit_rows;
    pass.real_rows = logit_rows;
    pass.shape.splits = decode_rows && rows <= limits.max_out_rows ? limits.decode_splits : 1;
    passes.push_back(std::move(pass));
    more = false;
    for (size_t i = 0; i < batch.size(); ++i) more = more || done[i] < static_cast<int64_t>(batch[i].tokens.size());
  }
  return passes;
}

// Makes a decode pass its bucket's graph step: rows up to the bucket's size are padding (position
// -1: they write nothing and attend to nothing), every row a logit row (as every row of a decode
// pass is, drafts included). A pass no bucket holds stays eager.
void DeviceBackend::PadToBucket(Pass& p) const {
  const int bucket = SelectGraphBucket(buckets_, p.shape.rows);
  if (bucket < 0) return;
  const PassInputLayout layout(ranks_[0]->limits);
  char* in = p.inputs.data();
  for (int r = p.shape.rows; r < buckets_[bucket]; ++r) {
    const int64_t none = -1, zero = 0;
    const int32_t token = 0, slot = 0, row = r;
    std::memcpy(in + layout.tokens + r * 4, &token, 4);
    std::memcpy(in + layout.positions + r * 8, &none, 8);
    std::memcpy(in + layout.slots + r * 4, &slot, 4);
    std::memcpy(in + layout.chunk_start + r * 8, &zero, 8);
    std::memcpy(in + layout.first_row + r * 4, &row, 4);
    std::memcpy(in + layout.chunk_end + r * 8, &zero, 8);
    std::memcpy(in + layout.logit_index + r * 4, &row, 4);
  }
  p.shape.rows = p.shape.logit_rows = buckets_[bucket];
  p.graph_bucket = bucket;
}

Result<ForwardResult> DeviceBackend::Forward(std::span<const ForwardItem> batch, const ForwardOptions& options) {
  TEMPER_RETURN_IF_ERROR(ReserveForwardBatch(batch, pager_, config_.vocab_size, options_.max_context));
  resident_rows_ = 0;  // this pass overwrites the devices' logits
  resident_positions_.clear();
  int64_t total_tokens = 0;
  for (const ForwardItem& item : batch) total_tokens += static_cast<int64_t>(item.tokens.size());

  // Candidates instead of full rows when asked, when this backend makes them, and when every
  // output row stays in the devices' logits buffers (decode steps and their drafts; not teacher
  // forcing over a whole prompt).
  int64_t logit_rows = 0;
  for (const ForwardItem& item : batch) logit_rows += LogitRows(item);
  const bool candidates =
      options.candidates && options_.top_candidates > 0 && logit_rows <= ranks_[0]->limits.max_out_rows;

  int64_t out_rows = 0;
  std::vector<Pass> passes = CutIntoPasses(batch, candidates, &out_rows);
  // A forward that is one decode step runs as its bucket's graph.
  if (options_.graphs && passes.size() == 1 && !options.capture_hidden && passes[0].shape.splits > 1) {
    PadToBucket(passes[0]);
  }
  const RankLimits& limits = ranks_[0]->limits;

  ForwardResult result;
  result.rows = out_rows;
  if (!candidates) result.logits.resize(static_cast<size_t>(out_rows * config_.vocab_size));
  float* logits = candidates ? nullptr : result.logits.data();
  const int64_t H = config_.hidden_size, layers = config_.num_layers;
  if (options.capture_hidden) result.hidden.resize(static_cast<size_t>((layers + 1) * total_tokens * H));
  std::vector<float> staging;
  for (const Pass& pass : passes) {
    const bool hidden = options.capture_hidden;
    if (hidden) staging.assign(static_cast<size_t>((layers + 1) * pass.shape.rows * H), 0.0f);
    TEMPER_RETURN_IF_ERROR(RunPassOnRanks(pass, logits, hidden ? staging.data() : nullptr));
    if (pass.graph_bucket >= 0) ++graph_steps_;
    if (!hidden) continue;
    TEMPER_RETURN_IF_ERROR(OnRanks([](DeviceRank& d) { return d.ops->Synchronize(); }));
    for (int64_t l = 0; l <= layers; ++l) {
      for (int r = 0; r < pass.shape.rows; ++r) {
        std::memcpy(result.hidden.data() + (l * total_tokens + pass.batch_token[r]) * H,
                    staging.data() + (l * pass.shape.rows + r) * H, sizeof(float) * H);
      }
    }
  }
  resident_rows_ = out_rows <= limits.max_out_rows ? out_rows : 0;
  if (resident_rows_ > 0) {
    // Output rows in batch order: each item's every token with all_logits, else its last.
    for (const ForwardItem& item : batch) {
      const int64_t start = pager_.Length(item.seq), n = static_cast<int64_t>(item.tokens.size());
      for (int64_t t = item.all_logits ? 0 : n - 1; t < n; ++t) resident_positions_.push_back({item.seq, start + t});
    }
  }
  if (candidates) {
    TEMPER_ASSIGN_OR_RETURN(result.candidates, GatherCandidates(batch, out_rows));
  } else {
    TEMPER_RETURN_IF_ERROR(OnRanks([](DeviceRank& d) { return d.ops->Synchronize(); }));
  }
  for (const ForwardItem& item : batch) {
    pager_.Append(item.seq, static_cast<int64_t>(item.tokens.size()));
  }
  return result;
}

Result<std::vector<LogitCandidates>> DeviceBackend::GatherCandidates(std::span<const ForwardItem> batch, int64_t rows) {
  const int k = options_.top_candidates;
  const size_t tp = ranks_.size();
  // Per rank: [rows][k] values and ids, then [rows] maxima and masses.
  std::vector<std::vector<float>> vals(tp), max(tp), mass(tp);
  std::vector<std::vector<int32_t>> ids(tp);
  const Status copied = OnRanks([&](DeviceRank& d) -> Status {
    const size_t r = static_cast<size_t>(d.shard.rank);
    vals[r].resize(static_cast<size_t>(rows * k));
    ids[r].resize(vals[r].size());
    max[r].resize(static_cast<size_t>(rows));
    mass[r].resize(max[r].size());
    TEMPER_RETURN_IF_ERROR(d.ops->CopyToHost(vals[r].data(), d.cand_vals, sizeof(float) * vals[r].size()));
    TEMPER_RETURN_IF_ERROR(d.ops->CopyToHost(ids[r].data(), d.cand_ids, sizeof(int32_t) * ids[r].size()));
    TEMPER_RETURN_IF_ERROR(d.ops->CopyToHost(max[r].data(), d.cand_max, sizeof(float) * max[r].size()));
    TEMPER_RETURN_IF_ERROR(d.ops->CopyToHost(mass[r].data(), d.cand_mass, sizeof(float) * mass[r].size()));
    return d.ops->Synchronize();
  });
  TEMPER_RETURN_IF_ERROR(copied);
  // Each output row's temperature: an item's last token, or every token of one with all_logits.
  std::vector<float> temperature;
  for (const ForwardItem& item : batch) {
    temperature.insert(temperature.end(), static_cast<size_t>(LogitRows(item)), item.temperature);
  }
  std::vector<LogitCandidates> out;
  std::vector<RankCandidates> per_rank(tp);
  for (int64_t row = 0; row < rows; ++row) {
    for (size_t r = 0; r < tp; ++r) {
      per_rank[r] = RankCandidates{std::span<const float>(vals[r]).subspan(row * k, k),
                                   std::span<const int32_t>(ids[r]).subspan(row * k, k), max[r][row], mass[r][row]};
    }
    out.push_back(MergeRankCandidates(per_rank, k, temperature[static_cast<size_t>(row)], config_.vocab_size));
  }
  return out;
}

Result<DraftResult> DeviceBackend::Draft(std::span<const DraftRequest> requests, const DraftOptions& options) {
  if (!options_.drafter) return Status::FailedPrecondition("device backend: no MTP drafter is attached");
  TEMPER_ASSIGN_OR_RETURN(
      const std::vector<int64_t> positions,
      CheckDraftRequests(requests, pager_, config_.vocab_size, options_.max_context, resident_positions_));
  DraftResult result;
  result.tokens.resize(requests.size());
  int steps = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    if (positions[i] >= 0) steps = std::max(steps, requests[i].count);
  }
  const int64_t vocab = config_.vocab_size;
  if (options.keep_logits) result.logits.assign(requests.size() * static_cast<size_t>(steps * vocab), 0.0f);
  // Groups of the requests that get drafts, each within a step's rows and the head's slots.
  const size_t most = static_cast<size_t>(std::min(kMaxDraftRows, ranks_[0]->limits.max_out_rows));
  std::vector<size_t> group;
  auto run = [&]() -> Status {
    std::vector<DraftRequest> q;
    std::vector<int64_t> p;
    for (size_t i : group) {
      q.push_back(requests[i]);
      p.push_back(positions[i]);
    }
    std::vector<std::vector<int32_t>> tokens(group.size());
    std::vector<float> logits(options.keep_logits ? group.size() * static_cast<size_t>(steps * vocab) : 0);
    TEMPER_RETURN_IF_ERROR(DraftGroup(q, p, options.keep_logits, tokens, logits, steps));
    for (size_t g = 0; g < group.size(); ++g) {
      result.tokens[group[g]] = std::move(tokens[g]);
      if (options.keep_logits) {
        std::copy_n(logits.begin() + static_cast<int64_t>(g) * steps * vocab, steps * vocab,
                    result.logits.begin() + static_cast<int64_t>(group[g]) * steps * vocab);
      }
    }
    group.clear();
    return Status::OK();
  };
  for (size_t i = 0; i < requests.size(); ++i) {
    if (positions[i] < 0) continue;
    group.push_back(i);
    if (group.size() == most) TEMPER_RETURN_IF_ERROR(run());
  }
  if (!group.empty()) TEMPER_RETURN_IF_ERROR(run());
  return result;
}

Status DeviceBackend::DraftGroup(std::span<const DraftRequest> requests, std::span<const int64_t> positions,
                                 bool keep_logits, std::span<std::vector<int32_t>> tokens, std::span<float> logits,
                                 int steps_stride) {
  const int rows = static_cast<int>(requests.size());
  const int out_rows = ranks_[0]->limits.max_out_rows;
  const DraftInputLayout layout;
  std::vector<char> inputs(layout.bytes, 0);
  auto at = [&](size_t offset, int row, auto value) {
    std::memcpy(inputs.data() + offset + row * sizeof(value), &value, sizeof(value));
  };
  std::vector<int> seqs;
  int steps = 0;
  for (int r = 0; r < rows; ++r) {
    const DraftRequest& q = requests[r];
    const int64_t L = positions[r];
    at(layout.tokens, r, q.token);
    at(layout.rope_positions, r, L);        // the drafter's query sits at the sequence's length ...
    at(layout.attend_positions, r, L - 1);  // ... and sees what a query at L - 1 sees (window + 1 wide)
    at(layout.slots, r, static_cast<int32_t>(q.seq));
    at(layout.chunk_start, r, L);  // no key of this "pass": every visible one is in the cache
    at(layout.first_row, r, static_cast<int32_t>(r));
    at(layout.chunk_end, r, L);
    at(layout.hidden_slots, r, static_cast<int32_t>(q.hidden_row % out_rows));
    at(layout.interleave, 2 * r, static_cast<int32_t>(r));
    at(layout.interleave, 2 * r + 1, static_cast<int32_t>(kMaxDraftRows + r));
    at(layout.temperatures, r, 1.0f);
    seqs.push_back(q.seq);
    steps = std::max(steps, q.count);
  }
  const size_t tp = ranks_.size();
  std::vector<std::vector<float>> vals(tp, std::vector<float>(static_cast<size_t>(rows)));
  std::vector<std::vector<int32_t>> ids(tp, std::vector<int32_t>(static_cast<size_t>(rows)));
  std::vector<float> step_logits(keep_logits ? static_cast<size_t>(rows) * config_.vocab_size : 0);
  for (int step = 0; step < steps; ++step) {
    TEMPER_RETURN_IF_ERROR(OnRanks([&](DeviceRank& d) -> Status {
      DeviceDrafter& m = *d.drafter;
      if (step == 0) {
        TEMPER_RETURN_IF_ERROR(d.ops->CopyToDevice(m.inputs, inputs.data(), layout.bytes));
        TEMPER_RETURN_IF_ERROR(UploadBlockTables(d, seqs));
      } else {
        TEMPER_RETURN_IF_ERROR(d.ops->CopyToDevice(static_cast<char*>(m.inputs) + layout.tokens,
                                                   inputs.data() + layout.tokens, sizeof(int32_t) * rows));
      }
      TEMPER_RETURN_IF_ERROR(RunDraftStep(d, rows, step == 0));
      const size_t r = static_cast<size_t>(d.shard.rank);
      TEMPER_RETURN_IF_ERROR(d.ops->CopyToHost(vals[r].data(), m.cand_vals, sizeof(float) * rows));
      TEMPER_RETURN_IF_ERROR(d.ops->CopyToHost(ids[r].data(), m.cand_ids, sizeof(int32_t) * rows));
      if (keep_logits) {
        TEMPER_RETURN_IF_ERROR(d.ops->CopyRowsToHost(step_logits.data() + d.shard.vocab.begin,
                                                     sizeof(float) * config_.vocab_size, m.logits,
                                                     sizeof(float) * d.vocab_rows(), rows));
      }
      return d.ops->Synchronize();
    }));
    // Each row's draft: the best of the ranks' best, the lowest id among equal values (the CPU
    // backend's argmax).
    for (int r = 0; r < rows; ++r) {
      float best = vals[0][r];
      int32_t id = ids[0][r];
      for (size_t k = 1; k < tp; ++k) {
        if (vals[k][r] > best || (vals[k][r] == best && ids[k][r] < id)) {
          best = vals[k][r];
          id = ids[k][r];
        }
      }
      if (step < requests[r].count) tokens[r].push_back(id);
      at(layout.tokens, r, id);
      if (keep_logits && step < requests[r].count) {
        std::copy_n(step_logits.begin() + static_cast<int64_t>(r) * config_.vocab_size, config_.vocab_size,
                    logits.begin() + (static_cast<int64_t>(r) * steps_stride + step) * config_.vocab_size);
      }
    }
  }
  return Status::OK();
}

Result<std::vector<float>> DeviceBackend::LogitsRow(int64_t row) const {
  if (row < 0 || row >= resident_rows_) {
    return Status::FailedPrecondition(
        fmt::format("logit row {} of the last forward pass is not held on the devices (it held rows [0, {}))", row,
                    resident_rows_));
  }
  std::vector<float> out(static_cast<size_t>(config_.vocab_size));
  std::vector<Status> status(ranks_.size());
  rank_threads_->Run([&](int r) {
    DeviceRank& d = *ranks_[r];
    const int64_t slot = row % d.limits.max_out_rows;
    status[r] = d.ops->CopyToHost(out.data() + d.shard.vocab.begin, d.logits + slot * d.vocab_rows(),
                                  sizeof(float) * d.vocab_rows());
    if (status[r].ok()) status[r] = d.ops->Synchronize();
  });
  for (size_t r = 0; r < status.size(); ++r) {
    if (!status[r].ok()) return status[r].WithContext(fmt::format("rank {}", r));
  }
  return out;
}

}  // namespace temper::engine::cuda
