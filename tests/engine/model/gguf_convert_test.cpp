#include "engine/model/gguf_convert.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "engine/model/gguf_file.h"
#include "engine/model/gguf_model.h"
#include "engine/model/safetensors.h"
#include "engine/temp_dir.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/tokenizer_json_writer.h"

namespace temper::engine {
namespace {

using Catch::Matchers::Contains;
namespace fs = std::filesystem;

const std::string kDir = std::string(TEMPER_TEST_DATA_DIR) + "/gguf";

std::string ReadText(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

GgufFile OpenGguf(const std::string& path) {
  Result<GgufFile> f = GgufFile::Open(path);
  if (!f.ok()) FAIL(f.status().ToString());
  return std::move(f).value();
}

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

}  // namespace
}  // namespace temper::engine
