// ModelConfig: the Gemma 4 text decoder's geometry, read from a Hugging Face `config.json`.
//
// Two layouts are accepted: text-only `gemma4_text` (weights under `model.`) and multimodal `gemma4`,
// whose decoder config sits under `text_config` and whose decoder weights sit under
// `model.language_model.` (the vision and audio towers are not loaded). Keys a checkpoint leaves out
// take transformers' defaults (`Gemma4TextConfig`, transformers 5.5), because `save_pretrained`
// writes only the keys that differ from them. Features this engine does not implement (per-layer
// input embeddings, MoE, KV-shared layers, double-wide MLP, bidirectional attention) are refused
// with an error naming the key, so a checkpoint never runs with silently wrong numerics.
//
// Thread safety: a ModelConfig is a plain value.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace temper::engine {

enum class LayerKind { kSliding, kFull };

// One decoder layer's attention geometry. Full layers differ from sliding ones in head_dim
// (`global_head_dim`), KV heads (`num_global_key_value_heads`, only when `attention_k_eq_v`),
// K/V sharing, and RoPE.
struct LayerGeometry {
  LayerKind kind = LayerKind::kSliding;
  int head_dim = 0;
  int num_kv_heads = 0;
  // No v_proj: V = v_norm(raw k_proj output) and K = RoPE(k_norm(raw)). Full layers only.
  bool k_eq_v = false;
  // RoPE: inv_freq[j] = rope_theta^(-2j/head_dim) for j < rope_angles, 0 (no rotation) above.
  // Dim j pairs with dim j + head_dim/2 (rotate_half). "default" RoPE has rope_angles =
  // head_dim/2; "proportional" has int(partial_rotary_factor * head_dim // 2).
  double rope_theta = 0;
  int rope_angles = 0;
};

struct ModelConfig {
  std::string model_type;     // "gemma4_text" or "gemma4"
  std::string weight_prefix;  // "model." or "model.language_model."
  std::string dtype;          // `dtype` or `torch_dtype`, e.g. "bfloat16"

  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_layers = 0;
  int num_heads = 0;            // query heads, the same on every layer
  int num_kv_heads = 0;         // sliding layers
  int head_dim = 0;             // sliding layers
  int global_head_dim = 0;      // full layers
  int num_global_kv_heads = 0;  // full layers when attention_k_eq_v, else num_kv_heads
  bool attention_k_eq_v = false;
  int sliding_window = 0;  // key kv is visible to query q iff kv <= q and q - kv < sliding_window
  int max_position_embeddings = 0;
  float rms_norm_eps = 0;
  float final_logit_softcapping = 0;  // 0: none
  bool tie_word_embeddings = true;
  // bf16(sqrt(hidden_size)) for bf16 checkpoints: HF computes `embed_scale.to(weight.dtype)`.
  float embed_scale = 0;

  int bos_token_id = -1;
  int pad_token_id = -1;
  std::vector<int> eos_token_ids;

  std::vector<LayerGeometry> layers;  // num_layers entries

  // Parameters of the text decoder, counting a tied embedding once.
  int64_t ParameterCount() const;
  // q_proj output width of layer `layer` (num_heads * head_dim).
  int QDim(int layer) const { return num_heads * layers[layer].head_dim; }
  int KvDim(int layer) const { return layers[layer].num_kv_heads * layers[layer].head_dim; }
};

// Parses the text of a config.json; `source` names it in errors ("DIR/config.json: key ...").
// Errors: InvalidArgument for malformed JSON or a bad value (naming the key), Unimplemented for a
// feature this engine refuses (naming the key).
Result<ModelConfig> ParseModelConfig(std::string_view json_text, std::string_view source);

// The text of a config.json file. IOError (with errno's text) if it cannot be read.
Result<std::string> ReadModelConfigText(const std::filesystem::path& path);

// Reads and parses a config.json file. IOError if it cannot be read.
Result<ModelConfig> LoadModelConfig(const std::filesystem::path& path);

}  // namespace temper::engine
