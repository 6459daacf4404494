// The Gemma 4 and Gemma 3 text decoders on the CPU, for one tensor-parallel rank: fp32
// activations, bf16 weights widened on the fly. Read top to bottom, like llama2.c's forward(). The
// numbered points refer to "Subtle points of the Gemma 4 text decoder" in the golden fixtures' README; the golden
// test (tests/engine/cpu/cpu_forward_test.cpp) fails if any of them is wrong.
//
// Per layer (HF Gemma4TextDecoderLayer; Gemma3DecoderLayer is the same without layer_scalar, its
// differences in numerics being ModelConfig fields: norm_weight_offset, attention_scale,
// value_norm, the RoPE's linear factor):
//   h   = x + post_attention_norm(attention(input_norm(x)))
//   out = (h + post_feedforward_norm(mlp(pre_feedforward_norm(h)))) * layer_scalar
// with the attention's o_proj and the MLP's down_proj summed over ranks by an all-reduce.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/cpu/layer_math.h"
#include "engine/cpu/matmul.h"
#include "engine/cpu/rank.h"
#include "engine/model/bf16.h"

namespace temper::engine::cpu {

std::unique_ptr<RopeTable> MakeRopeTable(const LayerGeometry& layer, int64_t max_context) {
  auto t = std::make_unique<RopeTable>();
  t->head_dim = layer.head_dim;
  t->angles = layer.rope_angles;
  t->cos.resize(static_cast<size_t>(max_context * t->angles));
  t->sin.resize(t->cos.size());
  // Point 8: the exponent's denominator is the full head_dim even when only `angles` frequencies
  // rotate ("proportional" RoPE); angles and cos/sin are fp32, as in transformers.
  const float theta = static_cast<float>(layer.rope_theta);
  // Linear scaling (Gemma 3's full layers on the larger models) divides each inv_freq by the
  // factor in fp32, as transformers' _compute_linear_scaling_rope_parameters does.
  const float linear_factor = static_cast<float>(layer.rope_linear_factor);
  for (int j = 0; j < t->angles; ++j) {
    float inv_freq = 1.0f / std::pow(theta, static_cast<float>(2 * j) / static_cast<float>(layer.head_dim));
    if (linear_factor != 1.0f) inv_freq /= linear_factor;
    for (int64_t pos = 0; pos < max_context; ++pos) {
      const float angle = static_cast<float>(pos) * inv_freq;
      t->cos[pos * t->angles + j] = std::cos(angle);
      t->sin[pos * t->angles + j] = std::sin(angle);
    }
  }
  return t;
}

namespace {

// Scaled dot-product attention of every row's local query heads over its visible keys.
// k and v hold this batch's fresh keys/values, [rows][kv_heads * head_dim]; older positions come
// from the KV cache.
void Attention(RankContext& rank, const BatchPlan& plan, int layer, const float* q, const float* k, const float* v,
               float* out) {
  const ModelConfig& c = *rank.config;
  const LayerGeometry& g = c.layers[layer];
  const RankLayer& rl = rank.layers[layer];
  const int hd = g.head_dim;
  const int q_width = rl.q_heads * hd, kv_width = rl.kv_heads * hd;
  const int group = c.num_heads / g.num_kv_heads;
  const bool sliding = g.kind == LayerKind::kSliding;
  const int64_t rows = static_cast<int64_t>(plan.rows.size());

  rank.pool->ParallelFor(rows * rl.q_heads, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scores, rebuilt(hd);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t r = task / rl.q_heads;
      const int h = static_cast<int>(task % rl.q_heads);
      const BatchRow& row = plan.rows[r];
      // Point 9: query head h reads KV head h / (n_heads / n_kv).
      const int kvh = (rl.q_head_begin + h) / group - rl.kv_head_begin;
      const float* qh = q + r * q_width + h * hd;
      // Point 7: the window is strict; a query sees itself and window - 1 earlier tokens.
      const int64_t lo = sliding ? std::max<int64_t>(0, row.pos - c.sliding_window + 1) : 0;
      const int64_t n = row.pos - lo + 1;
      auto fresh = [&](const float* base, int64_t pos) {
        return base + (row.first_row + (pos - row.chunk_start)) * kv_width + kvh * hd;
      };
      auto value = [&](int64_t pos) -> const float* {
        if (pos >= row.chunk_start) return fresh(v, pos);
        return rank.kv->V(row.seq, layer, pos, plan.blocks[row.seq]) + kvh * hd;
      };
      scores.resize(static_cast<size_t>(n));
      for (int64_t pos = lo; pos <= row.pos; ++pos) {
        const float* key = pos >= row.chunk_start
                               ? fresh(k, pos)
                               : CachedKey(rank, row.seq, layer, pos, plan.blocks[row.seq], kvh, rebuilt.data());
        // Point 4: Gemma 4's scaling is 1.0 (the q/k norms replace 1/sqrt(head_dim)), Gemma 3's
        // query_pre_attn_scalar^-0.5; no logit softcap.
        scores[pos - lo] = Dot(qh, key, hd) * c.attention_scale;
      }
      SoftmaxCombine(scores, lo, value, hd, out + r * q_width + h * hd);
    }
  });
}

// Stores this batch's keys and values of `layer` in the cache, after every row has attended.
void WriteKv(RankContext& rank, const BatchPlan& plan, int layer, const float* k, const float* v) {
  const LayerGeometry& g = rank.config->layers[layer];
  const int64_t width = int64_t{rank.layers[layer].kv_heads} * g.head_dim;
  const bool stores_k = rank.kv->StoresK(layer);
  for (size_t r = 0; r < plan.rows.size(); ++r) {
    const BatchRow& row = plan.rows[r];
    // A ring keeps only the last RingSlots positions; earlier ones of a long chunk would be
    // overwritten by later ones anyway. (Not the window: a short pass may be truncated, and every
    // position it keeps must be in the ring.)
    if (g.kind == LayerKind::kSliding && row.pos < row.chunk_end - RingSlots(*rank.config)) continue;
    std::memcpy(rank.kv->V(row.seq, layer, row.pos, plan.blocks[row.seq]), v + r * width, width * sizeof(float));
    if (stores_k) {
      std::memcpy(rank.kv->K(row.seq, layer, row.pos, plan.blocks[row.seq]), k + r * width, width * sizeof(float));
    }
  }
}

}  // namespace

void ForwardRank(RankContext& rank, const BatchPlan& plan, Communicator& comm) {
  const ModelConfig& c = *rank.config;
  const ModelWeights& weights = *rank.weights;
  const int H = c.hidden_size;
  const int64_t rows = static_cast<int64_t>(plan.rows.size());
  const float eps = c.rms_norm_eps;
  const float wo = c.norm_weight_offset;  // Gemma 3's norms multiply by 1 + w
  const bool capture = plan.hidden != nullptr && rank.shard.rank == 0;
  auto capture_hidden = [&](int index, const float* src) {
    if (capture) std::memcpy(plan.hidden + index * rows * H, src, rows * H * sizeof(float));
  };
  auto resize = [&](std::vector<float>& buf, int64_t width) { buf.resize(static_cast<size_t>(rows * width)); };
  resize(rank.x, H);
  resize(rank.xn, H);
  resize(rank.proj, H);
  resize(rank.gate, rank.shard.ffn.size());
  resize(rank.up, rank.shard.ffn.size());
  float* x = rank.x.data();
  float* xn = rank.xn.data();
  float* proj = rank.proj.data();

  // Point 1: embedding × bf16(sqrt(hidden)). Vocab-parallel: the rank that owns a token's row
  // writes it, the others write zeros, and the all-reduce assembles the rows.
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t token = plan.rows[r].token;
    float* xr = x + r * H;
    if (token >= rank.shard.vocab.begin && token < rank.shard.vocab.end) {
      const uint16_t* e = rank.embed.Row(token - rank.shard.vocab.begin);
      for (int i = 0; i < H; ++i) xr[i] = Bf16ToFloat(e[i]) * c.embed_scale;
    } else {
      std::fill(xr, xr + H, 0.0f);
    }
  }
  comm.AllReduceSum(rank.shard.rank, x, rows * H);
  capture_hidden(0, x);

  for (int l = 0; l < c.num_layers; ++l) {
    const LayerGeometry& g = c.layers[l];
    const LayerWeights& w = weights.layer(l);
    const RankLayer& rl = rank.layers[l];
    const int hd = g.head_dim;
    const int q_width = rl.q_heads * hd, kv_width = rl.kv_heads * hd;
    resize(rank.q, q_width);
    resize(rank.k, kv_width);
    resize(rank.v, kv_width);
    resize(rank.att, q_width);
    float* q = rank.q.data();
    float* k = rank.k.data();
    float* v = rank.v.data();

    // ---- attention ----
    for (int64_t r = 0; r < rows; ++r) RmsNorm(xn + r * H, x + r * H, w.input_norm, H, eps, wo);
    MatMulBf16(*rank.pool, xn, rows, H, rl.q_proj, q, q_width);
    MatMulBf16(*rank.pool, xn, rows, H, rl.k_proj, k, kv_width);
    if (!g.k_eq_v) MatMulBf16(*rank.pool, xn, rows, H, rl.v_proj, v, kv_width);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t pos = plan.rows[r].pos;
      // Point 3: per-head q_norm and k_norm before RoPE; v_norm (Gemma 4 only) has no weight and V
      // is not rotated.
      for (int h = 0; h < rl.q_heads; ++h) {
        float* qh = q + r * q_width + h * hd;
        RmsNorm(qh, qh, w.q_norm, hd, eps, wo);
        Rope(qh, *rl.rope, pos);
      }
      for (int h = 0; h < rl.kv_heads; ++h) {
        float* kh = k + r * kv_width + h * hd;
        float* vh = v + r * kv_width + h * hd;
        if (g.k_eq_v) {
          // Point 6: V = v_norm(raw k_proj output) and K = k_norm(raw) = V ⊙ k_norm.weight, computed
          // exactly as the cache rebuilds it, so cached and fresh keys agree bit for bit.
          RmsNorm(vh, kh, {}, hd, eps, wo);
          for (int d = 0; d < hd; ++d) kh[d] = vh[d] * Bf16ToFloat(w.k_norm[d]);
        } else {
          RmsNorm(kh, kh, w.k_norm, hd, eps, wo);
          if (c.value_norm) RmsNorm(vh, vh, {}, hd, eps, wo);
        }
        Rope(kh, *rl.rope, pos);
      }
    }
    Attention(rank, plan, l, q, k, v, rank.att.data());
    WriteKv(rank, plan, l, k, v);
    // Row-parallel o_proj: partial sums over this rank's heads, completed by the all-reduce.
    MatMulBf16(*rank.pool, rank.att.data(), rows, q_width, rl.o_proj, proj, H);
    comm.AllReduceSum(rank.shard.rank, proj, rows * H);
    // Point 10: the sandwich norm, post_attention_norm on the branch before the residual add.
    for (int64_t r = 0; r < rows; ++r) {
      float* pr = proj + r * H;
      RmsNorm(pr, pr, w.post_attention_norm, H, eps, wo);
      for (int i = 0; i < H; ++i) x[r * H + i] += pr[i];
    }

    // ---- MLP: down(gelu_tanh(gate(x)) · up(x)) ----
    const int ffn = rank.shard.ffn.size();
    for (int64_t r = 0; r < rows; ++r) RmsNorm(xn + r * H, x + r * H, w.pre_feedforward_norm, H, eps, wo);
    MatMulBf16(*rank.pool, xn, rows, H, rl.gate_proj, rank.gate.data(), ffn);
    MatMulBf16(*rank.pool, xn, rows, H, rl.up_proj, rank.up.data(), ffn);
    // tanh costs as much as a few thousand weights' worth of bandwidth per channel: split it too.
    rank.pool->ParallelFor(rows * ffn, 2048, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) rank.gate[i] = GeluTanh(rank.gate[i]) * rank.up[i];
    });
    MatMulBf16(*rank.pool, rank.gate.data(), rows, ffn, rl.down_proj, proj, H);
    comm.AllReduceSum(rank.shard.rank, proj, rows * H);
    // Point 11: layer_scalar scales the residual stream itself, after both residual adds (1 on
    // Gemma 3, which has none).
    for (int64_t r = 0; r < rows; ++r) {
      float* pr = proj + r * H;
      RmsNorm(pr, pr, w.post_feedforward_norm, H, eps, wo);
      for (int i = 0; i < H; ++i) x[r * H + i] = (x[r * H + i] + pr[i]) * w.layer_scalar;
    }
    if (l + 1 < c.num_layers) capture_hidden(l + 1, x);
  }

  // ---- head: final norm, tied embedding, softcap (point 12) ----
  // Point 13: the last hidden state is the final-norm output.
  if (capture) {
    for (int64_t r = 0; r < rows; ++r) RmsNorm(xn + r * H, x + r * H, weights.final_norm(), H, eps, wo);
    capture_hidden(c.num_layers, xn);
  }
  const int64_t n_logits = static_cast<int64_t>(plan.logit_rows.size());
  rank.head_in.resize(static_cast<size_t>(n_logits * H));
  for (int64_t i = 0; i < n_logits; ++i) {
    RmsNorm(rank.head_in.data() + i * H, x + plan.logit_rows[i] * H, weights.final_norm(), H, eps, wo);
  }
  // Vocab-parallel head: each rank fills its own columns of the shared logits.
  const int64_t vocab = c.vocab_size;
  float* out = plan.logits + rank.shard.vocab.begin;
  MatMulBf16(*rank.pool, rank.head_in.data(), n_logits, H, rank.lm_head, out, vocab);
  if (c.final_logit_softcapping > 0) {
    // A tanh per vocabulary entry: 262,144 of them take milliseconds on one thread.
    const float cap = c.final_logit_softcapping;
    const int64_t width = rank.shard.vocab.size();
    rank.pool->ParallelFor(n_logits * width, 4096, [&](int64_t begin, int64_t end) {
      for (int64_t k = begin; k < end; ++k) {
        float& v = out[(k / width) * vocab + k % width];
        v = cap * std::tanh(v / cap);
      }
    });
  }
}

}  // namespace temper::engine::cpu
