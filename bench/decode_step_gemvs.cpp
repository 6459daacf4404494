#include "bench/decode_step_gemvs.h"

namespace temper::bench {

using engine::LayerKind;

std::vector<LayerKindSpan> LayerKinds(const engine::ModelConfig& c) {
  std::vector<LayerKindSpan> kinds;
  for (LayerKind kind : {LayerKind::kSliding, LayerKind::kFull}) {
    LayerKindSpan span{kind, -1, 0};
    for (int l = 0; l < c.num_layers; ++l) {
      if (c.layers[l].kind != kind) continue;
      if (span.first < 0) span.first = l;
      ++span.count;
    }
    if (span.count > 0) kinds.push_back(span);
  }
  return kinds;
}

std::vector<StepGemv> DecodeStepGemvs(const engine::ModelConfig& c, const engine::RankShard& shard) {
  const int H = c.hidden_size;
  std::vector<StepGemv> gemvs;
  for (const LayerKindSpan& span : LayerKinds(c)) {
    const engine::LayerGeometry& g = c.layers[span.first];
    const engine::LayerShard& ls = shard.layers[span.first];
    const int q = ls.q_heads.size() * g.head_dim, kv = ls.kv_heads.size() * g.head_dim;
    const std::string name = span.kind == LayerKind::kSliding ? "sliding" : "full";
    if (g.k_eq_v) {
      gemvs.push_back({"q_proj/k_proj " + name, span.count, {q, kv}, H});
    } else {
      gemvs.push_back({"q_proj/k_proj/v_proj " + name, span.count, {q, kv, kv}, H});
    }
    gemvs.push_back({"o_proj " + name, span.count, {H}, q});
  }
  gemvs.push_back({"gate_proj/up_proj", c.num_layers, {shard.ffn.size()}, H, /*geglu=*/true});
  gemvs.push_back({"down_proj", c.num_layers, {H}, shard.ffn.size()});
  gemvs.push_back({"LM head (tied embedding)", 1, {shard.vocab.size()}, H});
  return gemvs;
}

}  // namespace temper::bench
