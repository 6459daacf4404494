#include "engine/model/drafter_weights.h"

#include <map>
#include <set>
#include <string>

#include <fmt/format.h>

#include "engine/model/bf16.h"
#include "engine/model/synthetic_tensors.h"

namespace temper::engine {
namespace {

// Every tensor of the drafter, by its name in the checkpoint.
std::vector<ExpectedTensor> ExpectedDrafterTensors(const DrafterConfig& config) {
  const ModelConfig& c = config.text;
  const int64_t hd = c.hidden_size, hb = config.backbone_hidden_size, ffn = c.intermediate_size;
  std::vector<ExpectedTensor> out;
  out.push_back({"model.embed_tokens.weight", {c.vocab_size, hd}, SyntheticInit::kEmbedding});
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = fmt::format("model.layers.{}.", i);
    const int64_t q = c.QDim(i);
    out.push_back({p + "self_attn.q_proj.weight", {q, hd}, SyntheticInit::kLinear});
    out.push_back({p + "self_attn.o_proj.weight", {hd, q}, SyntheticInit::kLinear});
    out.push_back({p + "self_attn.q_norm.weight", {c.layers[i].head_dim}, SyntheticInit::kQkNorm});
    out.push_back({p + "mlp.gate_proj.weight", {ffn, hd}, SyntheticInit::kLinear});
    out.push_back({p + "mlp.up_proj.weight", {ffn, hd}, SyntheticInit::kLinear});
    out.push_back({p + "mlp.down_proj.weight", {hd, ffn}, SyntheticInit::kLinear});
    out.push_back({p + "input_layernorm.weight", {hd}, SyntheticInit::kNorm});
    out.push_back({p + "post_attention_layernorm.weight", {hd}, SyntheticInit::kPostNorm});
    out.push_back({p + "pre_feedforward_layernorm.weight", {hd}, SyntheticInit::kNorm});
    out.push_back({p + "post_feedforward_layernorm.weight", {hd}, SyntheticInit::kPostNorm});
    out.push_back({p + "layer_scalar", {1}, SyntheticInit::kLayerScalar});
  }
  out.push_back({"model.norm.weight", {hd}, SyntheticInit::kNorm});
  out.push_back({"pre_projection.weight", {hd, 2 * hb}, SyntheticInit::kLinear});
  out.push_back({"post_projection.weight", {hb, hd}, SyntheticInit::kLinear});
  if (!c.tie_word_embeddings) out.push_back({"lm_head.weight", {c.vocab_size, hd}, SyntheticInit::kEmbedding});
  return out;
}

}  // namespace

// Turns name -> bf16 data into the typed views. Shapes were checked by the caller.
void DrafterWeights::Bind(const std::map<std::string, const uint16_t*, std::less<>>& data) {
  const ModelConfig& c = config_.text;
  const int hd = c.hidden_size, hb = config_.backbone_hidden_size, ffn = c.intermediate_size;
  auto mat = [&](const std::string& name, int rows, int cols) { return Bf16Matrix{data.at(name), rows, cols, cols}; };
  auto vec = [&](const std::string& name, int n) { return std::span<const uint16_t>(data.at(name), n); };
  embed_ = mat("model.embed_tokens.weight", c.vocab_size, hd);
  lm_head_ = c.tie_word_embeddings ? embed_ : mat("lm_head.weight", c.vocab_size, hd);
  final_norm_ = vec("model.norm.weight", hd);
  pre_projection_ = mat("pre_projection.weight", hd, 2 * hb);
  post_projection_ = mat("post_projection.weight", hb, hd);
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = fmt::format("model.layers.{}.", i);
    const int q = c.QDim(i);
    DrafterLayerWeights l;
    l.q_proj = mat(p + "self_attn.q_proj.weight", q, hd);
    l.o_proj = mat(p + "self_attn.o_proj.weight", hd, q);
    l.q_norm = vec(p + "self_attn.q_norm.weight", c.layers[i].head_dim);
    l.gate_proj = mat(p + "mlp.gate_proj.weight", ffn, hd);
    l.up_proj = mat(p + "mlp.up_proj.weight", ffn, hd);
    l.down_proj = mat(p + "mlp.down_proj.weight", hd, ffn);
    l.input_norm = vec(p + "input_layernorm.weight", hd);
    l.post_attention_norm = vec(p + "post_attention_layernorm.weight", hd);
    l.pre_feedforward_norm = vec(p + "pre_feedforward_layernorm.weight", hd);
    l.post_feedforward_norm = vec(p + "post_feedforward_layernorm.weight", hd);
    l.layer_scalar = Bf16ToFloat(*data.at(p + "layer_scalar"));
    layers_.push_back(l);
  }
}

Result<std::unique_ptr<DrafterWeights>> DrafterWeights::Load(const std::filesystem::path& dir,
                                                             const DrafterConfig& config) {
  std::unique_ptr<DrafterWeights> w(new DrafterWeights(config));
  TEMPER_ASSIGN_OR_RETURN(w->checkpoint_, Checkpoint::Open(dir));
  const Checkpoint& ckpt = *w->checkpoint_;
  std::map<std::string, const uint16_t*, std::less<>> data;
  for (const ExpectedTensor& e : ExpectedDrafterTensors(config)) {
    TEMPER_ASSIGN_OR_RETURN(data[e.name], ckpt.Bf16Tensor(e.name, e.shape, config.text.dtype));
  }
  // A drafter checkpoint holds nothing else: any other tensor (k/v projections, a centroid head)
  // means it is not the drafter config.json describes.
  for (const auto& [name, entry] : ckpt.tensors()) {
    if (!data.contains(name)) {
      return Status::DataLoss(fmt::format("{}: unexpected tensor '{}' (not part of the drafter config.json describes)",
                                          entry.file->path().string(), name));
    }
  }
  w->Bind(data);
  return w;
}

int64_t DrafterWeights::ParameterCount(const DrafterConfig& config) {
  int64_t n = 0;
  for (const ExpectedTensor& e : ExpectedDrafterTensors(config)) {
    int64_t elements = 1;
    for (int64_t d : e.shape) elements *= d;
    n += elements;
  }
  return n;
}

Result<std::unique_ptr<DrafterWeights>> DrafterWeights::Synthetic(const DrafterConfig& config, uint64_t seed) {
  std::unique_ptr<DrafterWeights> w(new DrafterWeights(config));
  TEMPER_ASSIGN_OR_RETURN(
      std::vector<SyntheticTensor> tensors,
      FillSyntheticTensors(ExpectedDrafterTensors(config), config.text.hidden_size, seed, w->synthetic_));
  std::map<std::string, const uint16_t*, std::less<>> data;
  for (const SyntheticTensor& t : tensors) data[t.name] = t.values.data();
  w->Bind(data);
  return w;
}

}  // namespace temper::engine
