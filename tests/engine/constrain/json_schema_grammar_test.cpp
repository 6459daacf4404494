#include "engine/constrain/json_schema_grammar.h"

#include <random>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "engine/constrain/grammar_matches.h"
#include "engine/constrain/token_mask.h"
#include "engine/gzip_file.h"

namespace temper::engine {
namespace {

using testing::Matches;

using json = nlohmann::ordered_json;

Grammar Compiled(const json& schema) {
  auto g = JsonSchemaGrammar(schema);
  INFO(g.status().ToString());
  REQUIRE(g.ok());
  return std::move(*g);
}

const json kToolArgs = json::parse(R"({
  "type": "object",
  "description": "a Worker's shell call",
  "properties": {
    "command": {"type": "string"},
    "timeout": {"type": "integer"},
    "sudo": {"type": "boolean"},
    "mode": {"enum": ["check", "apply"]}
  },
  "required": ["command", "mode"]
})");

TEST_CASE("a JSON schema's grammar takes exactly the texts the schema accepts", "[constrain]") {
  const Grammar g = Compiled(kToolArgs);
  for (const char* ok :
       {R"({"command":"ls -l /etc","mode":"check"})", R"({"command": "x", "timeout": 30, "mode": "apply"})",
        R"({"command":"a \"q\" \\ \u00e9 é","sudo":false,"mode":"check"})",
        R"({"command":"","timeout":-7,"sudo":true,"mode":"apply"})"}) {
    INFO(ok);
    CHECK(Matches(g, ok));
    CHECK(json::accept(ok));
  }
  for (const char* bad :
       {R"({})", R"({"mode":"check"})", R"({"command":1,"mode":"check"})", R"({"command":"x","mode":"delete"})",
        R"({"command":"x","mode":"check","extra":1})", R"({"mode":"check","command":"x"})",
        R"({"command":"x","mode":"check")", R"({"command":"x\q","mode":"check"})", R"({"command":"x",,"mode":"check"})",
        R"({"command":"x","timeout":01,"mode":"check"})", "{\"command\":\"tab\there\",\"mode\":\"check\"}",
        R"( {"command":"x","mode":"check"})", "{\"command\":\"\xc3(\",\"mode\":\"check\"}",
        "{\"command\":\"\xed\xa0\x80\",\"mode\":\"check\"}", "{\"command\":\"<|x\",\"mode\":\"check\"}",
        "{\"command\":\"x<turn|>\",\"mode\":\"check\"}"}) {
    INFO(bad);
    CHECK_FALSE(Matches(g, bad));
  }
}

TEST_CASE("arrays, alternatives, constants and any JSON value", "[constrain]") {
  const Grammar list = Compiled(json::parse(R"({"type":"array","items":{"type":"integer"},"minItems":1})"));
  CHECK(Matches(list, "[1, 2,3]"));
  CHECK_FALSE(Matches(list, "[]"));
  CHECK_FALSE(Matches(list, "[1,]"));
  const Grammar maybe = Compiled(json::parse(R"({"anyOf":[{"type":"string"},{"type":"null"}]})"));
  CHECK(Matches(maybe, "null"));
  CHECK(Matches(maybe, R"("s")"));
  CHECK_FALSE(Matches(maybe, "1"));
  const Grammar numbers = Compiled(json::parse(R"({"type":["number","boolean"]})"));
  for (const char* ok : {"0", "-1.5", "2e10", "3.25E-2", "true"}) CHECK(Matches(numbers, ok));
  for (const char* bad : {"1.", ".5", "+1", "--1", "1e"}) CHECK_FALSE(Matches(numbers, bad));
  const Grammar any = Compiled(json::object());
  CHECK(Matches(any, R"({"a":[1,{"b":null}],"c":"\u00e9","d":-0.5})"));
  CHECK_FALSE(Matches(any, R"({"a":})"));
  const Grammar fixed = Compiled(json::parse(R"({"const":{"k":[1,"two"]}})"));
  CHECK(Matches(fixed, R"({"k":[1,"two"]})"));
  CHECK_FALSE(Matches(fixed, R"({"k":[1,"three"]})"));
}

TEST_CASE("string lengths: minLength and maxLength count characters, and a required string starts with a non-space",
          "[constrain]") {
  const Grammar g = Compiled(json::parse(R"({"type":"string","minLength":1,"maxLength":3})"));
  for (const char* ok : {R"("a")", R"("abc")", "\"\xc3\xa9t\xc3\xa9\"", R"("a\n")", R"("a\u00e9b")", R"("a  ")"}) {
    INFO(ok);
    CHECK(Matches(g, ok));
  }
  for (const char* bad : {R"("")", R"("abcd")", R"(" a")", R"("\na")", "\"\xc3\xa9t\xc3\xa9s\""}) {
    INFO(bad);
    CHECK_FALSE(Matches(g, bad));
  }
  const Grammar at_most = Compiled(json::parse(R"({"type":"string","maxLength":2})"));
  CHECK(Matches(at_most, R"("")"));
  CHECK(Matches(at_most, R"(" x")"));
  CHECK_FALSE(Matches(at_most, R"("xyz")"));
  for (const char* schema :
       {R"({"type":"string","maxLength":-1})", R"({"type":"string","maxLength":"3"})",
        R"({"type":"string","maxLength":100000})", R"({"type":"string","minLength":4,"maxLength":3})"}) {
    INFO(schema);
    CHECK_FALSE(JsonSchemaGrammar(json::parse(schema)).ok());
  }
}

TEST_CASE("a schema keyword the grammar cannot honour is refused by path", "[constrain]") {
  CHECK(JsonSchemaGrammar(json::parse(R"({"type":"string","pattern":"^a"})")).status().message() ==
        "schema: 'pattern' is not supported");
  CHECK(JsonSchemaGrammar(json::parse(R"({"type":"object","properties":{"cmd":{"type":"string","format":"uri"}}})"))
            .status()
            .message() == "schema/properties/cmd: 'format' is not supported");
  CHECK(JsonSchemaGrammar(json::parse(R"({"type":"object","properties":{"a":{}},"required":["b"]})"))
            .status()
            .message() == R"(schema/required: "b" is not one of the properties)");
  CHECK(JsonSchemaGrammar(json::parse(R"({"type":"text"})")).status().message() ==
        "schema/type: 'text' is not a JSON schema type");
  CHECK_FALSE(JsonSchemaGrammar(json::parse(R"({"$ref":"#/$defs/x"})")).ok());
}

// The Gemma 3 tokenizer (262,144 ids), once per process: every case on it is one TEST_CASE.
const Tokenizer& Gemma3() {
  static const Tokenizer tokenizer = [] {
    Result<std::string> text =
        testing::ReadGzipFile(std::string(TEMPER_TEST_DATA_DIR) + "/tokenizer/gemma3-tokenizer.json.gz");
    if (!text.ok()) FAIL(text.status().ToString());
    Result<Tokenizer> tok = Tokenizer::FromJson(*text);
    if (!tok.ok()) FAIL(tok.status().ToString());
    return std::move(tok).value();
  }();
  return tokenizer;
}

TEST_CASE("token masks over the 262K vocabulary: every allowed token fits, and no valid text is blocked",
          "[constrain]") {
  const Tokenizer& tok = Gemma3();
  const int32_t end = *tok.TokenToId("<end_of_turn>");
  auto vocabulary = std::make_shared<const TokenVocabulary>(TokenVocabulary::FromTokenizer(tok, {end}).value());
  auto grammar = std::make_shared<const Grammar>(Compiled(kToolArgs));
  CHECK(TokenBytes(tok, *tok.TokenToId("<0x0A>")) == "\n");
  CHECK_FALSE(TokenBytes(tok, end).has_value());

  // Complete: the tokens of a valid text are each allowed where they come, and the end after it.
  const std::string text = R"({"command": "grep -E '^TMOUT=' /etc/profile.d/*.sh", "timeout": 60, "mode": "check"})";
  auto masks = std::make_shared<GrammarMasks>(grammar, vocabulary);
  GrammarConstraint valid(masks);
  for (int32_t id : tok.Encode(text)) {
    INFO("token " << id << " " << *TokenBytes(tok, id));
    REQUIRE(TokenAllowed(valid.Allowed(), id));
    REQUIRE(valid.Accept(id).ok());
  }
  CHECK(valid.Complete());
  CHECK(TokenAllowed(valid.Allowed(), end));

  // Sound: a "model" that picks any allowed token never breaks the grammar; the end token is
  // offered only once the text is whole, and what it ends parses and keeps to the schema.
  std::mt19937_64 rng(7);
  int completed = 0;
  for (int run = 0; run < 20; ++run) {
    GrammarConstraint c(masks);
    std::string out;
    for (int step = 0; step < 60; ++step) {
      const TokenBits& bits = c.Allowed();
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < static_cast<int32_t>(vocabulary->size()); ++id) {
        if (TokenAllowed(bits, id)) allowed.push_back(id);
      }
      REQUIRE_FALSE(allowed.empty());
      // The end whenever offered, else short tokens mostly: a random walk that ever finishes.
      int32_t pick = allowed[rng() % allowed.size()];
      if (TokenAllowed(bits, end)) pick = end;
      for (int tries = 0; tries < 8 && vocabulary->bytes(pick) && vocabulary->bytes(pick)->size() > 2; ++tries) {
        pick = allowed[rng() % allowed.size()];
      }
      REQUIRE(c.Accept(pick).ok());
      if (pick == end) {
        json parsed = json::parse(out);  // throws (fails the case) on anything but JSON
        CHECK(parsed.contains("command"));
        CHECK((parsed["mode"] == "check" || parsed["mode"] == "apply"));
        ++completed;
        break;
      }
      out += *vocabulary->bytes(pick);
    }
  }
  CHECK(completed > 0);
}

TEST_CASE("masks for a counted string over the 262K vocabulary: random walks write whole values within its length",
          "[constrain]") {
  const Tokenizer& tok = Gemma3();
  const int32_t end = *tok.TokenToId("<end_of_turn>");
  auto vocabulary = std::make_shared<const TokenVocabulary>(TokenVocabulary::FromTokenizer(tok, {end}).value());
  auto grammar = std::make_shared<const Grammar>(Compiled(json::parse(
      R"({"type":"object","properties":{"lesson":{"type":"string","minLength":1,"maxLength":24}},"required":["lesson"]})")));
  auto masks = std::make_shared<GrammarMasks>(grammar, vocabulary);
  std::mt19937_64 rng(3);
  for (int run = 0; run < 12; ++run) {
    GrammarConstraint c(masks);
    std::string out;
    bool ended = false;
    for (int step = 0; step < 80 && !ended; ++step) {
      const TokenBits& bits = c.Allowed();
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < static_cast<int32_t>(vocabulary->size()); ++id) {
        if (TokenAllowed(bits, id)) allowed.push_back(id);
      }
      REQUIRE_FALSE(allowed.empty());
      const int32_t pick = TokenAllowed(bits, end) ? end : allowed[rng() % allowed.size()];
      REQUIRE(c.Accept(pick).ok());
      if (pick == end) {
        ended = true;
      } else {
        out += *vocabulary->bytes(pick);
      }
    }
    INFO(out);
    REQUIRE(ended);  // the length bound closes the string: no walk runs on
    const nlohmann::json parsed = nlohmann::json::parse(out);
    const std::string lesson = parsed["lesson"].get<std::string>();
    // Characters, not bytes.
    size_t chars = 0;
    for (unsigned char ch : lesson) chars += (ch & 0xc0) != 0x80;
    CHECK(chars >= 1);
    CHECK(chars <= 24);
    CHECK(lesson[0] != ' ');
  }
}

}  // namespace
}  // namespace temper::engine
