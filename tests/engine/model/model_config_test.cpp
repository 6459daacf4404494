// config.json parsing: the tiny fixture and the real 31B config give the right geometry; absent
// keys take transformers' defaults; unimplemented features are refused naming the key.
#include <cmath>
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "engine/model/model_config.h"

namespace temper::engine {
namespace {

using nlohmann::json;

json ReadJson(const std::string& relative) {
  std::ifstream in(std::string(TEMPER_TEST_DATA_DIR) + "/" + relative);
  REQUIRE(in.good());
  return json::parse(in);
}

Result<ModelConfig> Parse(const json& j) { return ParseModelConfig(j.dump(), "test/config.json"); }

void ExpectRefused(const json& j, StatusCode code, const std::string& key) {
  auto c = Parse(j);
  REQUIRE_FALSE(c.ok());
  INFO(c.status().ToString());
  CHECK(c.status().code() == code);
  CHECK(c.status().message().find("test/config.json: key '" + key + "'") != std::string::npos);
}

TEST_CASE("the tiny fixture's config parses to its geometry", "[engine][config]") {
  auto c = LoadModelConfig(std::string(TEMPER_TEST_DATA_DIR) + "/gemma4-tiny/config.json");
  REQUIRE(c.ok());
  CHECK(c->model_type == "gemma4_text");
  CHECK(c->weight_prefix == "model.");
  CHECK(c->vocab_size == 512);
  CHECK(c->hidden_size == 128);
  CHECK(c->intermediate_size == 320);
  CHECK(c->num_layers == 8);
  CHECK(c->num_heads == 4);
  CHECK(c->sliding_window == 8);
  CHECK(c->final_logit_softcapping == 30.0f);
  CHECK(c->embed_scale == 11.3125f);  // bf16(sqrt(128)), not 11.3137
  CHECK(c->eos_token_ids == std::vector<int>{1});
  for (int l = 0; l < 8; ++l) {
    const LayerGeometry& g = c->layers[l];
    INFO("layer " << l);
    if (l == 5 || l == 7) {
      CHECK(g.kind == LayerKind::kFull);
      CHECK(g.head_dim == 64);
      CHECK(g.num_kv_heads == 1);
      CHECK(g.k_eq_v);
      CHECK(g.rope_theta == 1e6);
      CHECK(g.rope_angles == 8);  // int(0.25 * 64 // 2)
    } else {
      CHECK(g.kind == LayerKind::kSliding);
      CHECK(g.head_dim == 32);
      CHECK(g.num_kv_heads == 2);
      CHECK_FALSE(g.k_eq_v);
      CHECK(g.rope_theta == 1e4);
      CHECK(g.rope_angles == 16);
    }
  }
}

TEST_CASE("the 31B config parses to the 31B geometry", "[engine][config]") {
  auto c = Parse(ReadJson("gemma4-31b-shape/config.json"));
  REQUIRE(c.ok());
  CHECK(c->num_layers == 60);
  CHECK(c->hidden_size == 5376);
  CHECK(c->intermediate_size == 21504);
  CHECK(c->num_heads == 32);
  CHECK(c->vocab_size == 262144);
  CHECK(c->sliding_window == 1024);
  CHECK(c->max_position_embeddings == 262144);
  CHECK(c->embed_scale == 73.5f);
  int full = 0;
  for (int l = 0; l < 60; ++l) {
    const LayerGeometry& g = c->layers[l];
    const bool is_full = (l + 1) % 6 == 0;
    CHECK((g.kind == LayerKind::kFull) == is_full);
    if (is_full) {
      ++full;
      CHECK(g.head_dim == 512);
      CHECK(g.num_kv_heads == 4);
      CHECK(g.k_eq_v);
      CHECK(g.rope_angles == 64);
      CHECK(c->QDim(l) == 16384);
    } else {
      CHECK(g.head_dim == 256);
      CHECK(g.num_kv_heads == 16);
      CHECK(g.rope_angles == 128);
      CHECK(c->KvDim(l) == 4096);
    }
  }
  CHECK(full == 10);
  CHECK(c->ParameterCount() == 30'697'345'340);  // the fixture README's count
}

TEST_CASE("absent keys take transformers' defaults", "[engine][config]") {
  json j = {{"model_type", "gemma4_text"}, {"hidden_size_per_layer_input", 0}, {"num_hidden_layers", 8}};
  auto c = Parse(j);
  REQUIRE(c.ok());
  CHECK(c->vocab_size == 262144);
  CHECK(c->hidden_size == 2304);
  CHECK(c->num_heads == 8);
  CHECK(c->num_kv_heads == 4);
  CHECK(c->head_dim == 256);
  CHECK(c->global_head_dim == 512);
  CHECK(c->sliding_window == 512);
  CHECK(c->final_logit_softcapping == 0.0f);
  CHECK(c->dtype == "bfloat16");
  CHECK_FALSE(c->attention_k_eq_v);
  // Layer 5 full by the 5:1 pattern, layer 7 forced full as the last layer.
  for (int l = 0; l < 8; ++l) CHECK((c->layers[l].kind == LayerKind::kFull) == (l == 5 || l == 7));
  // Without attention_k_eq_v the global KV-head count does not apply.
  CHECK(c->layers[5].num_kv_heads == 4);
  CHECK(c->layers[5].head_dim == 512);
  CHECK_FALSE(c->layers[5].k_eq_v);
}

TEST_CASE("last layer is forced to full attention", "[engine][config]") {
  json j = ReadJson("gemma4-tiny/config.json");
  j["layer_types"][7] = "sliding_attention";
  auto c = Parse(j);
  REQUIRE(c.ok());
  CHECK(c->layers[7].kind == LayerKind::kFull);
}

TEST_CASE("torch_dtype is accepted as dtype", "[engine][config]") {
  json j = ReadJson("gemma4-tiny/config.json");
  j.erase("dtype");
  j["torch_dtype"] = "bfloat16";
  CHECK(Parse(j).ok());
  j["torch_dtype"] = "float16";
  ExpectRefused(j, StatusCode::kUnimplemented, "torch_dtype");
}

TEST_CASE("the multimodal gemma4 layout reads text_config", "[engine][config]") {
  json text = ReadJson("gemma4-tiny/config.json");
  text.erase("dtype");
  json j = {{"model_type", "gemma4"},
            {"text_config", text},
            {"vision_config", {{"hidden_size", 768}}},
            {"dtype", "bfloat16"},
            {"tie_word_embeddings", true}};
  auto c = Parse(j);
  REQUIRE(c.ok());
  CHECK(c->weight_prefix == "model.language_model.");
  CHECK(c->num_layers == 8);
  j["text_config"]["enable_moe_block"] = true;
  ExpectRefused(j, StatusCode::kUnimplemented, "text_config.enable_moe_block");
  j.erase("text_config");
  ExpectRefused(j, StatusCode::kInvalidArgument, "text_config");
}

TEST_CASE("unimplemented features are refused naming the key", "[engine][config]") {
  const json tiny = ReadJson("gemma4-tiny/config.json");
  auto with = [&](const std::string& key, const json& value) {
    json j = tiny;
    j[key] = value;
    return j;
  };
  json no_ple = tiny;
  no_ple.erase("hidden_size_per_layer_input");  // transformers' default is 256: per-layer inputs on
  ExpectRefused(no_ple, StatusCode::kUnimplemented, "hidden_size_per_layer_input");
  ExpectRefused(with("hidden_size_per_layer_input", 256), StatusCode::kUnimplemented, "hidden_size_per_layer_input");
  ExpectRefused(with("enable_moe_block", true), StatusCode::kUnimplemented, "enable_moe_block");
  ExpectRefused(with("num_kv_shared_layers", 20), StatusCode::kUnimplemented, "num_kv_shared_layers");
  ExpectRefused(with("use_double_wide_mlp", true), StatusCode::kUnimplemented, "use_double_wide_mlp");
  ExpectRefused(with("use_bidirectional_attention", "all"), StatusCode::kUnimplemented, "use_bidirectional_attention");
  ExpectRefused(with("hidden_activation", "silu"), StatusCode::kUnimplemented, "hidden_activation");
  ExpectRefused(with("model_type", "llama"), StatusCode::kUnimplemented, "model_type");
  json rope = tiny;
  rope["rope_parameters"]["full_attention"]["rope_type"] = "yarn";
  ExpectRefused(rope, StatusCode::kUnimplemented, "rope_parameters.full_attention.rope_type");
}

TEST_CASE("malformed configs are rejected naming the key", "[engine][config]") {
  const json tiny = ReadJson("gemma4-tiny/config.json");
  auto with = [&](const std::string& key, const json& value) {
    json j = tiny;
    j[key] = value;
    return j;
  };
  ExpectRefused(with("hidden_size", "128"), StatusCode::kInvalidArgument, "hidden_size");
  ExpectRefused(with("hidden_size", -1), StatusCode::kInvalidArgument, "hidden_size");
  ExpectRefused(with("num_key_value_heads", 3), StatusCode::kInvalidArgument, "num_key_value_heads");
  ExpectRefused(with("head_dim", 33), StatusCode::kInvalidArgument, "head_dim");
  ExpectRefused(with("layer_types", json::array({"full_attention"})), StatusCode::kInvalidArgument, "layer_types");
  json bad_type = tiny;
  bad_type["layer_types"][2] = "chunked_attention";
  ExpectRefused(bad_type, StatusCode::kInvalidArgument, "layer_types[2]");
  ExpectRefused(with("eos_token_id", 100000), StatusCode::kInvalidArgument, "eos_token_id");
  json no_type = tiny;
  no_type.erase("model_type");
  ExpectRefused(no_type, StatusCode::kInvalidArgument, "model_type");
  auto bad_json = ParseModelConfig("{\"model_type\": ", "test/config.json");
  CHECK(bad_json.status().code() == StatusCode::kInvalidArgument);
  CHECK(bad_json.status().message() == "test/config.json: not valid JSON");
  CHECK(LoadModelConfig("/nonexistent/config.json").status().code() == StatusCode::kIOError);
}

TEST_CASE("eos_token_id may be a list", "[engine][config]") {
  json j = ReadJson("gemma4-tiny/config.json");
  j["eos_token_id"] = {1, 106};
  auto c = Parse(j);
  REQUIRE(c.ok());
  CHECK(c->eos_token_ids == std::vector<int>{1, 106});
}

TEST_CASE("per_layer_config, as transformers 5.23 writes the full layers' geometry, is read", "[engine][config]") {
  // The official fixture's config as transformers wrote it, without the older global keys.
  json j = ReadJson("reference/gemma4-31b-ratios/config.json");
  const int global_head_dim = j["global_head_dim"];
  const int global_kv_heads = j["num_global_key_value_heads"];
  j.erase("global_head_dim");
  j.erase("num_global_key_value_heads");
  auto c = Parse(j);
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  CHECK(c->global_head_dim == global_head_dim);
  CHECK(c->num_global_kv_heads == global_kv_heads);
  for (const LayerGeometry& layer : c->layers) {
    if (layer.kind == LayerKind::kFull) CHECK(layer.head_dim == global_head_dim);
  }
  // A global key that says otherwise is an error, not a silent choice.
  json disagreeing = j;
  disagreeing["global_head_dim"] = global_head_dim * 2;
  ExpectRefused(disagreeing, StatusCode::kInvalidArgument, "global_head_dim");
  // Overrides the engine cannot honour are refused naming the entry.
  json on_sliding = j;
  on_sliding["per_layer_config"]["0"] = {{"head_dim", global_head_dim}};
  ExpectRefused(on_sliding, StatusCode::kUnimplemented, "per_layer_config.0");
  json uneven = j;
  const std::string first_full = uneven["per_layer_config"].begin().key();
  uneven["per_layer_config"][first_full]["head_dim"] = global_head_dim * 2;
  CHECK_FALSE(Parse(uneven).ok());
  json other_key = j;
  other_key["per_layer_config"][first_full]["sliding_window"] = 4;
  ExpectRefused(other_key, StatusCode::kUnimplemented, "per_layer_config." + first_full + ".sliding_window");
  json not_an_index = j;
  not_an_index["per_layer_config"]["first"] = json::object();
  ExpectRefused(not_an_index, StatusCode::kInvalidArgument, "per_layer_config.first");
}

// The Gemma 3 270M's config.json as the Hub has it (written by transformers 4.55): RoPE bases as
// `rope_theta` / `rope_local_base_freq`, `rope_scaling` null, `torch_dtype`.
json Gemma3HubConfig() {
  json types = json::array();
  for (int i = 0; i < 18; ++i) types.push_back((i + 1) % 6 == 0 ? "full_attention" : "sliding_attention");
  return {{"_sliding_window_pattern", 6},
          {"architectures", {"Gemma3ForCausalLM"}},
          {"attention_bias", false},
          {"attn_logit_softcapping", nullptr},
          {"bos_token_id", 2},
          {"eos_token_id", 1},
          {"final_logit_softcapping", nullptr},
          {"head_dim", 256},
          {"hidden_activation", "gelu_pytorch_tanh"},
          {"hidden_size", 640},
          {"intermediate_size", 2048},
          {"layer_types", types},
          {"max_position_embeddings", 32768},
          {"model_type", "gemma3_text"},
          {"num_attention_heads", 4},
          {"num_hidden_layers", 18},
          {"num_key_value_heads", 1},
          {"pad_token_id", 0},
          {"query_pre_attn_scalar", 256},
          {"rms_norm_eps", 1e-06},
          {"rope_local_base_freq", 10000.0},
          {"rope_scaling", nullptr},
          {"rope_theta", 1000000.0},
          {"sliding_window", 512},
          {"torch_dtype", "bfloat16"},
          {"use_bidirectional_attention", false},
          {"vocab_size", 262144}};
}

void CheckGemma3_270m(const ModelConfig& c) {
  CHECK(c.model_type == "gemma3_text");
  CHECK(c.weight_prefix == "model.");
  CHECK(c.vocab_size == 262144);
  CHECK(c.hidden_size == 640);
  CHECK(c.num_layers == 18);
  CHECK(c.sliding_window == 512);
  CHECK(c.embed_scale == 25.25f);  // bf16(sqrt(640) = 25.298)
  CHECK(c.norm_weight_offset == 1.0f);
  CHECK(c.attention_scale == 0.0625f);  // 256^-0.5
  CHECK_FALSE(c.value_norm);
  CHECK_FALSE(c.layer_scalars);
  CHECK(c.final_logit_softcapping == 0.0f);
  for (int l = 0; l < 18; ++l) {
    const LayerGeometry& g = c.layers[l];
    INFO("layer " << l);
    CHECK(g.kind == (l == 5 || l == 11 || l == 17 ? LayerKind::kFull : LayerKind::kSliding));
    CHECK(g.head_dim == 256);
    CHECK(g.num_kv_heads == 1);
    CHECK_FALSE(g.k_eq_v);
    CHECK(g.rope_angles == 128);
    CHECK(g.rope_theta == (g.kind == LayerKind::kFull ? 1e6 : 1e4));
    CHECK(g.rope_linear_factor == 1.0);
  }
}

TEST_CASE("a Gemma 3 config as transformers 5.23 writes it parses to its geometry", "[engine][config]") {
  auto c = LoadModelConfig(std::string(TEMPER_TEST_DATA_DIR) + "/reference/gemma3-scaled-rope/config.json");
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  CHECK(c->model_type == "gemma3_text");
  CHECK(c->weight_prefix == "model.");
  CHECK(c->norm_weight_offset == 1.0f);
  CHECK(c->attention_scale == static_cast<float>(std::pow(48.0, -0.5)));
  CHECK_FALSE(c->value_norm);
  CHECK_FALSE(c->layer_scalars);
  CHECK(c->sliding_window == 8);
  const std::vector<LayerKind> kinds = {LayerKind::kSliding, LayerKind::kFull, LayerKind::kSliding, LayerKind::kSliding,
                                        LayerKind::kFull};
  REQUIRE(c->num_layers == 5);
  for (int l = 0; l < 5; ++l) {
    const LayerGeometry& g = c->layers[l];
    INFO("layer " << l);
    CHECK(g.kind == kinds[l]);
    CHECK(g.head_dim == 32);
    CHECK(g.num_kv_heads == 2);
    CHECK(g.rope_angles == 16);
    CHECK(g.rope_theta == (g.kind == LayerKind::kFull ? 1e6 : 1e4));
    CHECK(g.rope_linear_factor == (g.kind == LayerKind::kFull ? 8.0 : 1.0));
  }
}

TEST_CASE("the Gemma 3 270M's Hub config and the form transformers 5.23 writes give one geometry", "[engine][config]") {
  auto hub = Parse(Gemma3HubConfig());
  INFO(hub.status().ToString());
  REQUIRE(hub.ok());
  CheckGemma3_270m(*hub);
  // Gemma3TextConfig(...).to_json_string() in 5.23 (what the GGUF loader writes): rope_parameters
  // per layer type, no rope_theta / rope_local_base_freq / rope_scaling, no dtype.
  json written = Gemma3HubConfig();
  for (const char* key : {"rope_local_base_freq", "rope_scaling", "rope_theta", "torch_dtype"}) written.erase(key);
  written["rope_parameters"] = {{"full_attention", {{"rope_theta", 1000000.0}, {"rope_type", "default"}}},
                                {"sliding_attention", {{"rope_theta", 10000.0}, {"rope_type", "default"}}}};
  auto c = Parse(written);
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  CheckGemma3_270m(*c);
  // Older Hub configs: no layer_types, every sliding_window_pattern-th layer full.
  json pattern = Gemma3HubConfig();
  pattern.erase("layer_types");
  pattern["sliding_window_pattern"] = 6;
  auto p = Parse(pattern);
  INFO(p.status().ToString());
  REQUIRE(p.ok());
  CheckGemma3_270m(*p);
}

TEST_CASE("Gemma 3's linear RoPE scaling applies to the full layers only", "[engine][config]") {
  for (const char* type_key : {"rope_type", "type"}) {
    INFO(type_key);
    json j = Gemma3HubConfig();
    j["rope_scaling"] = {{"factor", 8.0}, {type_key, "linear"}};
    auto c = Parse(j);
    INFO(c.status().ToString());
    REQUIRE(c.ok());
    CHECK(c->layers[5].rope_linear_factor == 8.0);
    CHECK(c->layers[5].rope_theta == 1e6);
    CHECK(c->layers[0].rope_linear_factor == 1.0);
    CHECK(c->layers[0].rope_theta == 1e4);
  }
}

TEST_CASE("the multimodal gemma3 layout reads text_config and the decoder under language_model.model.",
          "[engine][config]") {
  json text = Gemma3HubConfig();
  text.erase("torch_dtype");
  json j = {{"model_type", "gemma3"}, {"text_config", text}, {"dtype", "bfloat16"}, {"vision_config", json::object()}};
  auto c = Parse(j);
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  CHECK(c->weight_prefix == "language_model.model.");
  CHECK(c->tie_word_embeddings);
  CHECK(c->norm_weight_offset == 1.0f);
  j["tie_word_embeddings"] = false;
  ExpectRefused(j, StatusCode::kUnimplemented, "tie_word_embeddings");
  j["tie_word_embeddings"] = true;
  j["text_config"]["attn_logit_softcapping"] = 50.0;
  ExpectRefused(j, StatusCode::kUnimplemented, "text_config.attn_logit_softcapping");
}

TEST_CASE("Gemma 3 features the engine does not implement are refused naming the key", "[engine][config]") {
  auto with = [](const std::string& key, const json& value) {
    json j = Gemma3HubConfig();
    j[key] = value;
    return j;
  };
  ExpectRefused(with("attn_logit_softcapping", 50.0), StatusCode::kUnimplemented, "attn_logit_softcapping");
  ExpectRefused(with("use_bidirectional_attention", true), StatusCode::kUnimplemented, "use_bidirectional_attention");
  ExpectRefused(with("attention_bias", true), StatusCode::kUnimplemented, "attention_bias");
  ExpectRefused(with("hidden_activation", "gelu"), StatusCode::kUnimplemented, "hidden_activation");
  ExpectRefused(with("rope_scaling", {{"rope_type", "yarn"}, {"factor", 8.0}}), StatusCode::kUnimplemented,
                "rope_scaling.rope_type");
  ExpectRefused(with("rope_scaling", {{"rope_type", "linear"}}), StatusCode::kInvalidArgument,
                "rope_parameters.full_attention.factor");
  ExpectRefused(with("rope_parameters", {{"sliding_attention", {{"rope_type", "dynamic"}, {"factor", 2.0}}}}),
                StatusCode::kUnimplemented, "rope_parameters.sliding_attention.rope_type");
  ExpectRefused(
      with("rope_parameters", {{"full_attention", {{"rope_type", "default"}, {"partial_rotary_factor", 0.5}}}}),
      StatusCode::kUnimplemented, "rope_parameters.full_attention.partial_rotary_factor");
  ExpectRefused(with("rope_parameters", {{"rope_type", "default"}, {"rope_theta", 10000.0}}),
                StatusCode::kInvalidArgument, "rope_parameters.rope_theta");
  ExpectRefused(with("sliding_window", nullptr), StatusCode::kInvalidArgument, "sliding_window");
  ExpectRefused(with("query_pre_attn_scalar", 0), StatusCode::kInvalidArgument, "query_pre_attn_scalar");
  ExpectRefused(with("torch_dtype", "float32"), StatusCode::kUnimplemented, "torch_dtype");
}

}  // namespace
}  // namespace temper::engine
