#include "engine/model/drafter_weights.h"

#include <set>
#include <string>

#include <fmt/format.h>

#include "engine/model/bf16.h"

namespace temper::engine {

Result<std::unique_ptr<DrafterWeights>> DrafterWeights::Load(const std::filesystem::path& dir,
                                                             const DrafterConfig& config) {
  std::unique_ptr<DrafterWeights> w(new DrafterWeights(config));
  TEMPER_ASSIGN_OR_RETURN(w->checkpoint_, Checkpoint::Open(dir));
  const Checkpoint& ckpt = *w->checkpoint_;
  const ModelConfig& c = config.text;
  const int64_t hd = c.hidden_size, hb = config.backbone_hidden_size, ffn = c.intermediate_size;

  std::set<std::string, std::less<>> wanted;
  auto tensor = [&](const std::string& name, std::vector<int64_t> shape) -> Result<const uint16_t*> {
    wanted.insert(name);
    return ckpt.Bf16Tensor(name, shape, c.dtype);
  };
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols) -> Result<Bf16Matrix> {
    TEMPER_ASSIGN_OR_RETURN(const uint16_t* data, tensor(name, {rows, cols}));
    return Bf16Matrix{data, static_cast<int>(rows), static_cast<int>(cols), cols};
  };
  auto vector = [&](const std::string& name, int64_t n) -> Result<std::span<const uint16_t>> {
    TEMPER_ASSIGN_OR_RETURN(const uint16_t* data, tensor(name, {n}));
    return std::span<const uint16_t>(data, static_cast<size_t>(n));
  };

  TEMPER_ASSIGN_OR_RETURN(w->embed_, matrix("model.embed_tokens.weight", c.vocab_size, hd));
  if (c.tie_word_embeddings) {
    w->lm_head_ = w->embed_;
  } else {
    TEMPER_ASSIGN_OR_RETURN(w->lm_head_, matrix("lm_head.weight", c.vocab_size, hd));
  }
  TEMPER_ASSIGN_OR_RETURN(w->final_norm_, vector("model.norm.weight", hd));
  TEMPER_ASSIGN_OR_RETURN(w->pre_projection_, matrix("pre_projection.weight", hd, 2 * hb));
  TEMPER_ASSIGN_OR_RETURN(w->post_projection_, matrix("post_projection.weight", hb, hd));
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = fmt::format("model.layers.{}.", i);
    const int64_t q = c.QDim(i);
    DrafterLayerWeights l;
    TEMPER_ASSIGN_OR_RETURN(l.q_proj, matrix(p + "self_attn.q_proj.weight", q, hd));
    TEMPER_ASSIGN_OR_RETURN(l.o_proj, matrix(p + "self_attn.o_proj.weight", hd, q));
    TEMPER_ASSIGN_OR_RETURN(l.q_norm, vector(p + "self_attn.q_norm.weight", c.layers[i].head_dim));
    TEMPER_ASSIGN_OR_RETURN(l.gate_proj, matrix(p + "mlp.gate_proj.weight", ffn, hd));
    TEMPER_ASSIGN_OR_RETURN(l.up_proj, matrix(p + "mlp.up_proj.weight", ffn, hd));
    TEMPER_ASSIGN_OR_RETURN(l.down_proj, matrix(p + "mlp.down_proj.weight", hd, ffn));
    TEMPER_ASSIGN_OR_RETURN(l.input_norm, vector(p + "input_layernorm.weight", hd));
    TEMPER_ASSIGN_OR_RETURN(l.post_attention_norm, vector(p + "post_attention_layernorm.weight", hd));
    TEMPER_ASSIGN_OR_RETURN(l.pre_feedforward_norm, vector(p + "pre_feedforward_layernorm.weight", hd));
    TEMPER_ASSIGN_OR_RETURN(l.post_feedforward_norm, vector(p + "post_feedforward_layernorm.weight", hd));
    TEMPER_ASSIGN_OR_RETURN(std::span<const uint16_t> scalar, vector(p + "layer_scalar", 1));
    l.layer_scalar = Bf16ToFloat(scalar[0]);
    w->layers_.push_back(l);
  }
  // A drafter checkpoint holds nothing else: any other tensor (k/v projections, a centroid head)
  // means it is not the drafter config.json describes.
  for (const auto& [name, entry] : ckpt.tensors()) {
    if (!wanted.contains(name)) {
      return Status::DataLoss(fmt::format("{}: unexpected tensor '{}' (not part of the drafter config.json describes)",
                                          entry.file->path().string(), name));
    }
  }
  return w;
}

}  // namespace temper::engine
