#include "engine/cpu/cpu_backend.h"

#include <algorithm>
#include <new>
#include <thread>

#include <fmt/format.h>

#include "engine/cpu/rank.h"
#include "engine/forward_batch.h"

namespace temper::engine {

CpuBackend::CpuBackend(const ModelConfig& config, std::shared_ptr<const ModelWeights> weights,
                       const CpuBackendOptions& options)
    : config_(config), weights_(std::move(weights)), options_(options), pager_(options.kv) {}

CpuBackend::~CpuBackend() = default;

Result<std::unique_ptr<CpuBackend>> CpuBackend::Create(const ModelConfig& config,
                                                       std::shared_ptr<const ModelWeights> weights,
                                                       const CpuBackendOptions& options) {
  if (!weights || weights->num_layers() != config.num_layers) {
    return Status::InvalidArgument("CPU backend: the weights do not belong to this config");
  }
  CpuBackendOptions opts = options;
  if (opts.max_context == 0) opts.max_context = std::min<int64_t>(config.max_position_embeddings, 8192);
  if (opts.max_context < 1 || opts.max_context > config.max_position_embeddings) {
    return Status::InvalidArgument(
        fmt::format("CPU backend: max_context {} is outside [1, max_position_embeddings = {}]", opts.max_context,
                    config.max_position_embeddings));
  }
  if (options.kv.max_sequences < 1 || options.kv.block_tokens < 1 || options.kv.max_tokens < 1 ||
      options.kv.max_snapshots < 0) {
    return Status::InvalidArgument("CPU backend: KV cache options must be positive (max_snapshots may be 0)");
  }
  if (options.threads < 0) return Status::InvalidArgument("CPU backend: threads must be >= 0");
  TEMPER_ASSIGN_OR_RETURN(std::vector<RankShard> shards, PlanShards(config, options.tp));

  std::unique_ptr<CpuBackend> b(new CpuBackend(config, std::move(weights), opts));
  const int hw = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const int threads = options.threads > 0 ? options.threads : hw;
  const int per_rank = std::max(1, threads / options.tp);
  try {
    // One RoPE table per layer kind, shared by every rank.
    std::unique_ptr<cpu::RopeTable> sliding, full;
    for (int l = 0; l < config.num_layers; ++l) {
      auto& table = config.layers[l].kind == LayerKind::kSliding ? sliding : full;
      if (!table) table = cpu::MakeRopeTable(config.layers[l], opts.max_context);
    }
    const ModelWeights& w = *b->weights_;
    for (const RankShard& shard : shards) {
      auto rank = std::make_unique<cpu::RankContext>();
      rank->config = &b->config_;
      rank->weights = b->weights_.get();
      rank->shard = shard;
      rank->embed = w.embed().Rows(shard.vocab.begin, shard.vocab.end);
      rank->lm_head = w.lm_head().Rows(shard.vocab.begin, shard.vocab.end);
      for (int l = 0; l < config.num_layers; ++l) {
        const LayerGeometry& g = config.layers[l];
        const LayerWeights& lw = w.layer(l);
        const LayerShard& ls = shard.layers[l];
        const int hd = g.head_dim;
        cpu::RankLayer rl;
        rl.q_heads = ls.q_heads.size();
        rl.q_head_begin = ls.q_heads.begin;
        rl.kv_heads = ls.kv_heads.size();
        rl.kv_head_begin = ls.kv_heads.begin;
        rl.q_proj = lw.q_proj.Rows(ls.q_heads.begin * hd, ls.q_heads.end * hd);
        rl.k_proj = lw.k_proj.Rows(ls.kv_heads.begin * hd, ls.kv_heads.end * hd);
        if (!g.k_eq_v) rl.v_proj = lw.v_proj.Rows(ls.kv_heads.begin * hd, ls.kv_heads.end * hd);
        rl.o_proj = lw.o_proj.Cols(ls.q_heads.begin * hd, ls.q_heads.end * hd);
        rl.gate_proj = lw.gate_proj.Rows(shard.ffn.begin, shard.ffn.end);
        rl.up_proj = lw.up_proj.Rows(shard.ffn.begin, shard.ffn.end);
        rl.down_proj = lw.down_proj.Cols(shard.ffn.begin, shard.ffn.end);
        rl.rope = g.kind == LayerKind::kSliding ? sliding.get() : full.get();
        rank->layers.push_back(rl);
      }
      rank->kv = std::make_unique<CpuKvStore>(config, shard, b->pager_);
      rank->pool = std::make_unique<WorkerGroup>(per_rank);
      b->ranks_.push_back(std::move(rank));
    }
    if (sliding) b->rope_.push_back(std::move(sliding));
    if (full) b->rope_.push_back(std::move(full));
    b->comm_ = std::make_unique<Communicator>(options.tp);
    b->rank_threads_ = std::make_unique<WorkerGroup>(options.tp);
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted(
        fmt::format("CPU backend: cannot allocate the KV cache for {} tokens", options.kv.max_tokens));
  }
  return b;
}

Result<SequenceId> CpuBackend::AddSequence() {
  TEMPER_ASSIGN_OR_RETURN(int seq, pager_.AddSequence());
  for (auto& rank : ranks_) {
    Status s = rank->kv->Attach(seq);
    if (!s.ok()) {
      for (auto& r : ranks_) r->kv->Detach(seq);
      (void)pager_.Release(seq);
      return s;
    }
  }
  return seq;
}

Status CpuBackend::ReleaseSequence(SequenceId seq) {
  TEMPER_RETURN_IF_ERROR(pager_.Release(seq));
  for (auto& rank : ranks_) rank->kv->Detach(seq);
  return Status::OK();
}

Result<int64_t> CpuBackend::SequenceLength(SequenceId seq) const { return pager_.LiveLength(seq); }

// The rows past the new end stay in the rings and blocks; nothing reads them before they are
// written again.
Status CpuBackend::Truncate(SequenceId seq, int64_t length) { return pager_.Truncate(seq, length); }

KvUsage CpuBackend::kv_usage() const {
  KvUsage u = pager_.Usage();
  for (const auto& rank : ranks_) {
    u.block_bytes += rank->kv->block_bytes();
    u.window_bytes += rank->kv->ring_bytes();
  }
  return u;
}

Result<SnapshotId> CpuBackend::TakeSnapshot(SequenceId seq) {
  TEMPER_ASSIGN_OR_RETURN(int snap, pager_.TakeSnapshot(seq));
  for (auto& rank : ranks_) {
    Status s = rank->kv->SaveRings(seq, snap);
    if (!s.ok()) {
      for (auto& r : ranks_) r->kv->DropSnapshot(snap);
      (void)pager_.ReleaseSnapshot(snap);
      return s;
    }
  }
  return snap;
}

Result<SequenceId> CpuBackend::ForkSnapshot(SnapshotId snap) {
  TEMPER_ASSIGN_OR_RETURN(KvFork fork, pager_.ForkSnapshot(snap));
  for (auto& rank : ranks_) {
    Status s = rank->kv->Attach(fork.seq);
    if (!s.ok()) {
      for (auto& r : ranks_) r->kv->Detach(fork.seq);
      (void)pager_.Release(fork.seq);
      return s;
    }
    rank->kv->LoadRings(snap, fork.seq);
    if (fork.copy_from >= 0) rank->kv->CopyBlock(fork.copy_from, fork.copy_to);
  }
  return fork.seq;
}

Status CpuBackend::ReleaseSnapshot(SnapshotId snap) {
  TEMPER_RETURN_IF_ERROR(pager_.ReleaseSnapshot(snap));
  for (auto& rank : ranks_) rank->kv->DropSnapshot(snap);
  return Status::OK();
}

Result<ForwardResult> CpuBackend::Forward(std::span<const ForwardItem> batch, const ForwardOptions& options) {
  TEMPER_RETURN_IF_ERROR(ReserveForwardBatch(batch, pager_, config_.vocab_size, options_.max_context));

  cpu::BatchPlan plan;
  plan.blocks.resize(pager_.max_sequences());
  for (const ForwardItem& item : batch) {
    const int64_t start = pager_.Length(item.seq);
    const int64_t first_row = static_cast<int64_t>(plan.rows.size());
    const int64_t n = static_cast<int64_t>(item.tokens.size());
    for (int64_t t = 0; t < n; ++t) {
      plan.rows.push_back({item.seq, start + t, item.tokens[t], start, first_row, start + n});
      if (item.all_logits || t == n - 1) plan.logit_rows.push_back(first_row + t);
    }
    plan.blocks[item.seq] = pager_.Blocks(item.seq);
  }
  ForwardResult result;
  result.rows = static_cast<int64_t>(plan.logit_rows.size());
  result.logits.resize(static_cast<size_t>(result.rows * config_.vocab_size));
  plan.logits = result.logits.data();
  if (options.capture_hidden) {
    result.hidden.resize(static_cast<size_t>(int64_t{config_.num_layers + 1} * static_cast<int64_t>(plan.rows.size()) *
                                             config_.hidden_size));
    plan.hidden = result.hidden.data();
  }
  rank_threads_->Run([&](int r) { cpu::ForwardRank(*ranks_[r], plan, *comm_); });
  for (const ForwardItem& item : batch) {
    pager_.Append(item.seq, static_cast<int64_t>(item.tokens.size()));
  }
  return result;
}

}  // namespace temper::engine
