#include "engine/tokenizer/stream_decoder.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace temper::engine {
namespace {

// The chat-format test tokenizer: byte fallback, one token per printable ASCII character.
const Tokenizer& Tok() {
  static const Tokenizer tokenizer = [] {
    std::ifstream in(std::string(TEMPER_TEST_DATA_DIR) + "/tokenizer/gemma4-chat-test-tokenizer.json");
    std::stringstream ss;
    ss << in.rdbuf();
    Result<Tokenizer> tok = Tokenizer::FromJson(ss.str());
    if (!tok.ok()) FAIL(tok.status().ToString());
    return std::move(tok).value();
  }();
  return tokenizer;
}

// Streams `ids` and returns the pieces emitted, the last one from Finish().
std::vector<std::string> Stream(const std::vector<int32_t>& ids, bool skip_special = false) {
  StreamDecoder stream(Tok(), skip_special);
  std::vector<std::string> pieces;
  for (int32_t id : ids) pieces.push_back(stream.Push(id).value());
  pieces.push_back(stream.Finish().value());
  return pieces;
}

std::string Join(const std::vector<std::string>& pieces) {
  std::string all;
  for (const auto& p : pieces) all += p;
  return all;
}

TEST_CASE("StreamDecoder holds back a character until its last byte arrives", "[stream_decoder]") {
  const std::string text = "a\xE2\x82\xAC b \xF0\x9F\x98\x80!";  // "a€ b 😀!": multi-byte characters take byte fallback
  const std::vector<int32_t> ids = Tok().Encode(text);
  REQUIRE(ids.size() == 12);
  const std::vector<std::string> pieces = Stream(ids);
  CHECK(pieces ==
        std::vector<std::string>{"a", "", "", "\xE2\x82\xAC", " ", "b", " ", "", "", "", "\xF0\x9F\x98\x80", "!", ""});
  CHECK(Join(pieces) == Tok().Decode(ids).value());
}

TEST_CASE("StreamDecoder flushes an incomplete character at the end and can skip special tokens", "[stream_decoder]") {
  const int32_t e2 = Tok().RequireToken("<0xE2>").value();
  const int32_t turn_close = Tok().RequireToken("<turn|>").value();
  CHECK(Stream({e2}) == std::vector<std::string>{"", "\xEF\xBF\xBD"});
  const std::vector<int32_t> ids = {Tok().RequireToken("o").value(), Tok().RequireToken("k").value(), turn_close};
  CHECK(Join(Stream(ids)) == "ok<turn|>");
  CHECK(Join(Stream(ids, /*skip_special=*/true)) == "ok");

  StreamDecoder stream(Tok());
  Result<std::string> bad = stream.Push(100000);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace temper::engine
