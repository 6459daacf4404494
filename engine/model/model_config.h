// ModelConfig: the geometry of a Gemma 4 or Gemma 3 text decoder, read from a Hugging Face
// `config.json`.
//
// Four layouts are accepted: text-only `gemma4_text` and `gemma3_text` (weights under `model.`),
// multimodal `gemma4`, whose decoder config sits under `text_config` and whose decoder weights sit
// under `model.language_model.`, and multimodal `gemma3`, whose decoder weights transformers 5.23
// saves under `language_model.model.` (the vision and audio towers are not loaded). Keys a
// checkpoint leaves out take transformers' defaults (`Gemma4TextConfig`, transformers 5.5;
// `Gemma3TextConfig`, 5.23), because `save_pretrained` writes only the keys that differ from them.
// Gemma 3 differs from Gemma 4 in a few numerics, each a field below (norm_weight_offset,
// attention_scale, value_norm, layer_scalars, rope_linear_factor), so that one forward pass serves
// both. Features this engine does not implement (per-layer
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
  // Linear RoPE scaling (`rope_type: linear`, Gemma 3's full layers on the 4B and larger): every
  // inv_freq is divided by this factor, which stretches positions by it. 1: no scaling.
  double rope_linear_factor = 1;
};

struct ModelConfig {
  std::string model_type;     // "gemma4_text", "gemma4", "gemma3_text" or "gemma3"
  std::string weight_prefix;  // "model.", "model.language_model." or "language_model.model."
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

  // What Gemma 3 computes differently from Gemma 4:
  // Gemma 3's RMSNorm (Gemma3RMSNorm) multiplies by 1 + w, its checkpoints storing the offset from
  // one; Gemma 4's multiplies by w. Every weighted norm (layer, q/k, final) is
  // x · rms · (norm_weight_offset + w).
  float norm_weight_offset = 0;
  // The factor on q·k before the softmax: Gemma 4's q/k norms stand in for 1/sqrt(head_dim), so
  // 1.0; Gemma 3 scales by query_pre_attn_scalar^-0.5 (1/16 on the 270M).
  float attention_scale = 1;
  // Gemma 4 RMS-normalizes each value head without a weight (v_norm); Gemma 3 uses V as projected.
  bool value_norm = true;
  // Gemma 4 layers end by multiplying the residual stream by a learned `layer_scalar`; Gemma 3
  // layers have no such tensor.
  bool layer_scalars = true;

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
