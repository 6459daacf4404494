#include "engine/model/gguf_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "engine/gzip_file.h"
#include "engine/model/bf16.h"
#include "engine/model/gguf_bytes.h"
#include "engine/model/gguf_dequant.h"
#include "engine/model/gguf_fixtures.h"
#include "engine/real_model.h"
#include "engine/tokenizer/tokenizer.h"

namespace temper::engine {
namespace {

using Catch::Matchers::Contains;
using nlohmann::json;

using testing::OpenGguf;
using testing::ReadText;
const std::string& kDir = testing::GgufFixtureDir();
const std::string kTokenizerDir = std::string(TEMPER_TEST_DATA_DIR) + "/tokenizer";

std::vector<float> F32Values(const SafetensorsFile& file, const std::string& name) {
  const TensorInfo* info = file.Find(name);
  REQUIRE(info != nullptr);
  std::vector<float> out(info->NumElements());
  std::memcpy(out.data(), file.Data(*info).data(), out.size() * 4);
  return out;
}

TEST_CASE("a Gemma 3 GGUF's config is the config.json transformers writes for it", "[gguf]") {
  const GgufFile tiny = OpenGguf(kDir + "/gemma3-tiny.gguf");
  Result<std::string> config = GgufConfigJson(tiny);
  REQUIRE(config.ok());
  CHECK(*config == ReadText(kDir + "/gemma3-tiny-config.json"));

  SECTION("the real 270M") {
    TEMPER_REQUIRE_REAL_GEMMA3();
    const GgufFile real = OpenGguf(::temper::testing::RealGemma3GgufPath().string());
    Result<std::string> real_config = GgufConfigJson(real);
    REQUIRE(real_config.ok());
    CHECK(*real_config == ReadText(kDir + "/gemma3-270m-config.json"));
    const json c = json::parse(*real_config);
    CHECK(c["hidden_size"] == 640);
    CHECK(c["num_hidden_layers"] == 18);
    CHECK(c["layer_types"][5] == "full_attention");
    CHECK(c["layer_types"][4] == "sliding_attention");
    CHECK(c["query_pre_attn_scalar"] == 256);
  }
}

TEST_CASE("a Gemma 3 GGUF's tensors come out under HF names in bf16, norms as w", "[gguf]") {
  const GgufFile tiny = OpenGguf(kDir + "/gemma3-tiny.gguf");
  Result<GgufBf16Tensors> tensors = GgufGemma3Tensors(tiny);
  REQUIRE(tensors.ok());
  Result<SafetensorsFile> values = SafetensorsFile::Open(kDir + "/gemma3-tiny-values.safetensors");
  REQUIRE(values.ok());
  // GGUF name -> HF name, spot checks of the mapping; every tensor is compared below.
  const std::map<std::string, std::string> gguf_names = {
      {"model.embed_tokens.weight", "token_embd.weight"},
      {"model.norm.weight", "output_norm.weight"},
      {"model.layers.1.self_attn.q_proj.weight", "blk.1.attn_q.weight"},
      {"model.layers.1.self_attn.k_proj.weight", "blk.1.attn_k.weight"},
      {"model.layers.1.self_attn.v_proj.weight", "blk.1.attn_v.weight"},
      {"model.layers.1.self_attn.o_proj.weight", "blk.1.attn_output.weight"},
      {"model.layers.1.self_attn.q_norm.weight", "blk.1.attn_q_norm.weight"},
      {"model.layers.1.self_attn.k_norm.weight", "blk.1.attn_k_norm.weight"},
      {"model.layers.1.mlp.gate_proj.weight", "blk.1.ffn_gate.weight"},
      {"model.layers.1.mlp.up_proj.weight", "blk.1.ffn_up.weight"},
      {"model.layers.1.mlp.down_proj.weight", "blk.1.ffn_down.weight"},
      {"model.layers.1.input_layernorm.weight", "blk.1.attn_norm.weight"},
      {"model.layers.1.post_attention_layernorm.weight", "blk.1.post_attention_norm.weight"},
      {"model.layers.1.pre_feedforward_layernorm.weight", "blk.1.ffn_norm.weight"},
      {"model.layers.1.post_feedforward_layernorm.weight", "blk.1.post_ffw_norm.weight"},
  };
  CHECK(tensors->tensors.size() == 2 + 2 * 13);
  int checked = 0;
  for (const TensorInfo& t : tensors->tensors) {
    INFO("tensor " << t.name);
    CHECK(t.dtype == DType::kBF16);
    auto it = gguf_names.find(t.name);
    if (it == gguf_names.end()) continue;
    const TensorInfo* want = values->Find(it->second);
    REQUIRE(want != nullptr);
    CHECK(want->shape == t.shape);
    const std::vector<float> raw = F32Values(*values, it->second);
    const bool norm = t.name.ends_with("norm.weight");
    const auto* got = reinterpret_cast<const uint16_t*>(tensors->storage.bytes().data() + t.begin);
    REQUIRE(static_cast<size_t>((t.end - t.begin) / 2) == raw.size());
    int differing = 0;
    for (size_t i = 0; i < raw.size(); ++i) differing += got[i] != FloatToBf16(norm ? raw[i] - 1.0f : raw[i]);
    CHECK(differing == 0);
    ++checked;
  }
  CHECK(checked == static_cast<int>(gguf_names.size()));
}

TEST_CASE("a GGUF that is not the Gemma 3 its metadata describes is refused by name", "[gguf]") {
  const GgufFile llama = OpenGguf(kDir + "/gemma3-tiny-llama.gguf");
  Result<std::string> config = GgufConfigJson(llama);
  REQUIRE_FALSE(config.ok());
  CHECK_THAT(config.status().message(), Contains("'general.architecture' is 'llama'"));
  CHECK_FALSE(GgufGemma3Tensors(llama).ok());
  CHECK_FALSE(GgufTokenizerSpec(llama).ok());

  auto refused = [](const std::string& file, const std::string& part) {
    const GgufFile f = OpenGguf(kDir + "/" + file);
    Result<GgufBf16Tensors> tensors = GgufGemma3Tensors(f);
    REQUIRE_FALSE(tensors.ok());
    INFO(tensors.status().ToString());
    CHECK(tensors.status().code() == StatusCode::kDataLoss);
    CHECK_THAT(tensors.status().message(), Contains(file) && Contains(part));
  };
  refused("gemma3-tiny-missing.gguf", "missing tensor 'blk.1.ffn_up.weight'");
  refused("gemma3-tiny-extra.gguf", "unexpected tensor 'blk.1.attn_sinks.weight'");
  refused("gemma3-tiny-shape.gguf", "tensor 'blk.0.attn_k.weight' has GGUF dims [32, 15]");
}

TEST_CASE("a block count the file's tensors cannot back is refused before anything is sized by it", "[gguf]") {
  Result<MappedFile> map = MappedFile::Open(kDir + "/gemma3-tiny.gguf");
  REQUIRE(map.ok());
  std::vector<uint8_t> bytes(map->bytes().begin(), map->bytes().end());
  // The key, its type (UINT32) and its value: set the value to 2^31 - 1 layers.
  const std::string key = "gemma3.block_count";
  auto at = std::search(bytes.begin(), bytes.end(), key.begin(), key.end());
  REQUIRE(at != bytes.end());
  const size_t value = static_cast<size_t>(at - bytes.begin()) + key.size() + 4;
  const uint32_t layers = 0x7fffffff;
  std::memcpy(bytes.data() + value, &layers, 4);
  Result<GgufFile> file = GgufFile::Parse(bytes, "huge.gguf");
  REQUIRE(file.ok());
  Result<std::string> config = GgufConfigJson(*file);
  REQUIRE_FALSE(config.ok());
  CHECK_THAT(config.status().message(),
             Contains("'gemma3.block_count' is 2147483647, but the file holds only 28 tensors"));
  CHECK_FALSE(GgufGemma3Tensors(*file).ok());
}

// A gemma3 GGUF holding only a vocabulary: what GgufTokenizerSpec reads.
struct Vocabulary {
  std::string model = "llama";
  std::vector<std::string_view> tokens = {"<unk>", "a", "b", "ab"};
  std::vector<float> scores = {0, -1, -2, -3};
  std::vector<int32_t> types = {3, 1, 1, 1};

  Result<TokenizerSpec> Spec() const {
    testing::GgufBytes b;
    b.Header(0, 5)
        .KvString("general.architecture", "gemma3")
        .KvString("tokenizer.ggml.model", model)
        .KvStrings("tokenizer.ggml.tokens", tokens)
        .KvF32s("tokenizer.ggml.scores", scores)
        .KvI32s("tokenizer.ggml.token_type", types);
    bytes_ = b.bytes;
    Result<GgufFile> file = GgufFile::Parse(bytes_, "vocab.gguf");
    if (!file.ok()) return file.status();
    // add_bos_token defaults to true and there is no bos_token_id: leave the template out.
    return GgufTokenizerSpec(*file);
  }
  mutable std::vector<uint8_t> bytes_;
};

TEST_CASE("a hostile GGUF vocabulary is refused by key and index, and long pieces cost linear time", "[gguf]") {
  auto refused = [](const Vocabulary& v, const std::string& part) {
    Result<TokenizerSpec> spec = v.Spec();
    REQUIRE_FALSE(spec.ok());
    INFO(spec.status().ToString());
    CHECK_THAT(spec.status().message(), Contains("vocab.gguf") && Contains(part));
  };
  {
    Vocabulary v;
    v.model = "gpt2";
    refused(v, "'tokenizer.ggml.model' is 'gpt2'");
  }
  {
    Vocabulary v;
    v.tokens = {"<unk>", "a", "b", "a"};
    refused(v, "'tokenizer.ggml.tokens'[3] repeats [1]");
  }
  {
    Vocabulary v;
    v.scores[2] = std::nanf("");
    refused(v, "'tokenizer.ggml.scores'[2] is NaN");
  }
  {
    Vocabulary v;
    v.scores.pop_back();
    refused(v, "hold 4, 3 and 4 entries");
  }
  {
    Vocabulary v;
    v.types[1] = 9;
    refused(v, "'tokenizer.ggml.token_type'[1] is 9");
  }
  {
    Vocabulary v;
    v.tokens[2] = "\xC3(";
    refused(v, "'tokenizer.ggml.tokens'[2] is not UTF-8");
  }
  {
    // Without a bos token id, add_bos_token (true by default) cannot be honoured.
    Vocabulary v;
    refused(v, "'tokenizer.ggml.bos_token_id' is missing");
  }
  // A 1 MB piece has a million splits: each is looked up in O(1), not by hashing its halves anew
  // (which would be 5e11 bytes of hashing). "a" + the long piece merge nowhere.
  const std::string long_piece(1 << 20, 'a');
  testing::GgufBytes b;
  b.Header(0, 7)
      .KvString("general.architecture", "gemma3")
      .KvString("tokenizer.ggml.model", "llama")
      .KvStrings("tokenizer.ggml.tokens", {"<bos>", "a", "aa", long_piece})
      .KvF32s("tokenizer.ggml.scores", {0, -1, -2, -3})
      .KvI32s("tokenizer.ggml.token_type", {3, 1, 1, 1})
      .KvU32("tokenizer.ggml.bos_token_id", 0)
      .KvU32("tokenizer.ggml.unknown_token_id", 0);
  Result<GgufFile> file = GgufFile::Parse(b.bytes, "long.gguf");
  REQUIRE(file.ok());
  Result<TokenizerSpec> spec = GgufTokenizerSpec(*file);
  REQUIRE(spec.ok());
  REQUIRE(spec->model.merges.size() == 1);  // "a" + "a" = "aa"
  CHECK(spec->model.View(spec->model.merges[0].left) == "a");
  Result<Tokenizer> tok = Tokenizer::FromSpec(std::move(spec).value());
  REQUIRE(tok.ok());
  CHECK(tok->Encode("aaaaa", {.add_special_tokens = true}) == std::vector<int32_t>{0, 2, 2, 1});
}

TEST_CASE("the tiny Gemma 3's tokenizer: SentencePiece pieces, merges from scores, byte fallback", "[gguf]") {
  const GgufFile tiny = OpenGguf(kDir + "/gemma3-tiny.gguf");
  Result<TokenizerSpec> spec = GgufTokenizerSpec(tiny);
  REQUIRE(spec.ok());
  Result<Tokenizer> tok = Tokenizer::FromSpec(std::move(spec).value());
  REQUIRE(tok.ok());
  // Ids: 10 special pieces, 256 byte pieces from 10, then "▁" 266, ..., "hello" 279, "▁world" 285.
  CHECK(tok->Encode("hello world") == std::vector<int32_t>{279, 285});
  CHECK(tok->Encode("hello world", {.add_special_tokens = true}) == std::vector<int32_t>{2, 279, 285});
  CHECK(tok->Encode("x") == std::vector<int32_t>{10 + 'x'});
  // A user-defined piece of two spaces is "▁▁" again, matched whole.
  CHECK(*tok->IdToToken(9) == "\xE2\x96\x81\xE2\x96\x81");
  CHECK(tok->Encode("<start_of_turn>hello\n") == std::vector<int32_t>{6, 279, 8});
  CHECK(tok->IsSpecial(6));
  CHECK_FALSE(tok->IsSpecial(8));
  CHECK(*tok->Decode(std::vector<int32_t>{2, 279, 285, 130}) == "<bos>hello worldx");
  CHECK(*tok->Decode(std::vector<int32_t>{2, 279, 285}, /*skip_special_tokens=*/true) == "hello world");
  Result<std::optional<std::string>> chat_template = GgufChatTemplate(tiny);
  REQUIRE(chat_template.ok());
  CHECK(chat_template->value_or("") == "{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% endfor %}");
}

TEST_CASE("the real Gemma 3 270M GGUF's tokenizer is Hugging Face's", "[gguf]") {
  TEMPER_REQUIRE_REAL_GEMMA3();
  const GgufFile real = OpenGguf(::temper::testing::RealGemma3GgufPath().string());
  Result<TokenizerSpec> spec = GgufTokenizerSpec(real);
  REQUIRE(spec.ok());
  Result<std::string> hf_text = testing::ReadGzipFile(kTokenizerDir + "/gemma3-tokenizer.json.gz");
  REQUIRE(hf_text.ok());
  Result<TokenizerSpec> hf = ParseTokenizerJson(*hf_text);
  REQUIRE(hf.ok());

  SECTION("the same vocabulary and the same merges in the same order") {
    REQUIRE(spec->model.vocab.size() == hf->model.vocab.size());
    std::vector<std::string_view> hf_by_id(hf->model.vocab.size());
    for (const BpeSpec::VocabEntry& e : hf->model.vocab) hf_by_id.at(e.id) = hf->model.View(e.token);
    int vocab_differing = 0;
    for (const BpeSpec::VocabEntry& e : spec->model.vocab)
      vocab_differing += spec->model.View(e.token) != hf_by_id[e.id];
    CHECK(vocab_differing == 0);
    REQUIRE(spec->model.merges.size() == hf->model.merges.size());
    int merges_differing = 0;
    for (size_t i = 0; i < spec->model.merges.size(); ++i) {
      const auto& a = spec->model.merges[i];
      const auto& b = hf->model.merges[i];
      if (spec->model.View(a.left) != hf->model.View(b.left) || spec->model.View(a.right) != hf->model.View(b.right)) {
        if (merges_differing++ < 3) UNSCOPED_INFO("merge " << i << " differs");
      }
    }
    CHECK(merges_differing == 0);
  }

  SECTION("every line of cases.jsonl encodes and decodes as with the HF tokenizer") {
    Result<Tokenizer> tok = Tokenizer::FromSpec(std::move(spec).value());
    REQUIRE(tok.ok());
    std::ifstream in(kTokenizerDir + "/cases.jsonl");
    REQUIRE(in.good());
    std::string line;
    int line_no = 0, encoded = 0, past_vocabulary = 0;
    while (std::getline(in, line)) {
      ++line_no;
      const json c = json::parse(line);
      const auto ids = c.at("ids").get<std::vector<int32_t>>();
      INFO("cases.jsonl line " << line_no << ": " << line.substr(0, 200));
      // <image_soft_token> (262144) is an added token of the HF file only, past the GGUF's 262,144
      // pieces: the one line holding it is left out.
      if (std::any_of(ids.begin(), ids.end(), [](int32_t id) { return id >= 262144; })) {
        ++past_vocabulary;
        continue;
      }
      if (c.contains("text")) {
        ++encoded;
        CHECK(tok->Encode(c.at("text").get<std::string>()) == ids);
      }
      Result<std::string> keep = tok->Decode(ids);
      REQUIRE(keep.ok());
      CHECK(*keep == c.at("decode").get<std::string>());
    }
    CHECK(past_vocabulary == 1);
    CHECK(encoded > 200);
  }
}

TEST_CASE("the real Gemma 3 270M GGUF dequantizes as gguf-py does", "[gguf]") {
  TEMPER_REQUIRE_REAL_GEMMA3();
  const GgufFile real = OpenGguf(::temper::testing::RealGemma3GgufPath().string());
  const json fingerprint = json::parse(ReadText(kDir + "/gemma3-270m-fingerprint.json"));
  for (const json& entry : fingerprint.at("tensors")) {
    const std::string name = entry.at("name");
    INFO("tensor " << name);
    const GgufTensorInfo* t = real.FindTensor(name);
    REQUIRE(t != nullptr);
    CHECK(GgmlTypeInfo(static_cast<uint32_t>(t->type))->name == entry.at("type").get<std::string>());
    std::vector<float> values(t->elements);
    REQUIRE(DequantizeToF32(t->type, real.TensorData(*t), values).ok());
    const auto first = entry.at("first").get<std::vector<double>>();
    for (size_t i = 0; i < first.size(); ++i) CHECK(values[i] == static_cast<float>(first[i]));
    double sum = 0, abs_sum = 0;
    for (float v : values) {
      sum += v;
      abs_sum += std::fabs(v);
    }
    // fp64 sums of the same fp32 values, summed in another order (numpy's pairwise).
    CHECK(sum == Approx(entry.at("sum").get<double>()).epsilon(1e-9).margin(1e-9 * abs_sum));
    CHECK(abs_sum == Approx(entry.at("abs_sum").get<double>()).epsilon(1e-9));
  }

  Result<GgufBf16Tensors> tensors = GgufGemma3Tensors(real);
  REQUIRE(tensors.ok());
  CHECK(tensors->tensors.size() == 2 + 18 * 13);
  CHECK(tensors->storage.bytes().size() == 2 * uint64_t{268098176});
  CHECK(tensors->tensors.front().name == "model.embed_tokens.weight");
  CHECK(tensors->tensors.front().shape == std::vector<int64_t>{262144, 640});
}

}  // namespace
}  // namespace temper::engine
