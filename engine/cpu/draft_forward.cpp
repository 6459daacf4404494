// Gemma 4's MTP drafter on the CPU, for one tensor-parallel rank: greedy draft steps read top to
// bottom. Each step, for every row (one sequence at position L = its length):
//   x = pre_projection · [target_embed(token) · embed_scale, h]
//   4 layers: attention of a query at L over the target's stored K/V of the target's last layer of
//   the same kind, positions below L (sliding: the last window + 1 of them, as transformers'
//   Gemma4AssistantForCausalLM reads them: the target's full-length states under a bidirectional
//   window, distance <= window, flipped to face the past), then the target decoder's sandwich
//   norms, MLP and layer_scalar
//   n = final_norm(x);  token = argmax(lm_head · n);  h = post_projection · n
// and the next step feeds that token and h at the same position L over the same keys (all three
// public implementations keep the position fixed; advancing it loses acceptance silently).
// shared/notes/mtp.md lists the sources; tests/data/gemma4-tiny-assistant holds an independent
// reference that the drafter test compares with.
#include <algorithm>
#include <cstring>

#include "engine/cpu/layer_math.h"
#include "engine/cpu/matmul.h"
#include "engine/cpu/rank.h"

namespace temper::engine::cpu {
namespace {

// Attention of each row's local drafter query heads over the target layer's cached keys.
void DraftAttention(RankContext& rank, const DraftPlan& plan, const RankDrafterLayer& dl, const float* q, float* out) {
  const ModelConfig& c = *rank.config;
  const int t = dl.target_layer;
  const LayerGeometry& g = c.layers[t];
  const RankLayer& target = rank.layers[t];
  const int hd = g.head_dim;
  const int q_width = dl.q_heads * hd;
  const int group = rank.drafter->weights->config().text.num_heads / g.num_kv_heads;
  const int64_t rows = static_cast<int64_t>(plan.rows.size());

  rank.pool->ParallelFor(rows * dl.q_heads, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scores, rebuilt(hd);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t r = task / dl.q_heads;
      const int h = static_cast<int>(task % dl.q_heads);
      const DraftRow& row = plan.rows[r];
      const std::span<const int32_t> blocks = plan.blocks[row.seq];
      const int kvh = (dl.q_head_begin + h) / group - target.kv_head_begin;
      const float* qh = q + r * q_width + h * hd;
      // The query is not in the cache: on sliding layers it sees the last window + 1 positions below L.
      const int64_t lo = g.kind == LayerKind::kSliding ? std::max<int64_t>(0, row.pos - c.sliding_window - 1) : 0;
      scores.resize(static_cast<size_t>(row.pos - lo));
      for (int64_t pos = lo; pos < row.pos; ++pos) {
        scores[pos - lo] = Dot(qh, CachedKey(rank, row.seq, t, pos, blocks, kvh, rebuilt.data()), hd);
      }
      auto value = [&](int64_t pos) { return rank.kv->V(row.seq, t, pos, blocks) + kvh * hd; };
      SoftmaxCombine(scores, lo, value, hd, out + r * q_width + h * hd);
    }
  });
}

}  // namespace

void DraftRank(RankContext& rank, const DraftPlan& plan, Communicator& comm) {
  RankDrafter& d = *rank.drafter;
  const DrafterWeights& w = *d.weights;
  const ModelConfig& dc = w.config().text;
  const ModelConfig& c = *rank.config;
  const int hb = c.hidden_size, hd = dc.hidden_size;
  const int64_t rows = static_cast<int64_t>(plan.rows.size());
  const int64_t vocab = dc.vocab_size;
  const float eps = dc.rms_norm_eps;
  const int ffn = d.ffn.size();
  auto resize = [&](std::vector<float>& buf, int64_t width) { buf.resize(static_cast<size_t>(rows * width)); };
  resize(d.in, 2 * hb);  // [embedding, hidden], the concat order of all three implementations
  resize(d.x, hd);
  resize(d.xn, hd);
  resize(d.proj, hd);
  resize(d.gate, ffn);
  resize(d.up, ffn);
  resize(d.hidden, hb);
  float* in = d.in.data();
  float* x = d.x.data();
  float* xn = d.xn.data();
  float* proj = d.proj.data();

  // Step 0 starts from the target's final-norm output (its head input) at the row before L.
  for (int64_t r = 0; r < rows; ++r) {
    const float* h = rank.head_in.data() + plan.rows[r].hidden_row * hb;
    std::copy(h, h + hb, d.hidden.data() + r * hb);
  }
  std::vector<int32_t> tokens(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) tokens[r] = plan.rows[r].token;

  for (int step = 0; step < plan.steps; ++step) {
    // The TARGET's scaled embedding, vocab-parallel as in ForwardRank (the hidden half is zero
    // until the all-reduce has assembled the rows), then the hidden state beside it.
    for (int64_t r = 0; r < rows; ++r) {
      float* e = in + r * 2 * hb;
      std::fill(e, e + 2 * hb, 0.0f);
      if (tokens[r] >= rank.shard.vocab.begin && tokens[r] < rank.shard.vocab.end) {
        const uint16_t* row = rank.embed.Row(tokens[r] - rank.shard.vocab.begin);
        for (int i = 0; i < hb; ++i) e[i] = Bf16ToFloat(row[i]) * c.embed_scale;
      }
    }
    comm.AllReduceSum(rank.shard.rank, in, rows * 2 * hb);
    for (int64_t r = 0; r < rows; ++r) std::copy_n(d.hidden.data() + r * hb, hb, in + r * 2 * hb + hb);
    // Replicated on every rank: it is 2·Hb·Hd weights, a sliver of one target layer.
    MatMulBf16(*rank.pool, in, rows, 2 * hb, w.pre_projection(), x, hd);

    for (size_t l = 0; l < d.layers.size(); ++l) {
      const RankDrafterLayer& dl = d.layers[l];
      const DrafterLayerWeights& lw = w.layer(static_cast<int>(l));
      const int head_dim = dc.layers[l].head_dim;
      const int q_width = dl.q_heads * head_dim;
      resize(d.q, q_width);
      resize(d.att, q_width);
      float* q = d.q.data();

      for (int64_t r = 0; r < rows; ++r)
        RmsNorm(xn + r * hd, x + r * hd, lw.input_norm, hd, eps, dc.norm_weight_offset);
      MatMulBf16(*rank.pool, xn, rows, hd, dl.q_proj, q, q_width);
      for (int64_t r = 0; r < rows; ++r) {
        for (int h = 0; h < dl.q_heads; ++h) {
          float* qh = q + r * q_width + h * head_dim;
          RmsNorm(qh, qh, lw.q_norm, head_dim, eps, dc.norm_weight_offset);
          Rope(qh, *dl.rope, plan.rows[r].pos);
        }
      }
      DraftAttention(rank, plan, dl, q, d.att.data());
      MatMulBf16(*rank.pool, d.att.data(), rows, q_width, dl.o_proj, proj, hd);
      comm.AllReduceSum(rank.shard.rank, proj, rows * hd);
      for (int64_t r = 0; r < rows; ++r) {
        float* pr = proj + r * hd;
        RmsNorm(pr, pr, lw.post_attention_norm, hd, eps, dc.norm_weight_offset);
        for (int i = 0; i < hd; ++i) x[r * hd + i] += pr[i];
      }

      for (int64_t r = 0; r < rows; ++r)
        RmsNorm(xn + r * hd, x + r * hd, lw.pre_feedforward_norm, hd, eps, dc.norm_weight_offset);
      MatMulBf16(*rank.pool, xn, rows, hd, dl.gate_proj, d.gate.data(), ffn);
      MatMulBf16(*rank.pool, xn, rows, hd, dl.up_proj, d.up.data(), ffn);
      for (int64_t i = 0; i < rows * ffn; ++i) d.gate[i] = GeluTanh(d.gate[i]) * d.up[i];
      MatMulBf16(*rank.pool, d.gate.data(), rows, ffn, dl.down_proj, proj, hd);
      comm.AllReduceSum(rank.shard.rank, proj, rows * hd);
      for (int64_t r = 0; r < rows; ++r) {
        float* pr = proj + r * hd;
        RmsNorm(pr, pr, lw.post_feedforward_norm, hd, eps, dc.norm_weight_offset);
        for (int i = 0; i < hd; ++i) x[r * hd + i] = (x[r * hd + i] + pr[i]) * lw.layer_scalar;
      }
    }

    // Head: tied to the drafter's own embedding, no softcap; each rank fills its vocabulary range.
    for (int64_t r = 0; r < rows; ++r) RmsNorm(xn + r * hd, x + r * hd, w.final_norm(), hd, eps, dc.norm_weight_offset);
    MatMulBf16(*rank.pool, xn, rows, hd, d.lm_head, plan.logits + rank.shard.vocab.begin, vocab);
    comm.Barrier();  // every rank's columns are in
    // Every rank takes the same argmax (the lowest id among equal maxima), so all feed one token.
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = plan.logits + r * vocab;
      tokens[r] = static_cast<int32_t>(std::max_element(row, row + vocab) - row);
    }
    if (rank.shard.rank == 0) {
      for (int64_t r = 0; r < rows; ++r) {
        plan.tokens[r * plan.steps + step] = tokens[r];
        if (plan.step_logits) {
          std::copy_n(plan.logits + r * vocab, vocab, plan.step_logits + (r * plan.steps + step) * vocab);
        }
      }
    }
    // The next step's head overwrites the logits: every rank must have read them first.
    comm.Barrier();
    MatMulBf16(*rank.pool, xn, rows, hd, w.post_projection(), d.hidden.data(), hb);
  }
}

}  // namespace temper::engine::cpu
