// The Gemma 4 or Gemma 3 text decoder on one tensor-parallel rank of the device backend, read top
// to bottom like llama2.c's forward(): the same steps as the CPU reference (engine/cpu/forward.cpp),
// as ops on the rank's device buffers. The numbered points are those of the golden fixture README.
//
// Per layer (HF Gemma4TextDecoderLayer):
//   h   = x + post_attention_norm(attention(input_norm(x)))
//   out = (h + post_feedforward_norm(mlp(pre_feedforward_norm(h)))) * layer_scalar
// with the attention's o_proj and the MLP's down_proj summed over ranks by an all-reduce.
//
// Precision: the residual stream and every activation are fp32; weights and the KV cache bf16.
// Decode rows (at most 8) multiply fp32 activations by the weights (GEMV); prefill passes round
// the activations to bf16 for the tensor-core GEMM.
#include "engine/cuda/device_rank.h"

#include <algorithm>
#include <vector>

#include "engine/backend.h"

namespace temper::engine::cuda {
namespace {

// y[rows][out] = x[rows][in] · Wᵀ, W packed [out][in]. Products of more than kMaxGemvRows rows run
// GemmRows(rows) rows (device_rank.h: the rows after `rows` are padding nothing reads).
Status Linear(DeviceRank& d, const float* x, int rows, int in, const uint16_t* w, int out, float* y) {
  if (rows <= kMaxGemvRows) return d.ops->Gemv(x, GemvParts().Add(w, y, out), rows, in);
  TEMPER_RETURN_IF_ERROR(d.ops->ToBf16(x, d.operand, int64_t{rows} * in));
  const int padded = GemmRows(rows);
  return d.ops->Gemm(d.operand, in, w, in, y, out, padded, in, out);
}

// A decode pass (at most kMaxGemvRows rows) takes the fused path: q, k and v as one GEMV, the
// fresh keys and values stored by the norm kernel before the attention, gate and up as one GEMV
// with the GeGLU. Storing first is right because no item of such a pass has more rows than the
// ring's slack for drafts (rank_ops.h, QkvNorm); a prefill pass attends first and then stores.
static_assert(kMaxGemvRows <= kMaxDraftTokens + 1);

// On entry d.xn holds input_norm(x) (the previous layer's last op, or the embedding's norm); on
// exit d.x holds the layer's output and, unless this is the last layer, d.xn the next layer's
// input_norm of it.
Status Layer(DeviceRank& d, const DeviceLayer& l, const DeviceLayer* next, const PassShape& s) {
  const ModelConfig& c = *d.config;
  const int H = c.hidden_size, rows = s.rows, hd = l.head_dim;
  const float eps = c.rms_norm_eps;
  const float wo = c.norm_weight_offset;  // Gemma 3's norms multiply by 1 + w
  RankOps& ops = *d.ops;
  const bool decode = rows <= kMaxGemvRows;

  // ---- attention ----
  if (decode) {
    GemvParts qkv;
    qkv.Add(l.q, d.q, l.q_width).Add(l.k, d.k, l.kv_width);
    if (!l.k_eq_v) qkv.Add(l.v, d.v, l.kv_width);
    TEMPER_RETURN_IF_ERROR(ops.Gemv(d.xn, qkv, rows, H));
  } else {
    TEMPER_RETURN_IF_ERROR(Linear(d, d.xn, rows, H, l.q, l.q_width, d.q));
    TEMPER_RETURN_IF_ERROR(Linear(d, d.xn, rows, H, l.k, l.kv_width, d.k));
    if (!l.k_eq_v) TEMPER_RETURN_IF_ERROR(Linear(d, d.xn, rows, H, l.v, l.kv_width, d.v));
  }
  // Points 3, 6: per-head q_norm and k_norm with RoPE (Gemma 3: the query also scaled by
  // query_pre_attn_scalar^-0.5, l.kv.score_scale), v_norm without weight or rotation (none on
  // Gemma 3); on k_eq_v layers V = v_norm(raw k_proj output), the cache keeps V only and the
  // attention rebuilds K = RoPE(V ⊙ k_norm) for cached and fresh keys alike.
  TEMPER_RETURN_IF_ERROR(
      ops.QkvNorm(l.kv, d.q, d.k, d.v, l.q_norm, rows, l.q_width / hd, eps, d.tables, /*write_kv=*/decode));
  // Points 4, 7, 9: scale 1 (Gemma 3's is folded into q above), the strict window, grouped
  // heads. Keys of this pass come from d.k / d.v, older ones from the cache.
  TEMPER_RETURN_IF_ERROR(ops.Attention(l.kv, d.q, d.k, d.v, d.att, rows, d.tables, l.heads, s.splits, d.partials));
  if (!decode) TEMPER_RETURN_IF_ERROR(ops.KvWrite(l.kv, d.k, d.v, rows, d.tables));
  // Row-parallel o_proj: partial sums over this rank's heads, completed by the all-reduce.
  TEMPER_RETURN_IF_ERROR(Linear(d, d.att, rows, l.q_width, l.o, H, d.proj));
  TEMPER_RETURN_IF_ERROR(ops.AllReduceSum(d.proj, static_cast<size_t>(rows) * H));
  // Point 10: the sandwich norm on the branch, the residual add, and the MLP's input norm.
  TEMPER_RETURN_IF_ERROR(
      ops.NormResidual(d.x, d.proj, l.post_attention_norm, rows, H, eps, 1.0f, l.pre_feedforward_norm, d.xn, wo));

  // ---- MLP: down(gelu_tanh(gate(x)) · up(x)) ----
  const int ffn = d.shard.ffn.size();
  if (decode) {
    TEMPER_RETURN_IF_ERROR(ops.GemvGeglu(d.xn, l.gate, l.up, d.gate, rows, H, ffn));
  } else {
    TEMPER_RETURN_IF_ERROR(Linear(d, d.xn, rows, H, l.gate, ffn, d.gate));
    TEMPER_RETURN_IF_ERROR(Linear(d, d.xn, rows, H, l.up, ffn, d.up));
    TEMPER_RETURN_IF_ERROR(ops.Geglu(d.gate, d.up, int64_t{rows} * ffn));
  }
  TEMPER_RETURN_IF_ERROR(Linear(d, d.gate, rows, ffn, l.down, H, d.proj));
  TEMPER_RETURN_IF_ERROR(ops.AllReduceSum(d.proj, static_cast<size_t>(rows) * H));
  // Point 11: layer_scalar scales the residual stream itself, after both residual adds; then the
  // next layer's input norm.
  return ops.NormResidual(d.x, d.proj, l.post_feedforward_norm, rows, H, eps, l.layer_scalar,
                          next ? next->input_norm : nullptr, next ? d.xn : nullptr, wo);
}

// The head over logit rows [first, first + n) of the pass, which are output rows
// out_begin + first ... (point 12: final norm, tied embedding, softcap), then the sampling
// candidates of those rows, or the copy of this rank's columns to the host.
Status Head(DeviceRank& d, const PassShape& s, int first, int n, float* host_logits) {
  const ModelConfig& c = *d.config;
  const int H = c.hidden_size, vocab = d.vocab_rows();
  const int slot = (s.out_begin + first) % d.limits.max_out_rows;
  float* logits = d.logits + int64_t{slot} * vocab;
  RankOps& ops = *d.ops;
  // The final-norm rows stay at their slots: the MTP drafter starts from them (device_drafter.h).
  float* head_in = d.head_in + int64_t{slot} * H;
  TEMPER_RETURN_IF_ERROR(ops.GatherRows(d.x, H, d.logit_index + first, n, head_in));
  TEMPER_RETURN_IF_ERROR(ops.RmsNorm(head_in, head_in, d.final_norm, n, H, c.rms_norm_eps, c.norm_weight_offset));
  TEMPER_RETURN_IF_ERROR(Linear(d, head_in, n, H, d.lm_head, vocab, logits));
  if (c.final_logit_softcapping > 0) {
    TEMPER_RETURN_IF_ERROR(ops.Softcap(logits, vocab, n, vocab, c.final_logit_softcapping));
  }
  if (host_logits) {
    const int64_t out_row = s.out_begin + first;
    TEMPER_RETURN_IF_ERROR(ops.CopyRowsToHost(host_logits + out_row * c.vocab_size + d.shard.vocab.begin,
                                              sizeof(float) * c.vocab_size, logits, sizeof(float) * vocab, n));
  }
  if (!s.candidates) return Status::OK();
  const int k = d.limits.top_candidates;
  return ops.TopCandidates(logits, vocab, n, vocab, k, d.shard.vocab.begin, d.temperatures + slot,
                           d.cand_vals + int64_t{slot} * k, d.cand_ids + int64_t{slot} * k, d.cand_max + slot,
                           d.cand_mass + slot, d.cand_scratch);
}

}  // namespace

int GemmRows(int rows) {
  if (rows <= 16) return 16;
  if (rows <= 32) return 32;
  return (rows + 63) / 64 * 64;
}

int RowCapacity(int rows) { return rows <= kMaxGemvRows ? rows : GemmRows(rows); }

int LogitRowCapacity(int max_out_rows) {
  int rows = max_out_rows;
  for (int n = kMaxGemvRows + 1; n <= max_out_rows; ++n) rows = std::max(rows, max_out_rows - n + GemmRows(n));
  return rows;
}

Status WarmGemms(DeviceRank& d) {
  const ModelConfig& c = *d.config;
  const int H = c.hidden_size, ffn = d.shard.ffn.size(), vocab = d.vocab_rows();
  RankOps& ops = *d.ops;
  // One product per distinct shape: weights and buffers are all 256-byte aligned, so (in, out)
  // decides the kernel; running every layer would cost a whole forward pass per bucket.
  struct Product {
    int in, out;
    const uint16_t* w;
    float* y;
  };
  std::vector<Product> products;
  auto add = [&](int in, int out, const uint16_t* w, float* y) {
    for (const Product& p : products) {
      if (p.in == in && p.out == out) return;
    }
    products.push_back({in, out, w, y});
  };
  for (const DeviceLayer& l : d.layers) {
    add(H, l.q_width, l.q, d.q);
    add(H, l.kv_width, l.k, d.k);
    add(l.q_width, H, l.o, d.proj);
    add(H, ffn, l.gate, d.gate);
    add(ffn, H, l.down, d.proj);
  }
  for (int rows = GemmRows(kMaxGemvRows + 1); rows <= RowCapacity(d.limits.max_rows); rows = GemmRows(rows + 1)) {
    for (const Product& p : products) {
      TEMPER_RETURN_IF_ERROR(ops.Gemm(d.operand, p.in, p.w, p.in, p.y, p.out, rows, p.in, p.out));
    }
  }
  // The head writes a run of n output rows from any slot s with s + n <= max_out_rows; the slot's
  // address decides the kernel's alignment, which repeats every 4 slots (GemmShape caps it at 16
  // bytes), so slots 0-3 stand for all: each runs every bucket a run starting there can need.
  const int L = d.limits.max_out_rows;
  for (int slot = 0; slot < std::min(L, 4); ++slot) {
    const int longest = L - slot;
    if (longest <= kMaxGemvRows) continue;
    for (int rows = GemmRows(kMaxGemvRows + 1); rows <= GemmRows(longest); rows = GemmRows(rows + 1)) {
      TEMPER_RETURN_IF_ERROR(
          ops.Gemm(d.operand, H, d.lm_head, H, d.logits + int64_t{slot} * vocab, vocab, rows, H, vocab));
    }
  }
  return Status::OK();
}

Status RunPass(DeviceRank& d, const PassShape& s, const PassOutput& out) {
  const ModelConfig& c = *d.config;
  const int H = c.hidden_size;
  RankOps& ops = *d.ops;
  const bool capture = out.hidden != nullptr && d.shard.rank == 0;
  auto capture_hidden = [&](int index, const float* src) -> Status {
    if (!capture) return Status::OK();
    return ops.CopyToHost(out.hidden + int64_t{index} * s.rows * H, src, sizeof(float) * s.rows * H);
  };

  // Point 1: embedding × bf16(sqrt(hidden)), vocab-parallel, assembled by the all-reduce.
  TEMPER_RETURN_IF_ERROR(
      ops.Embed(d.tokens, s.rows, d.embed, d.shard.vocab.begin, d.shard.vocab.end, H, c.embed_scale, d.x));
  if (d.shard.tp > 1) TEMPER_RETURN_IF_ERROR(ops.AllReduceSum(d.x, static_cast<size_t>(s.rows) * H));
  TEMPER_RETURN_IF_ERROR(capture_hidden(0, d.x));

  TEMPER_RETURN_IF_ERROR(
      ops.RmsNorm(d.x, d.xn, d.layers[0].input_norm, s.rows, H, c.rms_norm_eps, c.norm_weight_offset));
  for (int l = 0; l < c.num_layers; ++l) {
    const DeviceLayer* next = l + 1 < c.num_layers ? &d.layers[l + 1] : nullptr;
    TEMPER_RETURN_IF_ERROR(Layer(d, d.layers[l], next, s));
    if (l + 1 < c.num_layers) TEMPER_RETURN_IF_ERROR(capture_hidden(l + 1, d.x));
  }
  // Point 13: the last hidden state is the final-norm output.
  if (capture) {
    TEMPER_RETURN_IF_ERROR(ops.RmsNorm(d.x, d.xn, d.final_norm, s.rows, H, c.rms_norm_eps, c.norm_weight_offset));
    TEMPER_RETURN_IF_ERROR(capture_hidden(c.num_layers, d.xn));
  }

  // The head, in runs of output rows that do not wrap around the resident logits buffer (each run
  // is copied out before the next one overwrites it).
  for (int first = 0; first < s.logit_rows;) {
    const int slot = (s.out_begin + first) % d.limits.max_out_rows;
    const int n = std::min(s.logit_rows - first, d.limits.max_out_rows - slot);
    TEMPER_RETURN_IF_ERROR(Head(d, s, first, n, out.logits));
    first += n;
  }
  return Status::OK();
}

}  // namespace temper::engine::cuda
