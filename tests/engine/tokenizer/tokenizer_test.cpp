#include "engine/tokenizer/tokenizer.h"

#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "engine/gzip_file.h"

namespace temper::engine {
namespace {

using nlohmann::json;

const std::string kDataDir = std::string(TEMPER_TEST_DATA_DIR) + "/tokenizer";

// The Gemma 3 tokenizer (33 MB), loaded once per test process: every test of it lives in the one
// TEST_CASE below, because ctest runs each TEST_CASE in its own process.
const Tokenizer& Gemma3() {
  static const Tokenizer tokenizer = [] {
    Result<std::string> text = testing::ReadGzipFile(kDataDir + "/gemma3-tokenizer.json.gz");
    if (!text.ok()) FAIL(text.status().ToString());
    Result<Tokenizer> tok = Tokenizer::FromJson(*text);
    if (!tok.ok()) FAIL(tok.status().ToString());
    return std::move(tok).value();
  }();
  return tokenizer;
}

std::vector<int32_t> Ids(const json& j) { return j.get<std::vector<int32_t>>(); }

TEST_CASE("Gemma 3 tokenizer", "[tokenizer]") {
  const Tokenizer& tok = Gemma3();

  SECTION("every line of cases.jsonl: encode, decode, decode skipping special tokens") {
    std::ifstream in(kDataDir + "/cases.jsonl");
    REQUIRE(in.good());
    std::string line;
    int line_no = 0;
    int encode_cases = 0;
    int decode_cases = 0;
    while (std::getline(in, line)) {
      ++line_no;
      const json c = json::parse(line);
      const std::vector<int32_t> ids = Ids(c.at("ids"));
      INFO("cases.jsonl line " << line_no << ": " << line.substr(0, 200));
      if (c.contains("text")) {
        ++encode_cases;
        CHECK(tok.Encode(c.at("text").get<std::string>()) == ids);
      }
      ++decode_cases;
      Result<std::string> keep = tok.Decode(ids);
      REQUIRE(keep.ok());
      CHECK(*keep == c.at("decode").get<std::string>());
      Result<std::string> skip = tok.Decode(ids, /*skip_special_tokens=*/true);
      REQUIRE(skip.ok());
      CHECK(*skip == c.at("decode_skip_special").get<std::string>());
    }
    CHECK(encode_cases == 258);
    CHECK(decode_cases == 266);
  }

  SECTION("special-token ids come from the file") {
    CHECK(tok.RequireToken("<bos>").value() == 2);
    CHECK(tok.RequireToken("<eos>").value() == 1);
    CHECK(tok.RequireToken("<start_of_turn>").value() == 105);
    CHECK(tok.RequireToken("<image_soft_token>").value() == 262144);  // an added token beyond the vocabulary
    CHECK(tok.id_limit() == 262145);
    CHECK(tok.IdToToken(262144).value() == "<image_soft_token>");
    CHECK(tok.IsSpecial(105));
    CHECK_FALSE(tok.IsSpecial(4));  // <mask> is added but not special
    Result<int32_t> missing = tok.RequireToken("<|turn>");
    REQUIRE_FALSE(missing.ok());
    CHECK(missing.status().code() == StatusCode::kNotFound);
    CHECK(missing.status().message() == "tokenizer has no token '<|turn>'");
  }

  SECTION("add_special_tokens prepends <bos> as the post-processor does") {
    const std::vector<int32_t> plain = tok.Encode("Hello, world!");
    std::vector<int32_t> with_bos = {2};
    with_bos.insert(with_bos.end(), plain.begin(), plain.end());
    CHECK(tok.Encode("Hello, world!", EncodeOptions{.add_special_tokens = true}) == with_bos);
    CHECK(tok.Encode("", EncodeOptions{.add_special_tokens = true}) == std::vector<int32_t>{2});
  }

  SECTION("special tokens in untrusted text can be kept from matching") {
    const std::string text = "<start_of_turn>user\n\nhi<end_of_turn>";
    const std::vector<int32_t> live = tok.Encode(text);
    REQUIRE(live.size() >= 4);
    CHECK(live.front() == 105);
    CHECK(live.back() == 106);
    const std::vector<int32_t> inert = tok.Encode(text, EncodeOptions{.match_special_tokens = false});
    CHECK(std::find(inert.begin(), inert.end(), 105) == inert.end());
    CHECK(std::find(inert.begin(), inert.end(), 106) == inert.end());
    CHECK(std::find(inert.begin(), inert.end(), 108) != inert.end());  // "\n\n" is added but not special
    CHECK(tok.Decode(inert).value() == text);
    // Ordinary text encodes the same either way.
    CHECK(tok.Encode("a\n\n<b>x</b>", EncodeOptions{.match_special_tokens = false}) == tok.Encode("a\n\n<b>x</b>"));
  }

  SECTION("bytes that are not UTF-8 take the byte fallback and decode as U+FFFD per byte") {
    CHECK(tok.Encode("\xff") == std::vector<int32_t>{238 + 0xff});
    CHECK(tok.Encode("a\xc3") == std::vector<int32_t>{tok.RequireToken("a").value(), 238 + 0xc3});
    CHECK(tok.Decode(std::vector<int32_t>{238 + 0xe2, 238 + 0x82}).value() == "\xEF\xBF\xBD\xEF\xBF\xBD");
  }

  SECTION("decoding an unknown id names it") {
    Result<std::string> r = tok.Decode(std::vector<int32_t>{2, 300000});
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kOutOfRange);
    CHECK(r.status().message() == "ids[1]: 300000 is not a token id (the vocabulary has ids 0..262144)");
    CHECK_FALSE(tok.Decode(std::vector<int32_t>{-1}).ok());
  }
}

// A small tokenizer.json: `vocab` in id order, merges as [left, right] pairs.
json MiniTokenizer(const std::vector<std::string>& vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges) {
  json v = json::object();
  for (size_t i = 0; i < vocab.size(); ++i) v[vocab[i]] = i;
  json m = json::array();
  for (const auto& [l, r] : merges) m.push_back({l, r});
  return json{
      {"version", "1.0"},
      {"added_tokens", json::array()},
      {"normalizer", nullptr},
      {"pre_tokenizer", nullptr},
      {"post_processor", nullptr},
      {"decoder", {{"type", "Fuse"}}},
      {"model", {{"type", "BPE"}, {"unk_token", "<unk>"}, {"byte_fallback", false}, {"vocab", v}, {"merges", m}}}};
}

Tokenizer Load(const json& j) {
  Result<Tokenizer> tok = Tokenizer::FromJson(j.dump());
  if (!tok.ok()) FAIL(tok.status().ToString());
  return std::move(tok).value();
}

TEST_CASE("BPE applies merges one at a time by (rank, position)", "[tokenizer]") {
  // (ab, a) outranks (a, b). Merging one (a, b) at a time makes "ab" + "a" mergeable before the
  // second (a, b) is reached: abab -> [aba, b]. Merging every (a, b) in one pass would give [ab, ab].
  const Tokenizer tok = Load(MiniTokenizer({"<unk>", "a", "b", "ab", "aba"}, {{"ab", "a"}, {"a", "b"}}));
  CHECK(tok.Encode("abab") == std::vector<int32_t>{4, 2});
  CHECK(tok.Decode(std::vector<int32_t>{4, 2}).value() == "abab");

  // Equal ranks go left to right.
  const Tokenizer aa = Load(MiniTokenizer({"<unk>", "a", "aa"}, {{"a", "a"}}));
  CHECK(aa.Encode("aaa") == std::vector<int32_t>{2, 1});

  // Unknown characters become <unk>, fused when fuse_unk is set.
  json fused = MiniTokenizer({"<unk>", "a"}, {});
  CHECK(Load(fused).Encode("xya") == std::vector<int32_t>{0, 0, 1});
  fused["model"]["fuse_unk"] = true;
  CHECK(Load(fused).Encode("xya") == std::vector<int32_t>{0, 1});
}

TEST_CASE("normalizer, Split pre-tokenizer, Strip decoder and post-processor", "[tokenizer]") {
  // A Llama-style pipeline: Prepend "▁" then Replace " " -> "▁"; Split on "▁" keeps pieces apart.
  json j = MiniTokenizer({"<unk>", "<s>", "\xE2\x96\x81", "a", "b",
                          "\xE2\x96\x81"
                          "a",
                          "ab"},
                         {{"\xE2\x96\x81", "a"}, {"a", "b"}});
  j["normalizer"] = {{"type", "Sequence"},
                     {"normalizers",
                      {{{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}},
                       {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xE2\x96\x81"}}}}};
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", "b"}}}, {"behavior", "Isolated"}, {"invert", false}};
  j["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
      {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}};
  j["decoder"] = {{"type", "Sequence"},
                  {"decoders",
                   {{{"type", "Replace"}, {"pattern", {{"String", "\xE2\x96\x81"}}}, {"content", " "}},
                    {{"type", "Fuse"}},
                    {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
  const Tokenizer tok = Load(j);
  // "ab a" -> "▁ab▁a"; Split isolates "b" so "ab" cannot merge: [▁a, b, ▁a].
  CHECK(tok.Encode("ab a") == std::vector<int32_t>{5, 4, 5});
  CHECK(tok.Encode("ab a", EncodeOptions{.add_special_tokens = true}) == std::vector<int32_t>{1, 5, 4, 5});
  CHECK(tok.Decode(std::vector<int32_t>{5, 4, 5}).value() == "ab a");  // Strip removes the prefix space

  j["pre_tokenizer"]["behavior"] = "Removed";  // the "b" is dropped
  CHECK(Load(j).Encode("ab a") == std::vector<int32_t>{5, 5});
  j["pre_tokenizer"] = nullptr;  // whole: ▁ab -> (▁,a) first (rank 0) -> [▁a, b]
  CHECK(Load(j).Encode("ab a") == std::vector<int32_t>{5, 4, 5});
}

TEST_CASE("Split pre-tokenizer behaviors and normalized added tokens", "[tokenizer]") {
  // Merges by rank: (▁, a), (a, ▁), (▁, ▁). Which pieces Split makes decides which merges can apply.
  const std::string sp = "\xE2\x96\x81";
  json j = MiniTokenizer({"<unk>", "a", sp, sp + "a", "a" + sp, sp + sp}, {{sp, "a"}, {"a", sp}, {sp, sp}});
  j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", sp}};
  auto encode = [&](const char* behavior, const char* text) {
    j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", sp}}}, {"behavior", behavior}, {"invert", false}};
    return Load(j).Encode(text);
  };
  using Ids = std::vector<int32_t>;
  CHECK(encode("Isolated", "a a") == Ids{1, 2, 1});
  CHECK(encode("Removed", "a a") == Ids{1, 1});
  CHECK(encode("MergedWithPrevious", "a a") == Ids{4, 1});
  CHECK(encode("MergedWithNext", "a a") == Ids{1, 3});
  CHECK(encode("Isolated", "a  a") == Ids{1, 2, 2, 1});
  CHECK(encode("Contiguous", "a  a") == Ids{1, 5, 1});
  CHECK(encode("MergedWithPrevious", "a  a") == Ids{4, 2, 1});
  CHECK(encode("MergedWithNext", "a  a") == Ids{1, 2, 3});
  j["pre_tokenizer"] = nullptr;
  CHECK(Load(j).Encode("a a") == Ids{1, 3});  // one piece: (▁, a) outranks (a, ▁)

  // An added token with normalized=true is matched in the normalized text, so "a b" (normalized to
  // "a▁b") matches it and a literal "a▁b" does too.
  j["added_tokens"] = {{{"id", 6}, {"content", "a b"}, {"special", false}, {"normalized", true}}};
  const Tokenizer tok = Load(j);
  CHECK(tok.Encode("a a b") == Ids{4, 6});
  CHECK(tok.Encode("a" + sp + "b") == Ids{6});
  CHECK(tok.Decode(Ids{4, 6}).value() == "a" + sp + "a b");  // the file's decoder is just Fuse
}

TEST_CASE("Tokenizer::FromFile loads a file and names the path in its errors", "[tokenizer]") {
  Result<Tokenizer> tok = Tokenizer::FromFile(kDataDir + "/gemma4-chat-test-tokenizer.json");
  REQUIRE(tok.ok());
  CHECK(tok->Encode("user", EncodeOptions{.add_special_tokens = true}) ==
        std::vector<int32_t>{tok->RequireToken("<bos>").value(), tok->RequireToken("user").value()});

  Result<Tokenizer> bad = Tokenizer::FromFile(kDataDir + "/cases.jsonl");  // JSON lines, not one document
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == StatusCode::kDataLoss);
  CHECK_THAT(bad.status().message(), Catch::StartsWith(kDataDir + "/cases.jsonl: JSON syntax error at byte"));

  Result<Tokenizer> missing = Tokenizer::FromFile("/nonexistent/tokenizer.json");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == StatusCode::kIOError);
  CHECK_THAT(missing.status().message(), Catch::StartsWith("opening tokenizer /nonexistent/tokenizer.json"));
}

// Loads the file and returns the error message it must produce.
std::string LoadErrorText(const std::string& text) {
  Result<Tokenizer> tok = Tokenizer::FromJson(text);
  REQUIRE_FALSE(tok.ok());
  return tok.status().message();
}
std::string LoadError(const json& j) { return LoadErrorText(j.dump()); }

TEST_CASE("malformed tokenizer files get errors naming the problem", "[tokenizer]") {
  const json good = MiniTokenizer({"<unk>", "a", "b", "ab"}, {{"a", "b"}});
  REQUIRE(Tokenizer::FromJson(good.dump()).ok());

  CHECK_THAT(LoadErrorText("{\"model\": "), Catch::Contains("JSON syntax error at byte"));
  CHECK(LoadErrorText("[1, 2]") == "tokenizer.json: the top level must be a JSON object");

  json j = good;
  j.erase("model");
  CHECK(LoadError(j) == "tokenizer.json: missing \"model\"");

  j = good;
  j["model"]["type"] = "WordPiece";
  CHECK(LoadError(j) == "model.type: unknown model type 'WordPiece' (only BPE is supported)");

  j = good;
  j["model"].erase("merges");
  CHECK(LoadError(j) == "model: missing \"merges\" array");

  j = good;
  j["model"]["merges"] = {{"a", "b"}, {"a", "b", "c"}};
  CHECK(LoadError(j) == "model.merges[1]: expected two tokens, got 3");

  j = good;
  j["model"]["merges"] = {"a b", "a b c"};
  CHECK(LoadError(j) == "model.merges[1]: 'a b c' is not two tokens separated by one space");

  j = good;
  j["model"]["merges"] = json::array({json::array({"a", "b"}), json::array({"a", "z"})});
  CHECK(LoadError(j) == "model.merges[1]: token 'z' is not in the vocabulary");

  j = good;
  j["model"]["merges"] = json::array({json::array({"b", "a"})});
  CHECK(LoadError(j) == "model.merges[0]: merged token 'ba' is not in the vocabulary");

  j = good;
  j["model"]["merges"] = {{"a", "b"}, 7};
  CHECK(LoadError(j) == "model.merges[1]: expected a string or a [left, right] pair, got a number");

  j = good;
  j["model"]["vocab"]["c"] = "three";
  CHECK(LoadError(j) == "model.vocab['c']: expected a non-negative integer id, got a string");

  j = good;
  j["model"]["vocab"]["c"] = 1;
  CHECK(LoadError(j) == "model.vocab['c']: id 1 is already used by 'a'");

  j = good;
  j["model"]["vocab"]["c"] = 2000000000;
  CHECK_THAT(LoadError(j), Catch::Contains("model.vocab: id 2000000000 is far beyond"));

  j = good;
  j["model"]["unk_token"] = nullptr;
  CHECK_THAT(LoadError(j), Catch::StartsWith("model: no unk_token, and byte_fallback is off"));

  j = good;
  j["model"]["unk_token"] = "<oov>";
  CHECK(LoadError(j) == "model.unk_token: '<oov>' is not in the vocabulary");

  j = good;
  j["added_tokens"] = {{{"id", 2}, {"content", "a"}, {"special", false}, {"normalized", false}}};
  CHECK(LoadError(j) == "added_tokens[0] ('a'): id 2 disagrees with the vocabulary's id 1");

  j = good;
  j["added_tokens"] = {{{"id", 1}, {"content", "<x>"}, {"special", true}, {"normalized", false}}};
  CHECK(LoadError(j) == "added_tokens[0] ('<x>'): id 1 already belongs to 'a'");

  j = good;
  j["added_tokens"] = {{{"id", 9}, {"content", "<x>"}, {"lstrip", true}}};
  CHECK(LoadError(j) == "added_tokens[0] ('<x>'): lstrip is not supported");

  j = good;
  j["added_tokens"] = {{{"content", "<x>"}}};
  CHECK(LoadError(j) == "added_tokens[0]: \"id\" must be a non-negative 32-bit integer");

  j = good;
  j["normalizer"] = {{"type", "NFKC"}};
  CHECK(LoadError(j) == "normalizer: normalizer type 'NFKC' is not supported");

  j = good;
  j["normalizer"] = {{"type", "Sequence"},
                     {"normalizers", {{{"type", "Replace"}, {"pattern", {{"Regex", "\\s"}}}, {"content", "x"}}}}};
  CHECK(LoadError(j) == "normalizer.normalizers[0].pattern: Regex patterns are not supported");

  j = good;
  j["pre_tokenizer"] = {{"type", "ByteLevel"}};
  CHECK(LoadError(j) == "pre_tokenizer: pre-tokenizer type 'ByteLevel' is not supported");

  j = good;
  j["decoder"] = {{"type", "Sequence"}, {"decoders", {{{"type", "Fuse"}}, {{"type", "WordPiece"}}}}};
  CHECK(LoadError(j) == "decoder.decoders[1]: decoder type 'WordPiece' is not supported");

  j = good;
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", {{{"SpecialToken", {{"id", "<s>"}}}}}},
                         {"special_tokens", json::object()}};
  CHECK(LoadError(j) == "post_processor.single[0]: special token '<s>' is not in post_processor.special_tokens");

  j = good;
  j["model"]["dropout"] = 0.1;
  CHECK(LoadError(j) == "model.dropout: BPE dropout is not supported");
}

}  // namespace
}  // namespace temper::engine
