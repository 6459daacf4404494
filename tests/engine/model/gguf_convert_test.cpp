#include "engine/model/gguf_convert.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "engine/loaded_model.h"
#include "engine/model/gguf_file.h"
#include "engine/model/gguf_fixtures.h"
#include "engine/model/gguf_model.h"
#include "engine/model/safetensors.h"
#include "engine/real_model.h"
#include "engine/temp_dir.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/tokenizer_json_writer.h"

namespace temper::engine {
namespace {

using Catch::Matchers::Contains;
namespace fs = std::filesystem;

using testing::OpenGguf;
using testing::ReadText;
const std::string& kDir = testing::GgufFixtureDir();

std::vector<std::string> Entries(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST_CASE("convert writes the GGUF's config, bf16 tensors, tokenizer and chat template", "[gguf]") {
  testing::TempDir tmp;
  const fs::path out = tmp.path() / "tiny";
  const std::string gguf = kDir + "/gemma3-tiny.gguf";
  REQUIRE(ConvertGgufToDirectory(gguf, out).ok());
  CHECK(Entries(out) ==
        std::vector<std::string>{"chat_template.jinja", "config.json", "model.safetensors", "tokenizer.json"});
  CHECK(Entries(tmp.path()) == std::vector<std::string>{"tiny"});  // no staging directory left

  const GgufFile file = OpenGguf(gguf);
  CHECK(ReadText(out / "config.json") == *GgufConfigJson(file));
  CHECK(ReadText(out / "chat_template.jinja") == **GgufChatTemplate(file));

  Result<GgufBf16Tensors> tensors = GgufGemma3Tensors(file);
  REQUIRE(tensors.ok());
  Result<SafetensorsFile> written = SafetensorsFile::Open(out / "model.safetensors");
  REQUIRE(written.ok());
  CHECK(written->header().metadata.at("format") == "pt");
  REQUIRE(written->header().tensors.size() == tensors->tensors.size());
  for (const TensorInfo& t : tensors->tensors) {
    INFO("tensor " << t.name);
    const TensorInfo* w = written->Find(t.name);
    REQUIRE(w != nullptr);
    CHECK(w->dtype == DType::kBF16);
    CHECK(w->shape == t.shape);
    const auto want = tensors->storage.bytes().subspan(t.begin, t.end - t.begin);
    const auto got = written->Data(*w);
    REQUIRE(got.size() == want.size());
    CHECK(std::memcmp(got.data(), want.data(), got.size()) == 0);
  }

  // The tokenizer.json reads back to the spec it was written from, and tokenizes the same.
  Result<TokenizerSpec> spec = GgufTokenizerSpec(file);
  REQUIRE(spec.ok());
  Result<TokenizerSpec> reread = ParseTokenizerJson(ReadText(out / "tokenizer.json"));
  REQUIRE(reread.ok());
  CHECK(*WriteTokenizerJson(*reread) == *WriteTokenizerJson(*spec));
  Result<Tokenizer> from_spec = Tokenizer::FromSpec(std::move(spec).value());
  Result<Tokenizer> from_file = Tokenizer::FromFile((out / "tokenizer.json").string());
  REQUIRE(from_spec.ok());
  REQUIRE(from_file.ok());
  for (const char* text : {"hello world", "<start_of_turn>hello  world\n", "xyz \xC3\xA9", ""}) {
    INFO(text);
    CHECK(from_file->Encode(text, {.add_special_tokens = true}) ==
          from_spec->Encode(text, {.add_special_tokens = true}));
  }
}

TEST_CASE("convert refuses a non-empty directory and leaves nothing behind when it fails", "[gguf]") {
  testing::TempDir tmp;
  const std::string gguf = kDir + "/gemma3-tiny.gguf";

  SECTION("a directory with a file in it is left as it was") {
    const fs::path out = tmp.path() / "model";
    fs::create_directory(out);
    tmp.Write("model/config.json", "{}");
    Status s = ConvertGgufToDirectory(gguf, out);
    CHECK(s.code() == StatusCode::kAlreadyExists);
    CHECK_THAT(s.message(), Contains("not empty"));
    CHECK(Entries(out) == std::vector<std::string>{"config.json"});
    CHECK(ReadText(out / "config.json") == "{}");
  }
  SECTION("a file where the directory would go") {
    tmp.Write("file", "x");
    CHECK(ConvertGgufToDirectory(gguf, tmp.path() / "file").code() == StatusCode::kAlreadyExists);
  }
  SECTION("an empty directory is filled") {
    fs::create_directory(tmp.path() / "empty");
    REQUIRE(ConvertGgufToDirectory(gguf, tmp.path() / "empty").ok());
    CHECK(Entries(tmp.path() / "empty").size() == 4);
  }
  SECTION("a GGUF refused half way leaves no directory") {
    Status s = ConvertGgufToDirectory(kDir + "/gemma3-tiny-missing.gguf", tmp.path() / "model");
    CHECK(s.code() == StatusCode::kDataLoss);
    CHECK_THAT(s.message(), Contains("missing tensor 'blk.1.ffn_up.weight'"));
    CHECK(Entries(tmp.path()).empty());
  }
}

bool SameMatrix(const Bf16Matrix& a, const Bf16Matrix& b) {
  if (a.rows != b.rows || a.cols != b.cols) return false;
  for (int r = 0; r < a.rows; ++r) {
    if (std::memcmp(a.Row(r), b.Row(r), static_cast<size_t>(a.cols) * 2) != 0) return false;
  }
  return true;
}

bool SameVector(std::span<const uint16_t> a, std::span<const uint16_t> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

// Loads `gguf` and the directory convert makes of it, and checks they are the same model: config,
// every weight bit for bit, and the tokenizer's ids for `texts`.
void CheckRoundTrip(const std::string& gguf, const std::vector<std::string>& texts) {
  testing::TempDir tmp;
  const fs::path dir = tmp.path() / "converted";
  REQUIRE(ConvertGgufToDirectory(gguf, dir).ok());
  Result<LoadedModel> from_gguf = LoadModel({.dir = gguf, .tokenizer_need = TokenizerNeed::kRequired});
  if (!from_gguf.ok()) FAIL(from_gguf.status().ToString());
  Result<LoadedModel> from_dir = LoadModel({.dir = dir.string(), .tokenizer_need = TokenizerNeed::kRequired});
  if (!from_dir.ok()) FAIL(from_dir.status().ToString());

  const ModelConfig& c = from_gguf->config;
  CHECK(c.model_type == "gemma3_text");
  CHECK(from_dir->config.num_layers == c.num_layers);
  CHECK(from_dir->config.hidden_size == c.hidden_size);
  const ModelWeights& a = *from_gguf->weights;
  const ModelWeights& b = *from_dir->weights;
  CHECK(SameMatrix(a.embed(), b.embed()));
  CHECK(SameVector(a.final_norm(), b.final_norm()));
  REQUIRE(a.num_layers() == b.num_layers());
  for (int i = 0; i < a.num_layers(); ++i) {
    INFO("layer " << i);
    const LayerWeights& x = a.layer(i);
    const LayerWeights& y = b.layer(i);
    CHECK(SameMatrix(x.q_proj, y.q_proj));
    CHECK(SameMatrix(x.k_proj, y.k_proj));
    CHECK(SameMatrix(x.v_proj, y.v_proj));
    CHECK(SameMatrix(x.o_proj, y.o_proj));
    CHECK(SameMatrix(x.gate_proj, y.gate_proj));
    CHECK(SameMatrix(x.up_proj, y.up_proj));
    CHECK(SameMatrix(x.down_proj, y.down_proj));
    CHECK(SameVector(x.q_norm, y.q_norm));
    CHECK(SameVector(x.k_norm, y.k_norm));
    CHECK(SameVector(x.input_norm, y.input_norm));
    CHECK(SameVector(x.post_attention_norm, y.post_attention_norm));
    CHECK(SameVector(x.pre_feedforward_norm, y.pre_feedforward_norm));
    CHECK(SameVector(x.post_feedforward_norm, y.post_feedforward_norm));
  }
  REQUIRE(from_gguf->tokenizer != nullptr);
  REQUIRE(from_dir->tokenizer != nullptr);
  for (const std::string& text : texts) {
    INFO(text);
    CHECK(from_gguf->tokenizer->Encode(text, {.add_special_tokens = true}) ==
          from_dir->tokenizer->Encode(text, {.add_special_tokens = true}));
  }
}

TEST_CASE("a GGUF and the directory convert makes of it load to the same model", "[gguf]") {
  CheckRoundTrip(kDir + "/gemma3-tiny.gguf", {"hello world", "<start_of_turn>hello\n", "xyz"});
}

TEST_CASE("the real Gemma 3 270M GGUF and its converted directory load to the same model", "[gguf]") {
  TEMPER_REQUIRE_REAL_GEMMA3();
  std::vector<std::string> texts;
  std::ifstream in(std::string(TEMPER_TEST_DATA_DIR) + "/tokenizer/cases.jsonl");
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json c = nlohmann::json::parse(line);
    if (c.contains("text")) texts.push_back(c["text"].get<std::string>());
  }
  REQUIRE(texts.size() > 200);
  CheckRoundTrip(::temper::testing::RealGemma3GgufPath().string(), texts);
}

}  // namespace
}  // namespace temper::engine
