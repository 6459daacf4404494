#include "engine/cuda/device_rank.h"
#include "engine/cuda/device_drafter.h"
#include "engine/kv_cache.h"

#include <algorithm>
#include <cmath>
#include <string>

#include <fmt/format.h>

namespace temper::engine::cuda {

size_t TakeInputArray(size_t* bytes, size_t count, size_t elem) {
  const size_t at = *bytes;
  *bytes += (count * elem + 7) / 8 * 8;
  return at;
}

PassInputLayout::PassInputLayout(const RankLimits& limits) {
  const size_t rows = static_cast<size_t>(limits.max_rows);
  auto take = [&](size_t count, size_t elem) { return TakeInputArray(&bytes, count, elem); };
  tokens = take(rows, 4);
  positions = take(rows, 8);
  slots = take(rows, 4);
  chunk_start = take(rows, 8);
  first_row = take(rows, 4);
  chunk_end = take(rows, 8);
  logit_index = take(rows, 4);
  temperatures = take(static_cast<size_t>(limits.max_out_rows), 4);
}

DeviceRank::~DeviceRank() {
  if (!ops) return;
  (void)ops->Synchronize();
  for (void* p : allocations) ops->Free(p);
}

Result<void*> DeviceRank::Alloc(size_t bytes, uint64_t* account) {
  TEMPER_ASSIGN_OR_RETURN(void* p, ops->Alloc(bytes));
  allocations.push_back(p);
  *account += (bytes + 255) / 256 * 256;
  return p;
}

Result<const uint16_t*> UploadWeights(DeviceRank& rank, const Bf16Matrix& view) {
  TEMPER_ASSIGN_OR_RETURN(void* p, rank.Alloc(view.Bytes(), &rank.weight_bytes));
  TEMPER_RETURN_IF_ERROR(rank.ops->CopyRowsToDevice(p, view.data, sizeof(uint16_t) * view.stride,
                                                    sizeof(uint16_t) * view.cols, view.rows));
  return static_cast<const uint16_t*>(p);
}

namespace {

// Where a rank's weight shards come from: views of host weights (uploaded), or seeded synthetic
// values with the golden fixture's scales (filled on the device; the same seed gives the same
// weights on every implementation of RankOps, though not the CPU backend's synthetic ones).
class ShardLoader {
 public:
  ShardLoader(DeviceRank& rank, const ModelWeights* weights, uint64_t seed)
      : rank_(rank), weights_(weights), seed_(seed) {}

  // A [rows][cols] view of the host weights (its rows `stride` apart), packed on the device.
  Result<const uint16_t*> Matrix(const Bf16Matrix& view) { return UploadWeights(rank_, view); }
  Result<const uint16_t*> Vector(std::span<const uint16_t> v) {
    return Matrix(Bf16Matrix{v.data(), 1, static_cast<int>(v.size()), static_cast<int64_t>(v.size())});
  }
  // Synthetic: uniform with the given mean and standard deviation.
  Result<const uint16_t*> Synthetic(int64_t n, float mean, float stddev) {
    TEMPER_ASSIGN_OR_RETURN(void* p, rank_.Alloc(sizeof(uint16_t) * n, &rank_.weight_bytes));
    const uint64_t seed = seed_ * 1000003ull + tensor_++;
    TEMPER_RETURN_IF_ERROR(
        rank_.ops->FillSynthetic(static_cast<uint16_t*>(p), n, seed, mean, stddev * std::sqrt(3.0f)));
    return static_cast<const uint16_t*>(p);
  }

  bool synthetic() const { return weights_ == nullptr; }
  const ModelWeights& weights() const { return *weights_; }

 private:
  DeviceRank& rank_;
  const ModelWeights* weights_;
  uint64_t seed_;
  uint64_t tensor_ = 0;
};

Status LoadWeights(DeviceRank& d, ShardLoader& load) {
  const ModelConfig& c = *d.config;
  const RankShard& shard = d.shard;
  const int H = c.hidden_size;
  const int ffn = shard.ffn.size();
  const float linear_h = 1.0f / std::sqrt(static_cast<float>(H));
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerGeometry& g = c.layers[l];
    const LayerShard& ls = shard.layers[l];
    const int hd = g.head_dim;
    DeviceLayer& dl = d.layers[l];
    const int q_rows = ls.q_heads.size() * hd, kv_rows = ls.kv_heads.size() * hd;
    if (load.synthetic()) {
      const float qk_norm = std::pow(static_cast<float>(hd), -0.25f);
      const float post = 2.0f * std::sqrt(static_cast<float>(H));
      TEMPER_ASSIGN_OR_RETURN(dl.q, load.Synthetic(int64_t{q_rows} * H, 0, linear_h));
      TEMPER_ASSIGN_OR_RETURN(dl.k, load.Synthetic(int64_t{kv_rows} * H, 0, linear_h));
      if (!g.k_eq_v) {
        TEMPER_ASSIGN_OR_RETURN(dl.v, load.Synthetic(int64_t{kv_rows} * H, 0, linear_h));
      }
      TEMPER_ASSIGN_OR_RETURN(dl.o, load.Synthetic(int64_t{H} * q_rows, 0, 1.0f / std::sqrt(float(c.QDim(l)))));
      TEMPER_ASSIGN_OR_RETURN(dl.gate, load.Synthetic(int64_t{ffn} * H, 0, linear_h));
      TEMPER_ASSIGN_OR_RETURN(dl.up, load.Synthetic(int64_t{ffn} * H, 0, linear_h));
      TEMPER_ASSIGN_OR_RETURN(dl.down,
                              load.Synthetic(int64_t{H} * ffn, 0, 1.0f / std::sqrt(float(c.intermediate_size))));
      TEMPER_ASSIGN_OR_RETURN(dl.q_norm, load.Synthetic(hd, qk_norm, 0.25f * qk_norm));
      TEMPER_ASSIGN_OR_RETURN(dl.k_norm, load.Synthetic(hd, qk_norm, 0.25f * qk_norm));
      TEMPER_ASSIGN_OR_RETURN(dl.input_norm, load.Synthetic(H, 1, 0.25f));
      TEMPER_ASSIGN_OR_RETURN(dl.post_attention_norm, load.Synthetic(H, post, 0.25f * post));
      TEMPER_ASSIGN_OR_RETURN(dl.pre_feedforward_norm, load.Synthetic(H, 1, 0.25f));
      TEMPER_ASSIGN_OR_RETURN(dl.post_feedforward_norm, load.Synthetic(H, post, 0.25f * post));
      dl.layer_scalar = 1;
      continue;
    }
    const LayerWeights& w = load.weights().layer(l);
    TEMPER_ASSIGN_OR_RETURN(dl.q, load.Matrix(w.q_proj.Rows(ls.q_heads.begin * hd, ls.q_heads.end * hd)));
    TEMPER_ASSIGN_OR_RETURN(dl.k, load.Matrix(w.k_proj.Rows(ls.kv_heads.begin * hd, ls.kv_heads.end * hd)));
    if (!g.k_eq_v) {
      TEMPER_ASSIGN_OR_RETURN(dl.v, load.Matrix(w.v_proj.Rows(ls.kv_heads.begin * hd, ls.kv_heads.end * hd)));
    }
    TEMPER_ASSIGN_OR_RETURN(dl.o, load.Matrix(w.o_proj.Cols(ls.q_heads.begin * hd, ls.q_heads.end * hd)));
    TEMPER_ASSIGN_OR_RETURN(dl.gate, load.Matrix(w.gate_proj.Rows(shard.ffn.begin, shard.ffn.end)));
    TEMPER_ASSIGN_OR_RETURN(dl.up, load.Matrix(w.up_proj.Rows(shard.ffn.begin, shard.ffn.end)));
    TEMPER_ASSIGN_OR_RETURN(dl.down, load.Matrix(w.down_proj.Cols(shard.ffn.begin, shard.ffn.end)));
    TEMPER_ASSIGN_OR_RETURN(dl.q_norm, load.Vector(w.q_norm));
    TEMPER_ASSIGN_OR_RETURN(dl.k_norm, load.Vector(w.k_norm));
    TEMPER_ASSIGN_OR_RETURN(dl.input_norm, load.Vector(w.input_norm));
    TEMPER_ASSIGN_OR_RETURN(dl.post_attention_norm, load.Vector(w.post_attention_norm));
    TEMPER_ASSIGN_OR_RETURN(dl.pre_feedforward_norm, load.Vector(w.pre_feedforward_norm));
    TEMPER_ASSIGN_OR_RETURN(dl.post_feedforward_norm, load.Vector(w.post_feedforward_norm));
    dl.layer_scalar = w.layer_scalar;
  }
  const int vocab = shard.vocab.size();
  if (load.synthetic()) {
    TEMPER_ASSIGN_OR_RETURN(d.embed, load.Synthetic(int64_t{vocab} * H, 0, 1));
    TEMPER_ASSIGN_OR_RETURN(d.final_norm, load.Synthetic(H, 1, 0.25f));
    d.lm_head = d.embed;
    if (!c.tie_word_embeddings) {
      TEMPER_ASSIGN_OR_RETURN(d.lm_head, load.Synthetic(int64_t{vocab} * H, 0, 1));
    }
    return Status::OK();
  }
  const ModelWeights& w = load.weights();
  TEMPER_ASSIGN_OR_RETURN(d.embed, load.Matrix(w.embed().Rows(shard.vocab.begin, shard.vocab.end)));
  TEMPER_ASSIGN_OR_RETURN(d.final_norm, load.Vector(w.final_norm()));
  d.lm_head = d.embed;
  if (!c.tie_word_embeddings) {
    TEMPER_ASSIGN_OR_RETURN(d.lm_head, load.Matrix(w.lm_head().Rows(shard.vocab.begin, shard.vocab.end)));
  }
  return Status::OK();
}

// cos/sin of every (position, frequency) of one layer kind, as the CPU backend's RopeTable
// (point 8: the exponent's denominator is the full head_dim; fp32 angles).
Result<RopeView> UploadRope(DeviceRank& d, const LayerGeometry& g) {
  const int64_t n = d.limits.max_context * g.rope_angles;
  std::vector<float> cos(static_cast<size_t>(std::max<int64_t>(n, 1))), sin(cos.size());
  const float theta = static_cast<float>(g.rope_theta);
  const float linear_factor = static_cast<float>(g.rope_linear_factor);  // Gemma 3's linear scaling
  for (int j = 0; j < g.rope_angles; ++j) {
    float inv_freq = 1.0f / std::pow(theta, static_cast<float>(2 * j) / static_cast<float>(g.head_dim));
    if (linear_factor != 1.0f) inv_freq /= linear_factor;
    for (int64_t pos = 0; pos < d.limits.max_context; ++pos) {
      const float angle = static_cast<float>(pos) * inv_freq;
      cos[pos * g.rope_angles + j] = std::cos(angle);
      sin[pos * g.rope_angles + j] = std::sin(angle);
    }
  }
  TEMPER_ASSIGN_OR_RETURN(void* c, d.Alloc(sizeof(float) * cos.size(), &d.workspace_bytes));
  TEMPER_ASSIGN_OR_RETURN(void* s, d.Alloc(sizeof(float) * sin.size(), &d.workspace_bytes));
  TEMPER_RETURN_IF_ERROR(d.ops->CopyToDevice(c, cos.data(), sizeof(float) * cos.size()));
  TEMPER_RETURN_IF_ERROR(d.ops->CopyToDevice(s, sin.data(), sizeof(float) * sin.size()));
  return RopeView{static_cast<const float*>(c), static_cast<const float*>(s), g.rope_angles};
}

// Every workspace buffer of a rank, in allocation order: DeviceRankWorkspaceBytes sums them and
// AllocWorkspace allocates them, so the memory plan reserves exactly what is taken.
struct WorkspaceSizes {
  int64_t x, q, kv, ffn, operand, partials, head_in, logits;  // floats (operand: bf16 elements)
  int64_t cand_k = 0, cand_scratch = 0;                       // per-row candidates; scratch bytes
  size_t pass_inputs = 0, block_tables = 0;                   // bytes
  std::vector<int64_t> rope;                                  // floats per table (cos and sin each)
};

WorkspaceSizes SizesFor(const ModelConfig& c, const RankShard& shard, const RankLimits& lim) {
  // Row buffers hold the GEMM buckets' padding rows too (device_rank.h).
  const int64_t R = RowCapacity(lim.max_rows), L = lim.max_out_rows, H = c.hidden_size;
  const int64_t ffn = shard.ffn.size(), vocab = shard.vocab.size();
  int64_t q_width = 0, kv_width = 0, q_heads = 0, max_hd = 0;
  bool sliding_rope = false, full_rope = false;
  WorkspaceSizes w{};
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerGeometry& g = c.layers[l];
    const LayerShard& ls = shard.layers[l];
    q_width = std::max<int64_t>(q_width, int64_t{ls.q_heads.size()} * g.head_dim);
    kv_width = std::max<int64_t>(kv_width, int64_t{ls.kv_heads.size()} * g.head_dim);
    q_heads = std::max<int64_t>(q_heads, ls.q_heads.size());
    max_hd = std::max<int64_t>(max_hd, g.head_dim);
    bool& seen = g.kind == LayerKind::kSliding ? sliding_rope : full_rope;
    if (!seen) w.rope.push_back(std::max<int64_t>(lim.max_context * g.rope_angles, 1));
    seen = true;
  }
  w.x = R * H;
  w.q = R * q_width;
  w.kv = R * kv_width;
  w.ffn = R * ffn;
  w.operand = std::max<int64_t>(R, RowCapacity(lim.max_out_rows)) * std::max({H, q_width, ffn});
  // Split-KV partials: decode passes (several splits) have at most max_out_rows rows.
  w.partials = L * q_heads * lim.decode_splits * (max_hd + 2);
  w.head_in = L * H;
  w.logits = int64_t{LogitRowCapacity(lim.max_out_rows)} * vocab;
  if (lim.top_candidates > 0) {
    w.cand_k = lim.top_candidates;
    w.cand_scratch = static_cast<int64_t>(
        TopCandidatesScratchBytes(static_cast<int>(L), static_cast<int>(vocab), lim.top_candidates));
  }
  w.pass_inputs = PassInputLayout(lim).bytes;
  w.block_tables = sizeof(int32_t) * static_cast<size_t>(lim.max_sequences) * lim.max_blocks();
  return w;
}

uint64_t Rounded(uint64_t bytes) { return (std::max<uint64_t>(bytes, 1) + 255) / 256 * 256; }

}  // namespace

uint64_t DeviceRankWorkspaceBytes(const ModelConfig& c, const RankShard& shard, const RankLimits& lim) {
  const WorkspaceSizes w = SizesFor(c, shard, lim);
  const uint64_t f = sizeof(float), L = static_cast<uint64_t>(lim.max_out_rows);
  uint64_t b = 0;
  for (int64_t t : w.rope) b += 2 * Rounded(f * t);
  b += 3 * Rounded(f * w.x) + 2 * Rounded(f * w.q) + 2 * Rounded(f * w.kv) + 2 * Rounded(f * w.ffn);
  b += Rounded(sizeof(uint16_t) * w.operand) + Rounded(f * w.partials) + Rounded(f * w.head_in) + Rounded(f * w.logits);
  if (w.cand_k > 0) {
    b += 2 * Rounded(f * L * w.cand_k) + 2 * Rounded(f * L) + Rounded(w.cand_scratch);
  }
  b += Rounded(w.pass_inputs) + Rounded(w.block_tables);
  return b;
}

namespace {

Status AllocWorkspace(DeviceRank& d) {
  const WorkspaceSizes w = SizesFor(*d.config, d.shard, d.limits);
  const int64_t L = d.limits.max_out_rows;
  uint64_t* acct = &d.workspace_bytes;
  auto floats = [&](int64_t n) -> Result<float*> {
    TEMPER_ASSIGN_OR_RETURN(void* p, d.Alloc(sizeof(float) * n, acct));
    return static_cast<float*>(p);
  };
  TEMPER_ASSIGN_OR_RETURN(d.x, floats(w.x));
  TEMPER_ASSIGN_OR_RETURN(d.xn, floats(w.x));
  TEMPER_ASSIGN_OR_RETURN(d.proj, floats(w.x));
  TEMPER_ASSIGN_OR_RETURN(d.q, floats(w.q));
  TEMPER_ASSIGN_OR_RETURN(d.att, floats(w.q));
  TEMPER_ASSIGN_OR_RETURN(d.k, floats(w.kv));
  TEMPER_ASSIGN_OR_RETURN(d.v, floats(w.kv));
  TEMPER_ASSIGN_OR_RETURN(d.gate, floats(w.ffn));
  TEMPER_ASSIGN_OR_RETURN(d.up, floats(w.ffn));
  TEMPER_ASSIGN_OR_RETURN(void* operand, d.Alloc(sizeof(uint16_t) * w.operand, acct));
  d.operand = static_cast<uint16_t*>(operand);
  TEMPER_ASSIGN_OR_RETURN(d.partials, floats(w.partials));
  TEMPER_ASSIGN_OR_RETURN(d.head_in, floats(w.head_in));
  TEMPER_ASSIGN_OR_RETURN(d.logits, floats(w.logits));
  if (w.cand_k > 0) {
    TEMPER_ASSIGN_OR_RETURN(d.cand_vals, floats(L * w.cand_k));
    TEMPER_ASSIGN_OR_RETURN(void* ids, d.Alloc(sizeof(int32_t) * L * w.cand_k, acct));
    d.cand_ids = static_cast<int32_t*>(ids);
    TEMPER_ASSIGN_OR_RETURN(d.cand_max, floats(L));
    TEMPER_ASSIGN_OR_RETURN(d.cand_mass, floats(L));
    TEMPER_ASSIGN_OR_RETURN(d.cand_scratch, d.Alloc(static_cast<size_t>(w.cand_scratch), acct));
  }

  const PassInputLayout layout(d.limits);
  TEMPER_ASSIGN_OR_RETURN(d.pass_inputs, d.Alloc(w.pass_inputs, acct));
  TEMPER_ASSIGN_OR_RETURN(void* tables, d.Alloc(w.block_tables, acct));
  d.block_tables = static_cast<int32_t*>(tables);
  char* base = static_cast<char*>(d.pass_inputs);
  d.tokens = reinterpret_cast<const int32_t*>(base + layout.tokens);
  d.logit_index = reinterpret_cast<const int32_t*>(base + layout.logit_index);
  d.temperatures = reinterpret_cast<const float*>(base + layout.temperatures);
  d.tables = RowTables{.positions = reinterpret_cast<const int64_t*>(base + layout.positions),
                       .slots = reinterpret_cast<const int32_t*>(base + layout.slots),
                       .chunk_start = reinterpret_cast<const int64_t*>(base + layout.chunk_start),
                       .first_row = reinterpret_cast<const int32_t*>(base + layout.first_row),
                       .chunk_end = reinterpret_cast<const int64_t*>(base + layout.chunk_end),
                       .blocks = d.block_tables,
                       .max_blocks = d.limits.max_blocks()};
  return Status::OK();
}

// The KV cache: per sliding layer a ring per sequence slot (and per snapshot slot); per full
// layer a paged pool. k_eq_v layers keep V only.
Status AllocKv(DeviceRank& d) {
  const ModelConfig& c = *d.config;
  const RankLimits& lim = d.limits;
  auto bf16 = [&](int64_t n) -> Result<uint16_t*> {
    TEMPER_ASSIGN_OR_RETURN(void* p, d.Alloc(sizeof(uint16_t) * std::max<int64_t>(n, 1), &d.kv_bytes));
    return static_cast<uint16_t*>(p);
  };
  for (int l = 0; l < c.num_layers; ++l) {
    DeviceLayer& dl = d.layers[l];
    const bool sliding = c.layers[l].kind == LayerKind::kSliding;
    const int64_t rows = sliding ? int64_t{lim.max_sequences} * RingSlots(c) : lim.num_blocks * lim.block_tokens;
    dl.kv = KvLayerView{.k = nullptr,
                        .v = nullptr,
                        .k_norm = dl.k_norm,
                        .norm_offset = c.norm_weight_offset,
                        .score_scale = c.attention_scale,
                        .value_norm = c.value_norm,
                        .sliding = sliding,
                        .window = c.sliding_window,
                        .ring = RingSlots(c),
                        .kv_heads = dl.kv_width / dl.head_dim,
                        .head_dim = dl.head_dim,
                        .block_tokens = lim.block_tokens,
                        .rope = dl.rope};
    TEMPER_ASSIGN_OR_RETURN(dl.kv.v, bf16(rows * dl.kv_width));
    if (!dl.k_eq_v) {
      TEMPER_ASSIGN_OR_RETURN(dl.kv.k, bf16(rows * dl.kv_width));
    }
    if (sliding && lim.max_snapshots > 0) {
      const int64_t snap_rows = int64_t{lim.max_snapshots} * RingSlots(c);
      TEMPER_ASSIGN_OR_RETURN(dl.snap_v, bf16(snap_rows * dl.kv_width));
      if (!dl.k_eq_v) {
        TEMPER_ASSIGN_OR_RETURN(dl.snap_k, bf16(snap_rows * dl.kv_width));
      }
    }
  }
  return Status::OK();
}

}  // namespace

Status BuildDeviceRank(DeviceRank& d, const ModelWeights* weights, uint64_t seed) {
  const ModelConfig& c = *d.config;
  d.layers.assign(static_cast<size_t>(c.num_layers), DeviceLayer{});
  // The memory plan's order: weights, workspace, rings and pool.
  ShardLoader loader(d, weights, seed);
  TEMPER_RETURN_IF_ERROR(LoadWeights(d, loader));
  RopeView sliding_rope, full_rope;
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerGeometry& g = c.layers[l];
    const LayerShard& ls = d.shard.layers[l];
    DeviceLayer& dl = d.layers[l];
    dl.k_eq_v = g.k_eq_v;
    dl.head_dim = g.head_dim;
    dl.q_width = ls.q_heads.size() * g.head_dim;
    dl.kv_width = ls.kv_heads.size() * g.head_dim;
    dl.heads = HeadRange{.q_heads = ls.q_heads.size(),
                         .q_head_begin = ls.q_heads.begin,
                         .group = c.num_heads / g.num_kv_heads,
                         .kv_head_begin = ls.kv_heads.begin};
    RopeView& rope = g.kind == LayerKind::kSliding ? sliding_rope : full_rope;
    if (!rope.cos) {
      TEMPER_ASSIGN_OR_RETURN(rope, UploadRope(d, g));
    }
    dl.rope = rope;
  }
  TEMPER_RETURN_IF_ERROR(AllocWorkspace(d));
  TEMPER_RETURN_IF_ERROR(AllocKv(d));
  return d.ops->Synchronize();
}

}  // namespace temper::engine::cuda
