#include "engine/cuda/device_drafter.h"

#include <algorithm>

#include <fmt/format.h>

namespace temper::engine::cuda {

DraftInputLayout::DraftInputLayout() {
  const size_t rows = kMaxDraftRows;
  auto take = [&](size_t count, size_t elem) { return TakeInputArray(&bytes, count, elem); };
  tokens = take(rows, 4);
  rope_positions = take(rows, 8);
  attend_positions = take(rows, 8);
  slots = take(rows, 4);
  chunk_start = take(rows, 8);
  first_row = take(rows, 4);
  chunk_end = take(rows, 8);
  hidden_slots = take(rows, 4);
  interleave = take(2 * rows, 4);
  temperatures = take(rows, 4);
}

namespace {

// Every buffer of a rank's drafter, in floats (cand_scratch in bytes), in allocation order:
// DeviceDrafterBytes sums them and BuildDeviceDrafter allocates them.
struct DrafterBuffers {
  int64_t eh, cat, x, q, gate, logits, cand;
  size_t cand_scratch, inputs;
};

DrafterBuffers BuffersFor(const DrafterConfig& drafter, const RankShard& shard) {
  const ModelConfig& c = drafter.text;
  const int64_t R = kMaxDraftRows, hb = drafter.backbone_hidden_size, tp = shard.tp;
  int64_t q_width = 0;
  for (const LayerGeometry& g : c.layers) q_width = std::max<int64_t>(q_width, c.num_heads / tp * g.head_dim);
  DrafterBuffers b{};
  b.eh = 2 * R * hb;
  b.cat = R * 2 * hb;
  b.x = R * c.hidden_size;  // x, xn and proj each
  b.q = R * q_width;        // q and att each
  b.gate = R * EvenSplit(c.intermediate_size, shard.tp, shard.rank).size();
  b.logits = R * shard.vocab.size();
  b.cand = R;  // vals, ids, max and mass each
  b.cand_scratch = TopCandidatesScratchBytes(kMaxDraftRows, shard.vocab.size(), 1);
  b.inputs = DraftInputLayout().bytes;
  return b;
}

uint64_t Rounded(uint64_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace

DrafterRankBytes DeviceDrafterBytes(const DrafterConfig& drafter, const RankShard& shard) {
  const ModelConfig& c = drafter.text;
  const uint64_t hd = c.hidden_size, hb = drafter.backbone_hidden_size, tp = shard.tp;
  const uint64_t ffn = EvenSplit(c.intermediate_size, shard.tp, shard.rank).size();
  DrafterRankBytes out;
  auto weights = [&](uint64_t elements) { out.weights += Rounded(2 * elements); };
  weights(hd * 2 * hb);  // pre_projection
  weights(hb * hd);      // post_projection
  weights(hd);           // final norm
  weights(static_cast<uint64_t>(shard.vocab.size()) * hd);
  for (const LayerGeometry& g : c.layers) {
    const uint64_t q = c.num_heads / tp * g.head_dim;
    weights(q * hd);  // q
    weights(hd * q);  // o
    weights(ffn * hd);
    weights(ffn * hd);
    weights(hd * ffn);
    weights(g.head_dim);
    for (int norm = 0; norm < 4; ++norm) weights(hd);
  }
  const DrafterBuffers b = BuffersFor(drafter, shard);
  auto floats = [&](int64_t n) { out.workspace += Rounded(4 * static_cast<uint64_t>(n)); };
  floats(b.eh);
  floats(b.cat);
  for (int i = 0; i < 3; ++i) floats(b.x);
  for (int i = 0; i < 2; ++i) floats(b.q);
  floats(b.gate);
  floats(b.logits);
  for (int i = 0; i < 4; ++i) floats(b.cand);
  out.workspace += Rounded(b.cand_scratch) + Rounded(b.inputs);
  return out;
}

Status CheckDeviceDrafter(const DeviceRank& rank, const DrafterConfig& drafter) {
  const ModelConfig& target = *rank.config;
  const ModelConfig& c = drafter.text;
  const Range q_heads = EvenSplit(c.num_heads, rank.shard.tp, rank.shard.rank);
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerGeometry& g = c.layers[l];
    const int t = drafter.target_layers[l];
    if (q_heads.size() > rank.shard.layers[t].q_heads.size()) {
      return Status::InvalidArgument(
          fmt::format("device backend: the MTP drafter has more query heads per rank ({}) than the target ({})",
                      q_heads.size(), rank.shard.layers[t].q_heads.size()));
    }
    if (g.rope_angles != target.layers[t].rope_angles || g.rope_theta != target.layers[t].rope_theta) {
      return Status::InvalidArgument(fmt::format(
          "device backend: MTP drafter layer {} rotates with another RoPE than target layer {} (angles {} vs {}, "
          "theta {} vs {})",
          l, t, g.rope_angles, target.layers[t].rope_angles, g.rope_theta, target.layers[t].rope_theta));
    }
  }
  return Status::OK();
}

Status BuildDeviceDrafter(DeviceRank& d, const DrafterWeights& w) {
  const DrafterConfig& dc = w.config();
  const ModelConfig& c = dc.text;
  const RankShard& shard = d.shard;
  auto m = std::make_unique<DeviceDrafter>();
  m->hidden = c.hidden_size;
  const Range ffn = EvenSplit(c.intermediate_size, shard.tp, shard.rank);
  m->ffn = ffn.size();
  const Range q_heads = EvenSplit(c.num_heads, shard.tp, shard.rank);

  // Weights, in DeviceDrafterBytes' order.
  TEMPER_ASSIGN_OR_RETURN(m->pre_projection, UploadWeights(d, w.pre_projection()));
  TEMPER_ASSIGN_OR_RETURN(m->post_projection, UploadWeights(d, w.post_projection()));
  auto vector = [&](std::span<const uint16_t> v) {
    return UploadWeights(d, Bf16Matrix{v.data(), 1, static_cast<int>(v.size()), static_cast<int64_t>(v.size())});
  };
  TEMPER_ASSIGN_OR_RETURN(m->final_norm, vector(w.final_norm()));
  TEMPER_ASSIGN_OR_RETURN(m->lm_head, UploadWeights(d, w.lm_head().Rows(shard.vocab.begin, shard.vocab.end)));
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerGeometry& g = c.layers[l];
    const DrafterLayerWeights& lw = w.layer(l);
    const DeviceLayer& target = d.layers[dc.target_layers[l]];
    const int hd = g.head_dim;
    DeviceDrafterLayer dl;
    TEMPER_ASSIGN_OR_RETURN(dl.q, UploadWeights(d, lw.q_proj.Rows(q_heads.begin * hd, q_heads.end * hd)));
    TEMPER_ASSIGN_OR_RETURN(dl.o, UploadWeights(d, lw.o_proj.Cols(q_heads.begin * hd, q_heads.end * hd)));
    TEMPER_ASSIGN_OR_RETURN(dl.gate, UploadWeights(d, lw.gate_proj.Rows(ffn.begin, ffn.end)));
    TEMPER_ASSIGN_OR_RETURN(dl.up, UploadWeights(d, lw.up_proj.Rows(ffn.begin, ffn.end)));
    TEMPER_ASSIGN_OR_RETURN(dl.down, UploadWeights(d, lw.down_proj.Cols(ffn.begin, ffn.end)));
    TEMPER_ASSIGN_OR_RETURN(dl.q_norm, vector(lw.q_norm));
    TEMPER_ASSIGN_OR_RETURN(dl.input_norm, vector(lw.input_norm));
    TEMPER_ASSIGN_OR_RETURN(dl.post_attention_norm, vector(lw.post_attention_norm));
    TEMPER_ASSIGN_OR_RETURN(dl.pre_feedforward_norm, vector(lw.pre_feedforward_norm));
    TEMPER_ASSIGN_OR_RETURN(dl.post_feedforward_norm, vector(lw.post_feedforward_norm));
    dl.layer_scalar = lw.layer_scalar;
    dl.q_width = q_heads.size() * hd;
    dl.heads = HeadRange{q_heads.size(), q_heads.begin, c.num_heads / g.num_kv_heads, target.heads.kv_head_begin};
    dl.query = target.kv;
    dl.query.kv_heads = 0;  // queries only: the drafter computes no keys or values
    dl.attend = target.kv;
    if (dl.attend.sliding) dl.attend.window += 1;
    m->layers.push_back(dl);
  }

  // Buffers, in DeviceDrafterBytes' order.
  const DrafterBuffers b = BuffersFor(dc, shard);
  auto floats = [&](int64_t n) -> Result<float*> {
    TEMPER_ASSIGN_OR_RETURN(void* p, d.Alloc(sizeof(float) * static_cast<size_t>(n), &d.workspace_bytes));
    return static_cast<float*>(p);
  };
  TEMPER_ASSIGN_OR_RETURN(m->eh, floats(b.eh));
  TEMPER_ASSIGN_OR_RETURN(m->cat, floats(b.cat));
  TEMPER_ASSIGN_OR_RETURN(m->x, floats(b.x));
  TEMPER_ASSIGN_OR_RETURN(m->xn, floats(b.x));
  TEMPER_ASSIGN_OR_RETURN(m->proj, floats(b.x));
  TEMPER_ASSIGN_OR_RETURN(m->q, floats(b.q));
  TEMPER_ASSIGN_OR_RETURN(m->att, floats(b.q));
  TEMPER_ASSIGN_OR_RETURN(m->gate, floats(b.gate));
  TEMPER_ASSIGN_OR_RETURN(m->logits, floats(b.logits));
  TEMPER_ASSIGN_OR_RETURN(m->cand_vals, floats(b.cand));
  TEMPER_ASSIGN_OR_RETURN(float* ids, floats(b.cand));
  m->cand_ids = reinterpret_cast<int32_t*>(ids);
  TEMPER_ASSIGN_OR_RETURN(m->cand_max, floats(b.cand));
  TEMPER_ASSIGN_OR_RETURN(m->cand_mass, floats(b.cand));
  TEMPER_ASSIGN_OR_RETURN(m->cand_scratch, d.Alloc(b.cand_scratch, &d.workspace_bytes));
  TEMPER_ASSIGN_OR_RETURN(m->inputs, d.Alloc(b.inputs, &d.workspace_bytes));

  const DraftInputLayout layout;
  char* in = static_cast<char*>(m->inputs);
  m->tokens = reinterpret_cast<const int32_t*>(in + layout.tokens);
  m->hidden_slots = reinterpret_cast<const int32_t*>(in + layout.hidden_slots);
  m->interleave = reinterpret_cast<const int32_t*>(in + layout.interleave);
  m->temperatures = reinterpret_cast<const float*>(in + layout.temperatures);
  for (RowTables* t : {&m->rope_tables, &m->attend_tables}) {
    t->slots = reinterpret_cast<const int32_t*>(in + layout.slots);
    t->chunk_start = reinterpret_cast<const int64_t*>(in + layout.chunk_start);
    t->first_row = reinterpret_cast<const int32_t*>(in + layout.first_row);
    t->chunk_end = reinterpret_cast<const int64_t*>(in + layout.chunk_end);
    t->blocks = d.tables.blocks;
    t->max_blocks = d.tables.max_blocks;
  }
  m->rope_tables.positions = reinterpret_cast<const int64_t*>(in + layout.rope_positions);
  m->attend_tables.positions = reinterpret_cast<const int64_t*>(in + layout.attend_positions);
  d.drafter = std::move(m);
  return Status::OK();
}

Status RunDraftStep(DeviceRank& d, int rows, bool first) {
  const ModelConfig& target = *d.config;
  const DeviceDrafter& m = *d.drafter;
  RankOps& ops = *d.ops;
  const int hb = target.hidden_size, hd = m.hidden, vocab = d.vocab_rows();
  const float eps = target.rms_norm_eps;
  const float wo = target.norm_weight_offset;          // 0: drafters draft for Gemma 4 targets only
  float* hidden = m.eh + int64_t{kMaxDraftRows} * hb;  // the h half of eh

  // The first step's h: the target's final-norm hidden states, where the head left them.
  if (first) TEMPER_RETURN_IF_ERROR(ops.GatherRows(d.head_in, hb, m.hidden_slots, rows, hidden));
  // [e, h]: the TARGET's scaled embedding (vocab-parallel, assembled by the all-reduce) beside h,
  // in the concat order of all three public implementations.
  TEMPER_RETURN_IF_ERROR(
      ops.Embed(m.tokens, rows, d.embed, d.shard.vocab.begin, d.shard.vocab.end, hb, target.embed_scale, m.eh));
  if (d.shard.tp > 1) TEMPER_RETURN_IF_ERROR(ops.AllReduceSum(m.eh, static_cast<size_t>(rows) * hb));
  TEMPER_RETURN_IF_ERROR(ops.GatherRows(m.eh, hb, m.interleave, 2 * rows, m.cat));
  TEMPER_RETURN_IF_ERROR(ops.Gemv(m.cat, GemvParts().Add(m.pre_projection, m.x, hd), rows, 2 * hb));
  TEMPER_RETURN_IF_ERROR(ops.RmsNorm(m.x, m.xn, m.layers[0].input_norm, rows, hd, eps, wo));

  for (size_t l = 0; l < m.layers.size(); ++l) {
    const DeviceDrafterLayer& dl = m.layers[l];
    TEMPER_RETURN_IF_ERROR(ops.Gemv(m.xn, GemvParts().Add(dl.q, m.q, dl.q_width), rows, hd));
    TEMPER_RETURN_IF_ERROR(ops.QkvNorm(dl.query, m.q, nullptr, nullptr, dl.q_norm, rows, dl.heads.q_heads, eps,
                                       m.rope_tables, /*write_kv=*/false));
    // Every visible key is below chunk_start: the fresh k and v are never read.
    TEMPER_RETURN_IF_ERROR(ops.Attention(dl.attend, m.q, d.k, d.v, m.att, rows, m.attend_tables, dl.heads,
                                         d.limits.decode_splits, d.partials));
    TEMPER_RETURN_IF_ERROR(ops.Gemv(m.att, GemvParts().Add(dl.o, m.proj, hd), rows, dl.q_width));
    TEMPER_RETURN_IF_ERROR(ops.AllReduceSum(m.proj, static_cast<size_t>(rows) * hd));
    TEMPER_RETURN_IF_ERROR(
        ops.NormResidual(m.x, m.proj, dl.post_attention_norm, rows, hd, eps, 1.0f, dl.pre_feedforward_norm, m.xn, wo));
    TEMPER_RETURN_IF_ERROR(ops.GemvGeglu(m.xn, dl.gate, dl.up, m.gate, rows, hd, m.ffn));
    TEMPER_RETURN_IF_ERROR(ops.Gemv(m.gate, GemvParts().Add(dl.down, m.proj, hd), rows, m.ffn));
    TEMPER_RETURN_IF_ERROR(ops.AllReduceSum(m.proj, static_cast<size_t>(rows) * hd));
    // The last layer's fused next norm is the final norm: xn is then the head's input.
    const uint16_t* next_norm = l + 1 < m.layers.size() ? m.layers[l + 1].input_norm : m.final_norm;
    TEMPER_RETURN_IF_ERROR(
        ops.NormResidual(m.x, m.proj, dl.post_feedforward_norm, rows, hd, eps, dl.layer_scalar, next_norm, m.xn, wo));
  }

  // Head (tied to the drafter's own embedding, no softcap) and this rank's best candidate; then h.
  TEMPER_RETURN_IF_ERROR(ops.Gemv(m.xn, GemvParts().Add(m.lm_head, m.logits, vocab), rows, hd));
  TEMPER_RETURN_IF_ERROR(ops.TopCandidates(m.logits, vocab, rows, vocab, 1, d.shard.vocab.begin, m.temperatures,
                                           m.cand_vals, m.cand_ids, m.cand_max, m.cand_mass, m.cand_scratch));
  return ops.Gemv(m.xn, GemvParts().Add(m.post_projection, hidden, hb), rows, hd);
}

}  // namespace temper::engine::cuda
