// config.json parsing: the tiny fixture and the real 31B config give the right geometry; absent
// keys take transformers' defaults; unimplemented features are refused naming the key.
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

}  // namespace
}  // namespace temper::engine
