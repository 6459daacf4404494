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
    if (opts.drafter) {
      if (!config.model_type.starts_with("gemma4")) {
        return Status::Unimplemented(
            fmt::format("CPU backend: the MTP drafter drafts for Gemma 4 targets only; the target model is '{}'",
                        config.model_type));
      }
      TEMPER_RETURN_IF_ERROR(b->AttachDrafter(shards));
    }
    b->comm_ = std::make_unique<Communicator>(options.tp);
    b->rank_threads_ = std::make_unique<WorkerGroup>(options.tp);
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted(
        fmt::format("CPU backend: cannot allocate the KV cache for {} tokens", options.kv.max_tokens));
  }
  return b;
}

Status CpuBackend::AttachDrafter(const std::vector<RankShard>& shards) {
  const DrafterWeights& w = *options_.drafter;
  const DrafterConfig& dc = w.config();
  const ModelConfig& text = dc.text;
  const int tp = static_cast<int>(shards.size());
  Result<std::vector<Range>> heads = PlanDrafterHeads(dc, config_, shards);
  if (!heads.ok()) return heads.status().WithContext("CPU backend");
  for (const RankShard& shard : shards) {
    auto rd = std::make_unique<cpu::RankDrafter>();
    rd->weights = &w;
    rd->ffn = EvenSplit(text.intermediate_size, tp, shard.rank);
    rd->lm_head = w.lm_head().Rows(shard.vocab.begin, shard.vocab.end);
    const Range q_heads = (*heads)[shard.rank];
    for (int l = 0; l < text.num_layers; ++l) {
      const LayerGeometry& g = text.layers[l];
      const int t = dc.target_layers[l];
      const DrafterLayerWeights& lw = w.layer(l);
      cpu::RankDrafterLayer dl;
      dl.target_layer = t;
      dl.q_heads = q_heads.size();
      dl.q_head_begin = q_heads.begin;
      dl.q_proj = lw.q_proj.Rows(q_heads.begin * g.head_dim, q_heads.end * g.head_dim);
      dl.o_proj = lw.o_proj.Cols(q_heads.begin * g.head_dim, q_heads.end * g.head_dim);
      dl.gate_proj = lw.gate_proj.Rows(rd->ffn.begin, rd->ffn.end);
      dl.up_proj = lw.up_proj.Rows(rd->ffn.begin, rd->ffn.end);
      dl.down_proj = lw.down_proj.Cols(rd->ffn.begin, rd->ffn.end);
      // The drafter rotates its queries by its own config's RoPE; the target's table serves when
      // they agree (they do in every released pair), else it gets its own.
      const cpu::RopeTable* target_rope = ranks_[shard.rank]->layers[t].rope;
      if (g.rope_angles == config_.layers[t].rope_angles && g.rope_theta == config_.layers[t].rope_theta &&
          g.rope_linear_factor == config_.layers[t].rope_linear_factor) {
        dl.rope = target_rope;
      } else {
        rope_.push_back(cpu::MakeRopeTable(g, options_.max_context));
        dl.rope = rope_.back().get();
      }
      rd->layers.push_back(dl);
    }
    ranks_[shard.rank]->drafter = std::move(rd);
  }
  return Status::OK();
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
  hidden_rows_.clear();
  for (int64_t row : plan.logit_rows) hidden_rows_.push_back({plan.rows[row].seq, plan.rows[row].pos});
  for (const ForwardItem& item : batch) {
    pager_.Append(item.seq, static_cast<int64_t>(item.tokens.size()));
  }
  return result;
}

Result<DraftResult> CpuBackend::Draft(std::span<const DraftRequest> requests, const DraftOptions& options) {
  if (!options_.drafter) return Status::FailedPrecondition("CPU backend: no MTP drafter is attached");
  TEMPER_ASSIGN_OR_RETURN(const std::vector<int64_t> positions,
                          CheckDraftRequests(requests, pager_, config_.vocab_size, options_.max_context, hidden_rows_));
  cpu::DraftPlan plan;
  plan.blocks.resize(pager_.max_sequences());
  std::vector<int64_t> plan_row(requests.size(), -1);  // each request's row in the plan; -1: no drafts
  for (size_t i = 0; i < requests.size(); ++i) {
    const DraftRequest& q = requests[i];
    if (positions[i] < 0) continue;
    plan_row[i] = static_cast<int64_t>(plan.rows.size());
    plan.rows.push_back({q.seq, positions[i], q.token, q.hidden_row});
    plan.blocks[q.seq] = pager_.Blocks(q.seq);
    plan.steps = std::max(plan.steps, q.count);
  }

  DraftResult result;
  result.tokens.resize(requests.size());
  const int64_t rows = static_cast<int64_t>(plan.rows.size());
  const int64_t vocab = config_.vocab_size;
  if (rows > 0) {
    std::vector<float> logits(static_cast<size_t>(rows * vocab));
    std::vector<int32_t> tokens(static_cast<size_t>(rows * plan.steps));
    std::vector<float> step_logits(options.keep_logits ? static_cast<size_t>(rows * plan.steps * vocab) : 0);
    plan.logits = logits.data();
    plan.tokens = tokens.data();
    plan.step_logits = options.keep_logits ? step_logits.data() : nullptr;
    rank_threads_->Run([&](int r) { cpu::DraftRank(*ranks_[r], plan, *comm_); });
    for (size_t i = 0; i < requests.size(); ++i) {
      if (plan_row[i] < 0) continue;
      const int32_t* t = tokens.data() + plan_row[i] * plan.steps;
      result.tokens[i].assign(t, t + requests[i].count);
    }
    if (options.keep_logits) {
      result.logits.assign(static_cast<size_t>(static_cast<int64_t>(requests.size()) * plan.steps * vocab), 0.0f);
      for (size_t i = 0; i < requests.size(); ++i) {
        if (plan_row[i] < 0) continue;
        for (int s = 0; s < requests[i].count; ++s) {
          std::copy_n(step_logits.data() + (plan_row[i] * plan.steps + s) * vocab, vocab,
                      result.logits.data() + (static_cast<int64_t>(i) * plan.steps + s) * vocab);
        }
      }
    }
  }
  return result;
}

}  // namespace temper::engine
