#include "engine/model/model_config.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <optional>
#include <sstream>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/model/bf16.h"
#include "engine/model/config_json.h"

namespace temper::engine {
namespace {

using nlohmann::json;

// The keys both Gemma generations read alike: max_position_embeddings, rms_norm_eps,
// final_logit_softcapping and tie_word_embeddings, with transformers' defaults.
Status ParseSharedDecoderKeys(const KeyReader& r, ModelConfig& c) {
  TEMPER_ASSIGN_OR_RETURN(c.max_position_embeddings, r.Size("max_position_embeddings", 131072));
  TEMPER_ASSIGN_OR_RETURN(double eps, r.Number("rms_norm_eps", 1e-6));
  if (!(eps > 0 && eps < 1)) return r.Error("rms_norm_eps", fmt::format("must be in (0, 1), got {}", eps));
  c.rms_norm_eps = static_cast<float>(eps);
  TEMPER_ASSIGN_OR_RETURN(double softcap, r.Number("final_logit_softcapping", 0.0));
  if (!(softcap >= 0) || !std::isfinite(softcap)) {
    return r.Error("final_logit_softcapping", fmt::format("must be >= 0 or null, got {}", softcap));
  }
  c.final_logit_softcapping = static_cast<float>(softcap);
  TEMPER_ASSIGN_OR_RETURN(c.tie_word_embeddings, r.Bool("tie_word_embeddings", true));
  return Status::OK();
}

// `eos_token_id`: one id or a list, each a token below vocab_size; transformers' default (1) when
// the key is absent, none when it is null.
Result<std::vector<int>> ParseEosTokenIds(const KeyReader& r, const json& obj, int vocab_size) {
  std::vector<int> ids;
  if (const json* eos = r.Find("eos_token_id")) {
    for (const json& v : eos->is_array() ? *eos : json::array({*eos})) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= vocab_size) {
        return r.Error("eos_token_id", fmt::format("has {}, not a token id below vocab_size", v.dump()));
      }
      ids.push_back(v.get<int>());
    }
  } else if (!obj.contains("eos_token_id")) {
    ids.push_back(1);
  }
  return ids;
}

// Each layer's kind from `layer_types`, or, without it, every `pattern`-th layer full.
Result<std::vector<LayerKind>> ParseLayerKinds(const KeyReader& r, int num_layers, int pattern) {
  std::vector<LayerKind> kinds(num_layers);
  const json* types = r.Find("layer_types");
  if (types == nullptr) {
    for (int i = 0; i < num_layers; ++i) kinds[i] = (i + 1) % pattern == 0 ? LayerKind::kFull : LayerKind::kSliding;
    return kinds;
  }
  if (!types->is_array()) return r.Error("layer_types", "must be an array of strings");
  if (static_cast<int>(types->size()) != num_layers) {
    return r.Error("layer_types", fmt::format("has {} entries but num_hidden_layers is {}", types->size(), num_layers));
  }
  for (int i = 0; i < num_layers; ++i) {
    const json& t = (*types)[i];
    if (t == "sliding_attention") {
      kinds[i] = LayerKind::kSliding;
    } else if (t == "full_attention") {
      kinds[i] = LayerKind::kFull;
    } else {
      return r.Error(fmt::format("layer_types[{}]", i),
                     fmt::format("is {}, not 'sliding_attention' or 'full_attention'", t.dump()));
    }
  }
  return kinds;
}

Result<LayerGeometry> ParseRope(const KeyReader& r, const json& rope_parameters, std::string_view kind, int head_dim) {
  const std::string key = fmt::format("rope_parameters.{}", kind);
  auto it = rope_parameters.find(kind);
  if (it == rope_parameters.end() || !it->is_object()) return r.Error(key, "is missing or not an object");
  KeyReader rr(*it, r.source(), r.prefix() + key + ".");
  TEMPER_ASSIGN_OR_RETURN(std::string type, rr.String("rope_type", "default"));
  TEMPER_ASSIGN_OR_RETURN(double theta, rr.Number("rope_theta", 10000.0));
  TEMPER_ASSIGN_OR_RETURN(double factor, rr.Number("partial_rotary_factor", 1.0));
  if (!(theta > 1.0) || !std::isfinite(theta)) return rr.Error("rope_theta", fmt::format("must be > 1, got {}", theta));
  if (!(factor > 0.0 && factor <= 1.0)) {
    return rr.Error("partial_rotary_factor", fmt::format("must be in (0, 1], got {}", factor));
  }
  LayerGeometry g;
  g.rope_theta = theta;
  if (type == "default") {
    // HF's default RoPE with a partial factor rotates a narrower slice with its own layout;
    // Gemma 4 never uses that combination.
    if (factor != 1.0) return rr.Refuse("partial_rotary_factor", "with rope_type 'default' is not supported");
    g.rope_angles = head_dim / 2;
  } else if (type == "proportional") {
    // transformers' _compute_proportional_rope_parameters: int(factor * head_dim // 2) angles,
    // exponent over the full head_dim, the rest of the frequencies zero.
    g.rope_angles = static_cast<int>(std::floor(factor * head_dim / 2.0));
  } else {
    return rr.Refuse("rope_type", fmt::format("'{}' is not supported (only 'default' and 'proportional')", type));
  }
  return g;
}

// transformers 5.23 writes the full layers' geometry as `per_layer_config`, a map from layer index
// to overrides of head_dim and num_key_value_heads, instead of global_head_dim and
// num_global_key_value_heads (which released checkpoints use). The engine has one geometry per
// layer kind, so every entry must name a full layer, every full layer must have one, and all must
// agree; a global key that is also given must say the same.
Status ApplyPerLayerConfig(const KeyReader& r, const std::vector<LayerKind>& kinds, ModelConfig& c) {
  const json* per_layer = r.Find("per_layer_config");
  if (per_layer == nullptr) return Status::OK();
  if (!per_layer->is_object()) return r.Error("per_layer_config", "must be an object of layer index to overrides");
  std::optional<std::pair<int, int>> geometry;  // head_dim, num_key_value_heads
  size_t full_layers = 0;
  for (LayerKind k : kinds) full_layers += k == LayerKind::kFull;
  for (const auto& [index_text, overrides] : per_layer->items()) {
    const std::string key = "per_layer_config." + index_text;
    int index = -1;
    auto [end, ec] = std::from_chars(index_text.data(), index_text.data() + index_text.size(), index);
    if (ec != std::errc() || end != index_text.data() + index_text.size() || index < 0 || index >= c.num_layers) {
      return r.Error(key, fmt::format("is not a layer index below num_hidden_layers ({})", c.num_layers));
    }
    if (!overrides.is_object()) return r.Error(key, "must be an object");
    if (kinds[index] != LayerKind::kFull) {
      return r.Refuse(key, "overrides a sliding layer: per-layer geometry is supported on full layers only");
    }
    KeyReader lr(overrides, r.source(), r.prefix() + key + ".");
    for (const auto& [name, value] : overrides.items()) {
      if (name != "head_dim" && name != "num_key_value_heads") {
        return lr.Refuse(name, "is not supported (per-layer overrides of head_dim and num_key_value_heads only)");
      }
    }
    TEMPER_ASSIGN_OR_RETURN(int head_dim, lr.Size("head_dim", c.head_dim));
    TEMPER_ASSIGN_OR_RETURN(int kv_heads, lr.Size("num_key_value_heads", c.num_kv_heads));
    if (geometry && *geometry != std::pair{head_dim, kv_heads}) {
      return r.Refuse(key, "differs from another full layer's: full layers of different geometry are not supported");
    }
    geometry = std::pair{head_dim, kv_heads};
  }
  if (!geometry) return Status::OK();
  if (static_cast<size_t>(per_layer->size()) != full_layers) {
    return r.Refuse("per_layer_config",
                    fmt::format("covers {} of the {} full layers: full layers of different geometry are not supported",
                                per_layer->size(), full_layers));
  }
  if (r.Has("global_head_dim") && c.global_head_dim != geometry->first) {
    return r.Error("global_head_dim", fmt::format("is {} but per_layer_config gives the full layers head_dim {}",
                                                  c.global_head_dim, geometry->first));
  }
  if (r.Has("num_global_key_value_heads") && c.attention_k_eq_v && c.num_global_kv_heads != geometry->second) {
    return r.Error("num_global_key_value_heads",
                   fmt::format("is {} but per_layer_config gives the full layers num_key_value_heads {}",
                               c.num_global_kv_heads, geometry->second));
  }
  c.global_head_dim = geometry->first;
  c.num_global_kv_heads = geometry->second;
  return Status::OK();
}

// One layer kind's RoPE of a Gemma3TextConfig: `rope_type` (or the older `type`) 'default' or
// 'linear' (with `factor`), and its `rope_theta`.
Result<LayerGeometry> ParseGemma3Rope(const KeyReader& r, const json& params, std::string_view key, int head_dim) {
  if (!params.is_object()) return r.Error(key, "must be an object");
  KeyReader rr(params, r.source(), r.prefix() + std::string(key) + ".");
  TEMPER_ASSIGN_OR_RETURN(std::string legacy_type, rr.String("type", "default"));
  TEMPER_ASSIGN_OR_RETURN(std::string type, rr.String("rope_type", legacy_type));
  TEMPER_ASSIGN_OR_RETURN(double theta, rr.Number("rope_theta", 0.0));
  if (!(theta > 1.0) || !std::isfinite(theta)) return rr.Error("rope_theta", fmt::format("must be > 1, got {}", theta));
  TEMPER_ASSIGN_OR_RETURN(double partial, rr.Number("partial_rotary_factor", 1.0));
  if (partial != 1.0) return rr.Refuse("partial_rotary_factor", fmt::format("is {}: only 1 is supported", partial));
  LayerGeometry g;
  g.rope_theta = theta;
  g.rope_angles = head_dim / 2;
  if (type == "linear") {
    if (!rr.Has("factor")) return rr.Error("factor", "is missing (rope_type 'linear' needs it)");
    TEMPER_ASSIGN_OR_RETURN(g.rope_linear_factor, rr.Number("factor", 1.0));
    if (!(g.rope_linear_factor >= 1.0) || !std::isfinite(g.rope_linear_factor)) {
      return rr.Error("factor", fmt::format("must be >= 1, got {}", g.rope_linear_factor));
    }
  } else if (type != "default") {
    return rr.Refuse("rope_type", fmt::format("'{}' is not supported (only 'default' and 'linear')", type));
  }
  return g;
}

// Gemma3TextConfig (transformers 5.23). What Gemma 3 computes differently from Gemma 4 is set here
// (norm_weight_offset, attention_scale, value_norm, layer_scalars); the geometry is the same for
// both layer kinds, which differ only in window and RoPE.
Result<ModelConfig> ParseGemma3TextConfig(const KeyReader& r, const json& obj) {
  ModelConfig c;
  // Refuse what we do not implement before anything else, so the error names the real reason.
  if (r.Has("attn_logit_softcapping")) {
    return r.Refuse("attn_logit_softcapping", "is set: the attention-logit softcap is not supported");
  }
  TEMPER_ASSIGN_OR_RETURN(bool bidirectional, r.Bool("use_bidirectional_attention", false));
  if (bidirectional)
    return r.Refuse("use_bidirectional_attention", "is true: bidirectional attention is not supported");
  TEMPER_ASSIGN_OR_RETURN(bool bias, r.Bool("attention_bias", false));
  if (bias) return r.Refuse("attention_bias", "is true: attention projections with biases are not supported");
  TEMPER_ASSIGN_OR_RETURN(std::string act, r.String("hidden_activation", "gelu_pytorch_tanh"));
  if (act != "gelu_pytorch_tanh") {
    return r.Refuse("hidden_activation", fmt::format("'{}' is not supported (only 'gelu_pytorch_tanh')", act));
  }

  TEMPER_ASSIGN_OR_RETURN(c.vocab_size, r.Size("vocab_size", 262208));
  TEMPER_ASSIGN_OR_RETURN(c.hidden_size, r.Size("hidden_size", 2304));
  TEMPER_ASSIGN_OR_RETURN(c.intermediate_size, r.Size("intermediate_size", 9216));
  TEMPER_ASSIGN_OR_RETURN(c.num_layers, r.Size("num_hidden_layers", 26));
  TEMPER_ASSIGN_OR_RETURN(c.num_heads, r.Size("num_attention_heads", 8));
  TEMPER_ASSIGN_OR_RETURN(c.num_kv_heads, r.Size("num_key_value_heads", 4));
  TEMPER_ASSIGN_OR_RETURN(c.head_dim, r.Size("head_dim", 256));
  if (c.head_dim % 2 != 0) return r.Error("head_dim", "must be even (RoPE pairs dims)");
  if (c.num_heads % c.num_kv_heads != 0) {
    return r.Error("num_key_value_heads",
                   fmt::format("({}) must divide num_attention_heads ({})", c.num_kv_heads, c.num_heads));
  }
  c.global_head_dim = c.head_dim;
  c.num_global_kv_heads = c.num_kv_heads;
  TEMPER_RETURN_IF_ERROR(ParseSharedDecoderKeys(r, c));
  // Gemma3Attention: scaling = query_pre_attn_scalar ** -0.5, in double, applied to q·k.
  TEMPER_ASSIGN_OR_RETURN(double query_scalar, r.Number("query_pre_attn_scalar", 256.0));
  if (!(query_scalar > 0) || !std::isfinite(query_scalar)) {
    return r.Error("query_pre_attn_scalar", fmt::format("must be > 0, got {}", query_scalar));
  }
  c.attention_scale = static_cast<float>(std::pow(query_scalar, -0.5));
  c.norm_weight_offset = 1;
  c.value_norm = false;
  c.layer_scalars = false;

  TEMPER_ASSIGN_OR_RETURN(int64_t bos, r.Int("bos_token_id", 2));
  TEMPER_ASSIGN_OR_RETURN(int64_t pad, r.Int("pad_token_id", 0));
  c.bos_token_id = static_cast<int>(bos);
  c.pad_token_id = static_cast<int>(pad);
  TEMPER_ASSIGN_OR_RETURN(c.eos_token_ids, ParseEosTokenIds(r, obj, c.vocab_size));

  // Layer kinds: `layer_types` (what 5.23 writes), else every `sliding_window_pattern`-th layer is
  // full (older Hub configs; transformers' default 6). Unlike Gemma 4, the last layer is not forced
  // to full.
  TEMPER_ASSIGN_OR_RETURN(int pattern, r.Size("sliding_window_pattern", 6));
  TEMPER_ASSIGN_OR_RETURN(std::vector<LayerKind> kinds, ParseLayerKinds(r, c.num_layers, pattern));
  const bool any_sliding = std::find(kinds.begin(), kinds.end(), LayerKind::kSliding) != kinds.end();
  if (any_sliding && obj.contains("sliding_window") && obj["sliding_window"].is_null()) {
    return r.Error("sliding_window", "is null but layer_types has sliding layers");
  }
  TEMPER_ASSIGN_OR_RETURN(c.sliding_window, r.Size("sliding_window", 4096));

  // RoPE per layer kind. 5.23 writes `rope_parameters` nested by layer type; older Hub configs give
  // `rope_theta` (full layers), `rope_local_base_freq` (sliding layers) and `rope_scaling` (full
  // layers only), which 5.23 folds into the same form
  // (Gemma3TextConfig.convert_rope_params_to_dict).
  TEMPER_ASSIGN_OR_RETURN(double global_theta, r.Number("rope_theta", 1000000.0));
  TEMPER_ASSIGN_OR_RETURN(double local_theta, r.Number("rope_local_base_freq", 10000.0));
  json rope = {{"full_attention", json::object()}, {"sliding_attention", json::object()}};
  if (const json* given = r.Find("rope_parameters")) {
    if (!given->is_object()) return r.Error("rope_parameters", "must be an object");
    for (const auto& [kind, params] : given->items()) {
      if (kind != "full_attention" && kind != "sliding_attention") {
        return r.Error("rope_parameters." + kind,
                       "is not a layer type: Gemma 3's rope_parameters are nested by 'sliding_attention' and "
                       "'full_attention'");
      }
      if (!params.is_null()) rope[kind] = params;
    }
  }
  if (const json* scaling = r.Find("rope_scaling")) {
    if (!scaling->is_object()) return r.Error("rope_scaling", "must be an object or null");
    // Named here, where the checkpoint wrote it, rather than in the merged full_attention entry.
    KeyReader sr(*scaling, r.source(), r.prefix() + "rope_scaling.");
    TEMPER_ASSIGN_OR_RETURN(std::string legacy_type, sr.String("type", "default"));
    TEMPER_ASSIGN_OR_RETURN(std::string type, sr.String("rope_type", legacy_type));
    if (type != "default" && type != "linear") {
      return sr.Refuse("rope_type", fmt::format("'{}' is not supported (only 'default' and 'linear')", type));
    }
    if (!rope["full_attention"].is_object()) return r.Error("rope_parameters.full_attention", "must be an object");
    rope["full_attention"].update(*scaling);
  }
  for (auto& [kind, theta] : {std::pair{"full_attention", global_theta}, std::pair{"sliding_attention", local_theta}}) {
    if (rope[kind].is_object() && !rope[kind].contains("rope_theta")) rope[kind]["rope_theta"] = theta;
  }
  TEMPER_ASSIGN_OR_RETURN(LayerGeometry full,
                          ParseGemma3Rope(r, rope["full_attention"], "rope_parameters.full_attention", c.head_dim));
  TEMPER_ASSIGN_OR_RETURN(LayerGeometry sliding, ParseGemma3Rope(r, rope["sliding_attention"],
                                                                 "rope_parameters.sliding_attention", c.head_dim));
  for (LayerGeometry* g : {&full, &sliding}) {
    g->head_dim = c.head_dim;
    g->num_kv_heads = c.num_kv_heads;
  }
  full.kind = LayerKind::kFull;
  sliding.kind = LayerKind::kSliding;
  for (LayerKind k : kinds) c.layers.push_back(k == LayerKind::kFull ? full : sliding);
  return c;
}

}  // namespace

Result<ModelConfig> ParseTextConfig(const KeyReader& r, const json& obj, TextDecoderRole role) {
  ModelConfig c;
  // Refuse what we do not implement before anything else, so the error names the real reason.
  TEMPER_ASSIGN_OR_RETURN(int64_t ple, r.Int("hidden_size_per_layer_input", 256));
  if (ple != 0) {
    return r.Refuse("hidden_size_per_layer_input",
                    fmt::format("is {}: per-layer input embeddings are not supported (an absent key means "
                                "256, transformers' default; the 31B checkpoint sets 0)",
                                ple));
  }
  TEMPER_ASSIGN_OR_RETURN(bool moe, r.Bool("enable_moe_block", false));
  if (moe) return r.Refuse("enable_moe_block", "is true: mixture-of-experts layers are not supported");
  TEMPER_ASSIGN_OR_RETURN(int64_t shared, r.Int("num_kv_shared_layers", 0));
  if (role == TextDecoderRole::kTarget && shared != 0)
    return r.Refuse("num_kv_shared_layers", fmt::format("is {}: KV-shared layers are not supported", shared));
  TEMPER_ASSIGN_OR_RETURN(bool wide, r.Bool("use_double_wide_mlp", false));
  if (wide) return r.Refuse("use_double_wide_mlp", "is true: the double-wide MLP is not supported");
  TEMPER_ASSIGN_OR_RETURN(std::string act, r.String("hidden_activation", "gelu_pytorch_tanh"));
  if (act != "gelu_pytorch_tanh") {
    return r.Refuse("hidden_activation", fmt::format("'{}' is not supported (only 'gelu_pytorch_tanh')", act));
  }
  if (const json* bidi = r.Find("use_bidirectional_attention")) {
    if (!bidi->is_string()) return r.Error("use_bidirectional_attention", "must be a string or null");
    // "vision" only changes attention between image tokens; "all" makes the text model non-causal.
    if (*bidi == "all")
      return r.Refuse("use_bidirectional_attention", "is 'all': bidirectional attention is not supported");
    if (*bidi != "vision")
      return r.Error("use_bidirectional_attention", fmt::format("has unknown value {}", bidi->dump()));
  }
  if (r.Has("attn_logit_softcapping")) {
    return r.Refuse("attn_logit_softcapping", "is set: Gemma 4 has no attention-logit softcap");
  }

  TEMPER_ASSIGN_OR_RETURN(c.vocab_size, r.Size("vocab_size", 262144));
  TEMPER_ASSIGN_OR_RETURN(c.hidden_size, r.Size("hidden_size", 2304));
  TEMPER_ASSIGN_OR_RETURN(c.intermediate_size, r.Size("intermediate_size", 9216));
  TEMPER_ASSIGN_OR_RETURN(c.num_layers, r.Size("num_hidden_layers", 30));
  TEMPER_ASSIGN_OR_RETURN(c.num_heads, r.Size("num_attention_heads", 8));
  TEMPER_ASSIGN_OR_RETURN(c.num_kv_heads, r.Size("num_key_value_heads", 4));
  TEMPER_ASSIGN_OR_RETURN(c.head_dim, r.Size("head_dim", 256));
  TEMPER_ASSIGN_OR_RETURN(c.global_head_dim, r.Size("global_head_dim", 512));
  TEMPER_ASSIGN_OR_RETURN(c.attention_k_eq_v, r.Bool("attention_k_eq_v", false));
  // None means "same as num_key_value_heads"; the override only applies with attention_k_eq_v.
  TEMPER_ASSIGN_OR_RETURN(c.num_global_kv_heads, r.Size("num_global_key_value_heads", c.num_kv_heads));
  if (!c.attention_k_eq_v) c.num_global_kv_heads = c.num_kv_heads;
  TEMPER_ASSIGN_OR_RETURN(c.sliding_window, r.Size("sliding_window", 512));
  TEMPER_RETURN_IF_ERROR(ParseSharedDecoderKeys(r, c));

  TEMPER_ASSIGN_OR_RETURN(int64_t bos, r.Int("bos_token_id", 2));
  TEMPER_ASSIGN_OR_RETURN(int64_t pad, r.Int("pad_token_id", 0));
  c.bos_token_id = static_cast<int>(bos);
  c.pad_token_id = static_cast<int>(pad);
  TEMPER_ASSIGN_OR_RETURN(c.eos_token_ids, ParseEosTokenIds(r, obj, c.vocab_size));

  // Layer types: by default every 6th layer is full; the last layer is always forced to full.
  TEMPER_ASSIGN_OR_RETURN(std::vector<LayerKind> kinds, ParseLayerKinds(r, c.num_layers, 6));
  kinds.back() = LayerKind::kFull;
  TEMPER_RETURN_IF_ERROR(ApplyPerLayerConfig(r, kinds, c));
  // After per_layer_config, which may set the full layers' geometry.
  for (int d : {c.head_dim, c.global_head_dim}) {
    if (d % 2 != 0) return r.Error(d == c.head_dim ? "head_dim" : "global_head_dim", "must be even (RoPE pairs dims)");
  }
  if (c.num_heads % c.num_kv_heads != 0) {
    return r.Error("num_key_value_heads",
                   fmt::format("({}) must divide num_attention_heads ({})", c.num_kv_heads, c.num_heads));
  }
  if (c.num_heads % c.num_global_kv_heads != 0) {
    return r.Error("num_global_key_value_heads",
                   fmt::format("({}) must divide num_attention_heads ({})", c.num_global_kv_heads, c.num_heads));
  }

  // rope_parameters is nested per layer type; a null/absent one takes HF's defaults.
  json rope = {
      {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}},
      {"full_attention", {{"rope_type", "proportional"}, {"partial_rotary_factor", 0.25}, {"rope_theta", 1000000.0}}},
  };
  if (const json* given = r.Find("rope_parameters")) {
    if (!given->is_object()) return r.Error("rope_parameters", "must be an object");
    rope = *given;
  }
  TEMPER_ASSIGN_OR_RETURN(LayerGeometry sliding, ParseRope(r, rope, "sliding_attention", c.head_dim));
  TEMPER_ASSIGN_OR_RETURN(LayerGeometry full, ParseRope(r, rope, "full_attention", c.global_head_dim));
  sliding.kind = LayerKind::kSliding;
  sliding.head_dim = c.head_dim;
  sliding.num_kv_heads = c.num_kv_heads;
  sliding.k_eq_v = false;
  full.kind = LayerKind::kFull;
  full.head_dim = c.global_head_dim;
  full.num_kv_heads = c.num_global_kv_heads;
  full.k_eq_v = c.attention_k_eq_v;
  for (LayerKind k : kinds) c.layers.push_back(k == LayerKind::kFull ? full : sliding);
  if (role == TextDecoderRole::kDrafter && shared != 0 && shared != c.num_layers) {
    return r.Error("num_kv_shared_layers",
                   fmt::format("is {}: every layer of a drafter reads the target's cache, so it must equal "
                               "num_hidden_layers ({})",
                               shared, c.num_layers));
  }
  return c;
}

Result<DTypeKey> FindDType(const json* first, std::string_view first_prefix, const json& root,
                           std::string_view source) {
  for (const json* obj : {first, &root}) {
    if (!obj) continue;
    const std::string prefix(obj == &root ? "" : first_prefix);
    KeyReader rr(*obj, std::string(source), prefix);
    for (const char* key : {"dtype", "torch_dtype"}) {
      TEMPER_ASSIGN_OR_RETURN(std::string dtype, rr.String(key, ""));
      if (!dtype.empty()) return DTypeKey{dtype, prefix + key};
    }
  }
  return DTypeKey{};
}

namespace {

// HF multiplies the embedding by `embed_scale.to(weight.dtype)`, so the scale is rounded to the
// checkpoint's dtype: bf16(sqrt(5376)) = 73.5, not 73.3212.
Result<float> EmbedScale(const ModelConfig& c, const KeyReader& r, std::string_view dtype_key) {
  const float exact = static_cast<float>(std::sqrt(static_cast<double>(c.hidden_size)));
  if (c.dtype == "bfloat16") return RoundToBf16(exact);
  return r.Refuse(dtype_key, fmt::format("is '{}': this engine loads bfloat16 checkpoints only", c.dtype));
}

}  // namespace

int64_t ModelConfig::ParameterCount() const {
  const int64_t h = hidden_size;
  int64_t n = int64_t{vocab_size} * h;  // embedding
  if (!tie_word_embeddings) n += int64_t{vocab_size} * h;
  n += h;  // final norm
  for (int i = 0; i < num_layers; ++i) {
    const LayerGeometry& g = layers[i];
    const int64_t q = int64_t{num_heads} * g.head_dim, kv = int64_t{g.num_kv_heads} * g.head_dim;
    n += q * h + kv * h + (g.k_eq_v ? 0 : kv * h) + h * q;           // q, k, v, o
    n += 3 * h * intermediate_size;                                  // gate, up, down
    n += 2 * int64_t{g.head_dim} + 4 * h + (layer_scalars ? 1 : 0);  // q/k norms, 4 layer norms, layer_scalar
  }
  return n;
}

Result<ModelConfig> ParseModelConfig(std::string_view json_text, std::string_view source) {
  json root = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return Status::InvalidArgument(fmt::format("{}: not valid JSON", source));
  if (!root.is_object()) return Status::InvalidArgument(fmt::format("{}: top level must be a JSON object", source));
  KeyReader top(root, std::string(source), "");
  TEMPER_ASSIGN_OR_RETURN(std::string model_type, top.String("model_type", ""));

  ModelConfig c;
  if (model_type == "gemma4_text") {
    TEMPER_ASSIGN_OR_RETURN(c, ParseTextConfig(top, root, TextDecoderRole::kTarget));
    c.weight_prefix = "model.";
  } else if (model_type == "gemma4") {
    const json* text = top.Find("text_config");
    if (!text || !text->is_object()) return top.Error("text_config", "must be an object for model_type 'gemma4'");
    KeyReader tr(*text, std::string(source), "text_config.");
    TEMPER_ASSIGN_OR_RETURN(c, ParseTextConfig(tr, *text, TextDecoderRole::kTarget));
    c.weight_prefix = "model.language_model.";
    // Gemma4ForConditionalGeneration ties the head by the top-level flag.
    TEMPER_ASSIGN_OR_RETURN(c.tie_word_embeddings, top.Bool("tie_word_embeddings", c.tie_word_embeddings));
  } else if (model_type == "gemma3_text") {
    TEMPER_ASSIGN_OR_RETURN(c, ParseGemma3TextConfig(top, root));
    c.weight_prefix = "model.";
  } else if (model_type == "gemma3") {
    const json* text = top.Find("text_config");
    if (!text || !text->is_object()) return top.Error("text_config", "must be an object for model_type 'gemma3'");
    KeyReader tr(*text, std::string(source), "text_config.");
    TEMPER_ASSIGN_OR_RETURN(c, ParseGemma3TextConfig(tr, *text));
    // Gemma3ForConditionalGeneration.save_pretrained (5.23) writes the decoder as
    // `language_model.model.*` and ties the head by the top-level flag; an untied head would be
    // `language_model.lm_head.weight`, which no Gemma 3 checkpoint has.
    c.weight_prefix = "language_model.model.";
    TEMPER_ASSIGN_OR_RETURN(c.tie_word_embeddings, top.Bool("tie_word_embeddings", true));
    if (!c.tie_word_embeddings) {
      return top.Refuse("tie_word_embeddings", "is false: an untied head of a multimodal Gemma 3 is not supported");
    }
  } else if (model_type.empty()) {
    return top.Error("model_type", "is missing");
  } else {
    return top.Refuse("model_type", fmt::format("is '{}': only 'gemma4_text', 'gemma4', 'gemma3_text' and 'gemma3' "
                                                "are supported",
                                                model_type));
  }
  c.model_type = model_type;

  // transformers 5 writes `dtype`; 4.x wrote `torch_dtype`. Multimodal checkpoints may carry it at
  // the top level, in text_config, or both.
  const json* text_config = model_type == "gemma4" || model_type == "gemma3" ? top.Find("text_config") : nullptr;
  TEMPER_ASSIGN_OR_RETURN(DTypeKey found, FindDType(text_config, "text_config.", root, source));
  c.dtype = found.dtype.empty() ? "bfloat16" : found.dtype;
  const std::string dtype_key = found.key.empty() ? "dtype" : found.key;
  TEMPER_ASSIGN_OR_RETURN(c.embed_scale, EmbedScale(c, top, dtype_key));
  return c;
}

Result<std::string> ReadModelConfigText(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::FromErrno(errno, fmt::format("cannot open {}", path.string()));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Status::FromErrno(errno, fmt::format("cannot read {}", path.string()));
  return text.str();
}

Result<ModelConfig> LoadModelConfig(const std::filesystem::path& path) {
  TEMPER_ASSIGN_OR_RETURN(const std::string text, ReadModelConfigText(path));
  return ParseModelConfig(text, path.string());
}

}  // namespace temper::engine
