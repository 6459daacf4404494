#include "engine/model/weights.h"

#include <cmath>
#include <map>
#include <new>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/model/bf16.h"
#include "engine/model/safetensors.h"
#include "engine/model/synthetic_tensors.h"

namespace temper::engine {
namespace {

// Every tensor of the decoder, in the order Gemma4ForCausalLM.save_pretrained names them, without
// the decoder prefix (e.g. "layers.3.mlp.up_proj.weight"). Gemma 3's set is the same less the
// layer scalars (and it has v_proj on every layer, having no k_eq_v layers).
std::vector<ExpectedTensor> ExpectedTensors(const ModelConfig& c) {
  std::vector<ExpectedTensor> out;
  const int64_t h = c.hidden_size, ffn = c.intermediate_size;
  out.push_back({"embed_tokens.weight", {c.vocab_size, h}, SyntheticInit::kEmbedding});
  for (int i = 0; i < c.num_layers; ++i) {
    const LayerGeometry& g = c.layers[i];
    const std::string p = fmt::format("layers.{}.", i);
    const int64_t q = c.QDim(i), kv = c.KvDim(i);
    out.push_back({p + "self_attn.q_proj.weight", {q, h}, SyntheticInit::kLinear});
    out.push_back({p + "self_attn.k_proj.weight", {kv, h}, SyntheticInit::kLinear});
    if (!g.k_eq_v) out.push_back({p + "self_attn.v_proj.weight", {kv, h}, SyntheticInit::kLinear});
    out.push_back({p + "self_attn.o_proj.weight", {h, q}, SyntheticInit::kLinear});
    out.push_back({p + "self_attn.q_norm.weight", {g.head_dim}, SyntheticInit::kQkNorm});
    out.push_back({p + "self_attn.k_norm.weight", {g.head_dim}, SyntheticInit::kQkNorm});
    out.push_back({p + "mlp.gate_proj.weight", {ffn, h}, SyntheticInit::kLinear});
    out.push_back({p + "mlp.up_proj.weight", {ffn, h}, SyntheticInit::kLinear});
    out.push_back({p + "mlp.down_proj.weight", {h, ffn}, SyntheticInit::kLinear});
    out.push_back({p + "input_layernorm.weight", {h}, SyntheticInit::kNorm});
    out.push_back({p + "post_attention_layernorm.weight", {h}, SyntheticInit::kPostNorm});
    out.push_back({p + "pre_feedforward_layernorm.weight", {h}, SyntheticInit::kNorm});
    out.push_back({p + "post_feedforward_layernorm.weight", {h}, SyntheticInit::kPostNorm});
    if (c.layer_scalars) out.push_back({p + "layer_scalar", {1}, SyntheticInit::kLayerScalar});
  }
  out.push_back({"norm.weight", {h}, SyntheticInit::kNorm});
  return out;
}

}  // namespace

// Turns name -> bf16 data into the typed views. Shapes were checked by the caller.
class WeightBinder {
 public:
  static void Bind(ModelWeights& w, const ModelConfig& c, const std::map<std::string, const uint16_t*>& data) {
    auto mat = [&](const std::string& name, int rows, int cols) { return Bf16Matrix{data.at(name), rows, cols, cols}; };
    auto vec = [&](const std::string& name, int n) { return std::span<const uint16_t>(data.at(name), n); };
    const int h = c.hidden_size, ffn = c.intermediate_size;
    w.embed_ = mat("embed_tokens.weight", c.vocab_size, h);
    w.lm_head_ = c.tie_word_embeddings ? w.embed_ : mat("lm_head.weight", c.vocab_size, h);
    w.final_norm_ = vec("norm.weight", h);
    for (int i = 0; i < c.num_layers; ++i) {
      const LayerGeometry& g = c.layers[i];
      const std::string p = fmt::format("layers.{}.", i);
      const int q = c.QDim(i), kv = c.KvDim(i);
      LayerWeights l;
      l.q_proj = mat(p + "self_attn.q_proj.weight", q, h);
      l.k_proj = mat(p + "self_attn.k_proj.weight", kv, h);
      if (!g.k_eq_v) l.v_proj = mat(p + "self_attn.v_proj.weight", kv, h);
      l.o_proj = mat(p + "self_attn.o_proj.weight", h, q);
      l.q_norm = vec(p + "self_attn.q_norm.weight", g.head_dim);
      l.k_norm = vec(p + "self_attn.k_norm.weight", g.head_dim);
      l.gate_proj = mat(p + "mlp.gate_proj.weight", ffn, h);
      l.up_proj = mat(p + "mlp.up_proj.weight", ffn, h);
      l.down_proj = mat(p + "mlp.down_proj.weight", h, ffn);
      l.input_norm = vec(p + "input_layernorm.weight", h);
      l.post_attention_norm = vec(p + "post_attention_layernorm.weight", h);
      l.pre_feedforward_norm = vec(p + "pre_feedforward_layernorm.weight", h);
      l.post_feedforward_norm = vec(p + "post_feedforward_layernorm.weight", h);
      // Gemma 3 layers have no scalar: the residual stream passes unscaled.
      if (c.layer_scalars) l.layer_scalar = Bf16ToFloat(*data.at(p + "layer_scalar"));
      w.layers_.push_back(l);
    }
  }
};

Result<std::unique_ptr<ModelWeights>> ModelWeights::Load(const std::filesystem::path& dir, const ModelConfig& config) {
  TEMPER_ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> checkpoint, Checkpoint::Open(dir));
  return Load(std::move(checkpoint), config);
}

Result<std::unique_ptr<ModelWeights>> ModelWeights::Load(std::unique_ptr<Checkpoint> checkpoint,
                                                         const ModelConfig& config) {
  std::unique_ptr<ModelWeights> w(new ModelWeights());
  w->checkpoint_ = std::move(checkpoint);
  const Checkpoint& ckpt = *w->checkpoint_;

  std::vector<ExpectedTensor> expected = ExpectedTensors(config);
  // The head lives outside the decoder prefix: `lm_head.weight`.
  std::map<std::string, std::string> full_names;  // short name -> name in the checkpoint
  for (const ExpectedTensor& e : expected) full_names[e.name] = config.weight_prefix + e.name;
  if (!config.tie_word_embeddings) {
    expected.push_back({"lm_head.weight", {config.vocab_size, config.hidden_size}, SyntheticInit::kEmbedding});
    full_names["lm_head.weight"] = "lm_head.weight";
  }

  std::map<std::string, const uint16_t*> data;
  for (const ExpectedTensor& e : expected) {
    const std::string& name = full_names[e.name];
    TEMPER_ASSIGN_OR_RETURN(const uint16_t* values, ckpt.Bf16Tensor(name, e.shape, config.dtype));
    data[e.name] = values;
  }

  // Anything else under the decoder's prefix (or a head we did not ask for) means the checkpoint
  // is not the model the config describes.
  std::map<std::string, bool> wanted;
  for (const auto& [short_name, name] : full_names) wanted[name] = true;
  for (const auto& [name, entry] : ckpt.tensors()) {
    const bool ours = name.starts_with(config.weight_prefix) || name == "lm_head.weight";
    if (ours && !wanted.contains(name)) {
      return Status::DataLoss(
          fmt::format("{}: unexpected tensor '{}' (not part of the {} decoder that config.json describes)",
                      entry.file->path().string(), name, config.model_type));
    }
  }
  WeightBinder::Bind(*w, config, data);
  return w;
}

namespace {

// Every tensor of `config` (the untied head included), filled with its seeded values in `storage`.
Result<std::vector<SyntheticTensor>> FillModelTensors(const ModelConfig& config, uint64_t seed,
                                                      std::vector<uint16_t>& storage) {
  std::vector<ExpectedTensor> expected = ExpectedTensors(config);
  if (!config.tie_word_embeddings)
    expected.push_back({"lm_head.weight", {config.vocab_size, config.hidden_size}, SyntheticInit::kEmbedding});
  return FillSyntheticTensors(expected, config.hidden_size, seed, storage);
}

}  // namespace

Result<std::unique_ptr<ModelWeights>> ModelWeights::Synthetic(const ModelConfig& config, uint64_t seed) {
  std::unique_ptr<ModelWeights> w(new ModelWeights());
  TEMPER_ASSIGN_OR_RETURN(std::vector<SyntheticTensor> tensors, FillModelTensors(config, seed, w->synthetic_));
  std::map<std::string, const uint16_t*> data;
  for (const SyntheticTensor& t : tensors) data[t.name] = t.values.data();
  WeightBinder::Bind(*w, config, data);
  return w;
}

Status WriteSyntheticCheckpoint(const std::filesystem::path& file, const ModelConfig& config, uint64_t seed) {
  std::vector<uint16_t> storage;
  TEMPER_ASSIGN_OR_RETURN(std::vector<SyntheticTensor> tensors, FillModelTensors(config, seed, storage));
  std::vector<TensorToWrite> out;
  for (const SyntheticTensor& t : tensors) {
    const std::string name = t.name == "lm_head.weight" ? t.name : config.weight_prefix + t.name;
    out.push_back({name, DType::kBF16, t.shape,
                   std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(t.values.data()), t.values.size_bytes())});
  }
  return WriteSafetensors(file, out, {{"format", "pt"}, {"generator", fmt::format("temper synthetic seed {}", seed)}});
}

}  // namespace temper::engine
