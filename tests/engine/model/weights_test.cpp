// Loading weights: the tiny checkpoint loads single-file, sharded and in the multimodal layout;
// a checkpoint that disagrees with its config gets an error naming the tensor.
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "engine/checkpoint_tensors.h"
#include "engine/golden_fixture.h"
#include "engine/model/checkpoint.h"
#include "engine/temp_dir.h"

namespace temper::engine::testing {
namespace {

std::string ReadText(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A model directory holding `tensors` and the tiny config.
void WriteModel(const TempDir& dir, const std::vector<TensorToWrite>& tensors, const std::string& config_text) {
  dir.Write("config.json", config_text);
  REQUIRE(WriteSafetensors(dir.path() / "model.safetensors", tensors).ok());
}

Status LoadError(const TempDir& dir) {
  auto config = LoadModelConfig(dir.path() / "config.json");
  REQUIRE(config.ok());
  auto w = ModelWeights::Load(dir.path(), *config);
  REQUIRE_FALSE(w.ok());
  return w.status();
}

void ExpectLoadError(const TempDir& dir, const std::string& needle) {
  const Status s = LoadError(dir);
  INFO(s.ToString());
  CHECK(s.code() == StatusCode::kDataLoss);
  CHECK(s.message().find(needle) != std::string::npos);
}

// The last-row logits of prompt 1 through a model loaded from `dir`.
std::vector<float> LastLogits(const std::filesystem::path& dir) {
  auto config = LoadModelConfig(dir / "config.json");
  REQUIRE(config.ok());
  auto w = ModelWeights::Load(dir, *config);
  if (!w.ok()) FAIL(w.status().ToString());
  auto backend = CpuBackend::Create(*config, std::shared_ptr<const ModelWeights>(std::move(*w)), {});
  REQUIRE(backend.ok());
  auto seq = (*backend)->AddSequence();
  REQUIRE(seq.ok());
  const std::vector<int32_t> ids = Reference<int32_t>("input_ids_1");
  ForwardItem item{*seq, ids, false};
  auto out = (*backend)->Forward({&item, 1}, {});
  REQUIRE(out.ok());
  return out->logits;
}

TEST_CASE("the tiny checkpoint loads with the right views", "[engine][weights]") {
  const ModelWeights& w = *Tiny().weights;
  CHECK(w.num_layers() == 8);
  CHECK(w.embed().rows == 512);
  CHECK(w.embed().cols == 128);
  CHECK(w.lm_head().data == w.embed().data);  // tied
  CHECK(w.layer(5).v_proj.empty());           // k_eq_v
  CHECK(w.layer(5).q_proj.rows == 256);
  CHECK(w.layer(4).v_proj.rows == 64);
  for (int l = 0; l < 8; ++l) {
    CHECK(w.layer(l).layer_scalar >= 0.5f);
    CHECK(w.layer(l).layer_scalar <= 1.5f);
  }
}

TEST_CASE("a checkpoint that disagrees with the config names the tensor", "[engine][weights]") {
  TempDir dir;
  CheckpointTensors t = CheckpointTensors::Load(TinyDir() / "model.safetensors");
  const std::string config = ReadText(TinyDir() / "config.json");
  SECTION("missing tensor") {
    t.Remove("model.layers.5.self_attn.k_proj.weight");
    WriteModel(dir, t.tensors, config);
    ExpectLoadError(dir, "missing tensor 'model.layers.5.self_attn.k_proj.weight'");
  }
  SECTION("unexpected tensor") {
    // Layer 5 is k_eq_v: a v_proj there means the config is not this checkpoint's.
    TensorToWrite extra = *t.Find("model.layers.4.self_attn.v_proj.weight");
    extra.name = "model.layers.5.self_attn.v_proj.weight";
    t.tensors.push_back(extra);
    WriteModel(dir, t.tensors, config);
    ExpectLoadError(dir, "unexpected tensor 'model.layers.5.self_attn.v_proj.weight'");
  }
  SECTION("wrong shape") {
    t.Find("model.layers.2.mlp.down_proj.weight")->shape = {320, 128};
    WriteModel(dir, t.tensors, config);
    ExpectLoadError(
        dir, "tensor 'model.layers.2.mlp.down_proj.weight' has shape [320, 128] but config.json implies [128, 320]");
  }
  SECTION("wrong dtype") {
    TensorToWrite* n = t.Find("model.norm.weight");
    n->dtype = DType::kF16;
    WriteModel(dir, t.tensors, config);
    ExpectLoadError(dir, "tensor 'model.norm.weight' has dtype F16");
  }
  SECTION("an untied config wants lm_head.weight") {
    nlohmann::json j = nlohmann::json::parse(config);
    j["tie_word_embeddings"] = false;
    WriteModel(dir, t.tensors, j.dump());
    ExpectLoadError(dir, "missing tensor 'lm_head.weight'");
  }
  SECTION("no checkpoint at all") {
    dir.Write("config.json", config);
    auto c = LoadModelConfig(dir.path() / "config.json");
    REQUIRE(c.ok());
    CHECK(ModelWeights::Load(dir.path(), *c).status().code() == StatusCode::kNotFound);
  }
}

TEST_CASE("a sharded checkpoint loads and matches the single file", "[engine][weights]") {
  TempDir dir;
  CheckpointTensors t = CheckpointTensors::Load(TinyDir() / "model.safetensors");
  dir.Write("config.json", ReadText(TinyDir() / "config.json"));
  const size_t half = t.tensors.size() / 2;
  std::vector<TensorToWrite> a(t.tensors.begin(), t.tensors.begin() + half),
      b(t.tensors.begin() + half, t.tensors.end());
  REQUIRE(WriteSafetensors(dir.path() / "model-00001-of-00002.safetensors", a).ok());
  REQUIRE(WriteSafetensors(dir.path() / "model-00002-of-00002.safetensors", b).ok());
  nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", nlohmann::json::object()}};
  for (const auto& x : a) index["weight_map"][x.name] = "model-00001-of-00002.safetensors";
  for (const auto& x : b) index["weight_map"][x.name] = "model-00002-of-00002.safetensors";

  SECTION("good index") {
    dir.Write("model.safetensors.index.json", index.dump());
    const std::vector<float> sharded = LastLogits(dir.path());
    const std::vector<float> single = LastLogits(TinyDir());
    CHECK(sharded == single);
  }
  SECTION("index names the wrong shard") {
    index["weight_map"][b[0].name] = "model-00001-of-00002.safetensors";
    dir.Write("model.safetensors.index.json", index.dump());
    auto c = Checkpoint::Open(dir.path());
    CHECK(c.status().code() == StatusCode::kDataLoss);
    CHECK(c.status().message().find("'" + b[0].name + "' is listed for model-00001-of-00002.safetensors") !=
          std::string::npos);
  }
  SECTION("a shard holds a tensor the index does not list") {
    index["weight_map"].erase(a[0].name);
    dir.Write("model.safetensors.index.json", index.dump());
    auto c = Checkpoint::Open(dir.path());
    CHECK(c.status().code() == StatusCode::kDataLoss);
    CHECK(c.status().message().find("missing from weight_map") != std::string::npos);
  }
  SECTION("a tensor in two shards") {
    b.push_back(a[0]);
    REQUIRE(WriteSafetensors(dir.path() / "model-00002-of-00002.safetensors", b).ok());
    dir.Write("model.safetensors.index.json", index.dump());
    auto c = Checkpoint::Open(dir.path());
    CHECK(c.status().code() == StatusCode::kDataLoss);
    CHECK(c.status().message().find("is in both") != std::string::npos);
  }
  SECTION("a shard path that leaves the directory") {
    index["weight_map"][a[0].name] = "../model.safetensors";
    dir.Write("model.safetensors.index.json", index.dump());
    CHECK(Checkpoint::Open(dir.path()).status().code() == StatusCode::kDataLoss);
  }
  SECTION("bad index JSON") {
    dir.Write("model.safetensors.index.json", "{\"weight_map\": [");
    CHECK(Checkpoint::Open(dir.path()).status().message().find("bad JSON") != std::string::npos);
  }
}

TEST_CASE("a multimodal gemma4 checkpoint loads its decoder and ignores the towers", "[engine][weights]") {
  TempDir dir;
  CheckpointTensors t = CheckpointTensors::Load(TinyDir() / "model.safetensors");
  nlohmann::json text = nlohmann::json::parse(ReadText(TinyDir() / "config.json"));
  nlohmann::json config = {{"model_type", "gemma4"}, {"text_config", text}, {"vision_config", {{"hidden_size", 8}}}};
  std::vector<TensorToWrite> renamed;
  for (const TensorToWrite& x : t.tensors) {
    TensorToWrite y = x;
    y.name = "model.language_model." + x.name.substr(std::string("model.").size());
    renamed.push_back(y);
  }
  const float vision[4] = {1, 2, 3, 4};
  renamed.push_back({"model.vision_tower.encoder.layers.0.mlp.weight",
                     DType::kF32,
                     {2, 2},
                     {reinterpret_cast<const uint8_t*>(vision), sizeof vision}});
  WriteModel(dir, renamed, config.dump());
  CHECK(LastLogits(dir.path()) == LastLogits(TinyDir()));
}

std::filesystem::path Gemma3Dir() { return TestDataDir() / "reference" / "gemma3-scaled-rope"; }

TEST_CASE("a Gemma 3 checkpoint loads: v_proj on every layer, no layer scalars", "[engine][weights]") {
  auto config = LoadModelConfig(Gemma3Dir() / "config.json");
  REQUIRE(config.ok());
  auto w = ModelWeights::Load(Gemma3Dir(), *config);
  INFO(w.status().ToString());
  REQUIRE(w.ok());
  for (int l = 0; l < config->num_layers; ++l) {
    INFO("layer " << l);
    CHECK_FALSE((*w)->layer(l).v_proj.empty());
    CHECK((*w)->layer(l).layer_scalar == 1.0f);
  }
  CHECK(config->ParameterCount() ==
        5 * (2 * 32 + 4 * 64) + 64 + 512 * 64 + 5 * (64 * 128 + 2 * 64 * 64 + 128 * 64 + 3 * 64 * 128));
}

TEST_CASE("a Gemma 3 checkpoint that disagrees with the config names the tensor", "[engine][weights]") {
  TempDir dir;
  CheckpointTensors t = CheckpointTensors::Load(Gemma3Dir() / "model.safetensors");
  const std::string config = ReadText(Gemma3Dir() / "config.json");
  SECTION("missing v_proj on a full layer") {
    t.Remove("model.layers.1.self_attn.v_proj.weight");
    WriteModel(dir, t.tensors, config);
    ExpectLoadError(dir, "missing tensor 'model.layers.1.self_attn.v_proj.weight'");
  }
  SECTION("a Gemma 4 layer scalar") {
    const uint16_t one = 0x3f80;
    t.tensors.push_back(
        {"model.layers.0.layer_scalar", DType::kBF16, {1}, {reinterpret_cast<const uint8_t*>(&one), sizeof one}});
    WriteModel(dir, t.tensors, config);
    ExpectLoadError(dir, "unexpected tensor 'model.layers.0.layer_scalar'");
  }
  SECTION("the multimodal layout keeps the decoder under language_model.model.") {
    nlohmann::json text = nlohmann::json::parse(config);
    nlohmann::json mm = {{"model_type", "gemma3"}, {"text_config", text}, {"vision_config", nlohmann::json::object()}};
    std::vector<TensorToWrite> renamed;
    for (const TensorToWrite& x : t.tensors) {
      TensorToWrite y = x;
      y.name = "language_model.model." + x.name.substr(std::string("model.").size());
      renamed.push_back(y);
    }
    WriteModel(dir, renamed, mm.dump());
    auto c = LoadModelConfig(dir.path() / "config.json");
    REQUIRE(c.ok());
    auto w = ModelWeights::Load(dir.path(), *c);
    INFO(w.status().ToString());
    CHECK(w.ok());
  }
}

TEST_CASE("synthetic weights are seeded and follow the config's shapes", "[engine][weights]") {
  auto a = ModelWeights::Synthetic(Tiny().config, 7);
  auto b = ModelWeights::Synthetic(Tiny().config, 7);
  auto c = ModelWeights::Synthetic(Tiny().config, 8);
  REQUIRE((a.ok() && b.ok() && c.ok()));
  CHECK((*a)->layer(5).q_proj.rows == 256);
  CHECK((*a)->layer(5).v_proj.empty());
  const Bf16Matrix& ea = (*a)->embed();
  CHECK(std::equal(ea.data, ea.data + 512 * 128, (*b)->embed().data));
  CHECK_FALSE(std::equal(ea.data, ea.data + 512 * 128, (*c)->embed().data));
}

}  // namespace
}  // namespace temper::engine::testing
