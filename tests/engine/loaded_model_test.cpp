// Loading a model directory: config, weights and the tokenizer that must fit the model, from the
// tiny fixture laid out with and without a tokenizer.json; each bad directory is named.
#include "engine/loaded_model.h"

#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "golden_fixture.h"
#include "temp_dir.h"

namespace temper::engine::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kTinyTokenizer = fs::path(TEMPER_TEST_DATA_DIR) / "tokenizer" / "gemma4-chat-tiny-tokenizer.json";

// The fixture's config and weights, and (when given) a tokenizer.json.
void LayOut(const TempDir& dir, const std::string& tokenizer_json = "") {
  fs::create_symlink(TinyDir() / "config.json", dir.path() / "config.json");
  fs::create_symlink(TinyDir() / "model.safetensors", dir.path() / "model.safetensors");
  if (!tokenizer_json.empty()) dir.Write("tokenizer.json", tokenizer_json);
}

json TinyTokenizerJson() {
  std::ifstream in(kTinyTokenizer);
  return json::parse(in);
}

TEST_CASE("a model directory loads its config, weights and tokenizer", "[engine][loaded-model]") {
  TempDir dir;
  LayOut(dir, TinyTokenizerJson().dump());
  auto m = LoadModel(ModelSource{.dir = dir.path().string(), .tokenizer_need = TokenizerNeed::kRequired});
  REQUIRE(m.ok());
  CHECK(m->config.vocab_size == 512);
  CHECK(m->config.num_layers == Tiny().config.num_layers);
  REQUIRE(m->weights != nullptr);
  CHECK(m->weights->num_layers() == m->config.num_layers);
  REQUIRE(m->tokenizer != nullptr);
  CHECK(m->tokenizer->id_limit() == 512);
  // A backend starts on them.
  auto backend = CpuBackend::Create(m->config, m->weights, CpuBackendOptions{.threads = 2, .max_context = 64});
  REQUIRE(backend.ok());
  CHECK((*backend)->context_limit() == 64);

  auto without = LoadModel(ModelSource{.dir = dir.path().string(), .tokenizer_need = TokenizerNeed::kNone});
  REQUIRE(without.ok());
  CHECK(without->tokenizer == nullptr);
}

TEST_CASE("a tokenizer is loaded as the source asks", "[engine][loaded-model]") {
  TempDir dir;
  LayOut(dir);  // no tokenizer.json
  const std::string path = dir.path().string();

  auto optional = LoadModel(ModelSource{.dir = path, .tokenizer_need = TokenizerNeed::kIfPresent});
  REQUIRE(optional.ok());
  CHECK(optional->tokenizer == nullptr);

  auto required = LoadModel(ModelSource{.dir = path, .tokenizer_need = TokenizerNeed::kRequired});
  REQUIRE_FALSE(required.ok());
  CHECK(required.status().code() == StatusCode::kNotFound);
  CHECK_THAT(required.status().message(),
             Catch::Contains((dir.path() / "tokenizer.json").string() + " does not exist"));

  // Named explicitly, a tokenizer elsewhere is used, and must exist even when optional.
  auto named = LoadModel(
      ModelSource{.dir = path, .tokenizer = kTinyTokenizer.string(), .tokenizer_need = TokenizerNeed::kIfPresent});
  REQUIRE(named.ok());
  CHECK(named->tokenizer != nullptr);
  auto named_missing = LoadModelTokenizer(
      ModelSource{.dir = path, .tokenizer = "/nonexistent/tok.json", .tokenizer_need = TokenizerNeed::kIfPresent});
  REQUIRE_FALSE(named_missing.ok());
  CHECK_THAT(named_missing.status().message(), Catch::Contains("/nonexistent/tok.json"));

  // A synthetic model has none of its own.
  const std::string config = (TinyDir() / "config.json").string();
  auto synthetic = LoadModel(ModelSource{.synthetic_config = config, .tokenizer_need = TokenizerNeed::kIfPresent});
  REQUIRE(synthetic.ok());
  CHECK(synthetic->tokenizer == nullptr);
  CHECK(synthetic->weights != nullptr);
  auto synthetic_required =
      LoadModel(ModelSource{.synthetic_config = config, .tokenizer_need = TokenizerNeed::kRequired});
  REQUIRE_FALSE(synthetic_required.ok());
  CHECK_THAT(synthetic_required.status().message(), Catch::Contains("has no tokenizer.json of its own"));
}

TEST_CASE("a tokenizer must fit the model's vocabulary", "[engine][loaded-model]") {
  const ModelConfig& config = Tiny().config;  // vocab_size 512

  // A special token past the vocabulary is allowed: content never encodes to it (Gemma 3's
  // <image_soft_token> sits one past its text vocabulary).
  json special = TinyTokenizerJson();
  special["added_tokens"].push_back({{"id", 512},
                                     {"content", "<image_soft_token>"},
                                     {"single_word", false},
                                     {"lstrip", false},
                                     {"rstrip", false},
                                     {"normalized", false},
                                     {"special", true}});
  auto with_special = Tokenizer::FromJson(special.dump());
  REQUIRE(with_special.ok());
  REQUIRE(with_special->id_limit() == 513);
  CHECK(CheckTokenizerFitsModel(*with_special, config, "special.json").ok());

  // An ordinary token past it means the tokenizer is another model's.
  json ordinary = TinyTokenizerJson();
  ordinary["model"]["vocab"]["zzzz"] = 513;
  auto with_ordinary = Tokenizer::FromJson(ordinary.dump());
  REQUIRE(with_ordinary.ok());
  const Status s = CheckTokenizerFitsModel(*with_ordinary, config, "other.json");
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains("tokenizer other.json has token 'zzzz' at id 513, outside the model's "
                                          "vocabulary of 512 (config.json vocab_size)"));

  // Through LoadModel, before any weights are mapped.
  TempDir dir;
  LayOut(dir, ordinary.dump());
  auto m = LoadModel(ModelSource{.dir = dir.path().string(), .tokenizer_need = TokenizerNeed::kRequired});
  REQUIRE_FALSE(m.ok());
  CHECK_THAT(m.status().message(), Catch::Contains((dir.path() / "tokenizer.json").string()));
}

TEST_CASE("bad model sources are refused naming what is wrong", "[engine][loaded-model]") {
  auto both = LoadModel(ModelSource{.dir = "/a", .synthetic_config = "/b/config.json"});
  REQUIRE_FALSE(both.ok());
  CHECK(both.status().code() == StatusCode::kInvalidArgument);
  CHECK_FALSE(LoadModel(ModelSource{}).ok());

  auto missing = LoadModel(ModelSource{.dir = "/nonexistent/model"});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK_THAT(missing.status().message(), Catch::Contains("model directory /nonexistent/model does not exist"));

  TempDir dir;
  const fs::path file = dir.Write("file", "x");
  auto not_dir = LoadModel(ModelSource{.dir = file.string()});
  REQUIRE_FALSE(not_dir.ok());
  CHECK_THAT(not_dir.status().message(), Catch::Contains(file.string() + " is not a directory"));

  // config.json but no weights: the error names the directory.
  TempDir no_weights;
  fs::create_symlink(TinyDir() / "config.json", no_weights.path() / "config.json");
  auto weightless = LoadModel(ModelSource{.dir = no_weights.path().string(), .tokenizer_need = TokenizerNeed::kNone});
  REQUIRE_FALSE(weightless.ok());
  CHECK_THAT(weightless.status().message(), Catch::Contains("weights in " + no_weights.path().string()));
}

}  // namespace
}  // namespace temper::engine::testing
