// The grammar of Gemma 3's JSON tool calls: only the tools offered, only arguments that keep to
// their schemas; with text allowed, text or a call and never something between; and what it lets a
// model write over the real Gemma 3 vocabulary, Gemma 3's reply parser reads as the grammar meant.
#include "engine/constrain/json_tool_call_grammar.h"

#include <algorithm>
#include <random>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "engine/constrain/grammar_matches.h"
#include "engine/constrain/token_mask.h"
#include "engine/gemma3_tokenizer.h"

namespace temper::engine {
namespace {

using testing::Matches;

using json = nlohmann::ordered_json;

std::vector<ToolSchema> Tools() {
  return {
      {"run_command", json::parse(R"({"type": "object", "properties": {"command": {"type": "string"},
                                      "timeout": {"type": "integer", "minimum": 1}}, "required": ["command"]})")},
      {"set_limit", json::parse(R"({"type": "object", "properties": {"value": {"type": "integer"},
                                    "mode": {"enum": ["soft", "hard"]}}, "required": ["value", "mode"]})")},
      {"finish", nullptr},
  };
}

const std::string kRun = R"({"name":"run_command","arguments":{"command":"sshd -t"}})";
const std::string kRunSpaced = R"({"name": "run_command", "arguments": {"command": "sshd -t", "timeout": 30}})";
const std::string kLimit = R"({"name":"set_limit","arguments":{"value":-3,"mode":"hard"}})";
const std::string kFinish = R"({"name":"finish","arguments":{}})";

TEST_CASE("the JSON tool-call grammar takes calls of the tools offered with arguments that keep to their schemas",
          "[constrain]") {
  Result<Grammar> g = JsonToolCallGrammar(Tools(), {.allow_text = false, .allow_several = true});
  INFO(g.status().ToString());
  REQUIRE(g.ok());
  for (const std::string& ok : {kRun, kRunSpaced, kLimit, kFinish, "[" + kRun + "," + kFinish + "]",
                                "[" + kRun + ", " + kLimit + "]", "[" + kFinish + "]"}) {
    INFO(ok);
    CHECK(Matches(*g, ok));
  }
  for (const std::string& bad : {
           std::string("plain text"),
           std::string(""),
           std::string(R"({"name":"rm","arguments":{}})"),                                    // not a tool offered
           std::string(R"({"name":"run_command","arguments":{}})"),                           // required missing
           std::string(R"({"name":"run_command","arguments":{"command":"x","y":1}})"),        // not a property
           std::string(R"({"name":"run_command","arguments":{"command":"x","timeout":0}})"),  // below minimum
           std::string(R"({"name":"set_limit","arguments":{"value":1,"mode":"medium"}})"),    // not in the enum
           std::string(R"({"arguments":{},"name":"finish"})"),                                // name first
           std::string(R"({"name":"finish","arguments":{},"extra":1})"),                      // more than a call
           " " + kRun,                                                                        // leading space
           kRun + " and then text",
           std::string("[]"),
       }) {
    INFO(bad);
    CHECK_FALSE(Matches(*g, bad));
  }
  Result<Grammar> one = JsonToolCallGrammar(Tools(), {.allow_text = false, .allow_several = false});
  REQUIRE(one.ok());
  CHECK(Matches(*one, kRun));
  CHECK_FALSE(Matches(*one, "[" + kRun + "]"));
}

TEST_CASE("with text allowed, a reply is text or a whole call, never a broken call", "[constrain]") {
  Result<Grammar> g = JsonToolCallGrammar(Tools(), {.allow_text = true, .allow_several = false});
  REQUIRE(g.ok());
  for (const std::string& ok : {kRun, kFinish, std::string("The service is fine."), std::string(""),
                                std::string("Run {\"name\": \"x\"} later"), std::string("a\n\n{b}")}) {
    INFO(ok);
    CHECK(Matches(*g, ok));
  }
  for (const std::string& bad :
       {std::string(R"({"name":"rm","arguments":{}})"), std::string("{not json}"), std::string("[1, 2]"),
        std::string(" leading space"), std::string("\n" + kRun), "[" + kRun + "]"}) {
    INFO(bad);
    CHECK_FALSE(Matches(*g, bad));
  }
}

TEST_CASE("a tool the JSON grammar cannot honour is refused, named", "[constrain]") {
  CHECK(JsonToolCallGrammar({}).status().message() == "tool calls need at least one tool to call");
  std::vector<ToolSchema> bad = {{"run", json::parse(R"({"type": "object", "properties": {"n":
                                                       {"type": "integer", "multipleOf": 2}}})")}};
  CHECK(JsonToolCallGrammar(bad).status().message() ==
        "tools[0] 'run'.parameters/properties/n: 'multipleOf' is not supported");
  bad = {{"run", json::parse(R"({"type": "string"})")}};
  CHECK_THAT(JsonToolCallGrammar(bad).status().message(), Catch::Contains("must be an object schema"));
  bad = {{"run \"x\"", nullptr}};
  CHECK_THAT(JsonToolCallGrammar(bad).status().message(), Catch::Contains("may hold only letters"));
}

// A "model" that takes random allowed tokens, short ones mostly, and the end token whenever
// offered, within `budget` tokens (drawing again from the tokens that fit when a draw does not).
std::vector<int32_t> RandomWalk(const std::shared_ptr<GrammarMasks>& masks, int32_t end, std::mt19937_64& rng,
                                int64_t budget) {
  const TokenVocabulary& words = masks->vocabulary();
  GrammarConstraint c(masks);
  std::vector<int32_t> ids;
  auto pick_from = [&](const TokenBits& bits, bool prefer_end) {
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < static_cast<int32_t>(words.size()); ++id) {
      if (TokenAllowed(bits, id)) allowed.push_back(id);
    }
    REQUIRE_FALSE(allowed.empty());
    if (prefer_end && TokenAllowed(bits, end)) return end;
    int32_t pick = allowed[rng() % allowed.size()];
    for (int tries = 0; tries < 8 && words.bytes(pick) && words.bytes(pick)->size() > 3; ++tries) {
      pick = allowed[rng() % allowed.size()];
    }
    return pick;
  };
  while (static_cast<int64_t>(ids.size()) < budget) {
    const int64_t left = budget - static_cast<int64_t>(ids.size());
    // Free text could end after any token: end it only sometimes, so that walks also write some.
    int32_t pick = pick_from(c.Allowed(), rng() % 4 == 0);
    Result<bool> taken = c.AcceptWithin(pick, left);
    REQUIRE(taken.ok());
    if (!*taken) {
      pick = pick_from(c.AllowedWithin(left), true);
      REQUIRE(c.Accept(pick).ok());
    }
    ids.push_back(pick);
    const std::vector<int32_t>& ends = words.end_tokens();
    if (std::find(ends.begin(), ends.end(), pick) != ends.end()) break;  // the scheduler stops at any
  }
  return ids;
}

TEST_CASE(
    "JSON tool-call masks over Gemma 3's 262K vocabulary: random walks write whole calls of the tools offered, or "
    "text, and Gemma 3's parser reads them so",
    "[constrain][gemma3]") {
  const Tokenizer& tok = testing::Gemma3Tokenizer();
  const ChatFormat& format = testing::Gemma3Format();
  const int32_t end = *tok.TokenToId("<end_of_turn>");
  const std::vector<int32_t> stops = format.stop_ids();
  Result<TokenVocabulary> words = TokenVocabulary::FromTokenizer(tok, format.stop_ids());
  REQUIRE(words.ok());
  auto vocabulary = std::make_shared<const TokenVocabulary>(std::move(*words));

  auto required = std::make_shared<GrammarMasks>(
      std::make_shared<const Grammar>(JsonToolCallGrammar(Tools(), {.allow_text = false}).value()), vocabulary);
  // A real call, as the tokenizer encodes it, is allowed token by token, and then only the end.
  GrammarConstraint valid(required);
  for (int32_t id : tok.Encode(kRunSpaced)) {
    INFO("token " << id << " '" << tok.IdToToken(id).value_or("?") << "'");
    REQUIRE(TokenAllowed(valid.Allowed(), id));
    REQUIRE(valid.Accept(id).ok());
  }
  CHECK(TokenAllowed(valid.Allowed(), end));
  // No special token but the stop tokens is ever allowed: a call cannot open a turn.
  CHECK_FALSE(TokenAllowed(valid.Allowed(), *tok.TokenToId("<start_of_turn>")));

  std::mt19937_64 rng(7);
  for (int run = 0; run < 6; ++run) {
    INFO("required, run " << run);
    std::vector<int32_t> ids = RandomWalk(required, end, rng, 40);
    REQUIRE(std::count(stops.begin(), stops.end(), ids.back()) == 1);
    Result<ModelReply> reply = format.ParseReply(ids);
    REQUIRE(reply.ok());
    INFO(reply->content);
    REQUIRE_FALSE(reply->tool_calls.empty());
    for (const ToolCall& call : reply->tool_calls) {
      CHECK((call.name == "run_command" || call.name == "set_limit" || call.name == "finish"));
      if (call.name == "run_command") CHECK(call.arguments["command"].is_string());
    }
  }

  auto text_or_call = std::make_shared<GrammarMasks>(
      std::make_shared<const Grammar>(
          JsonToolCallGrammar(Tools(), {.allow_text = true, .allow_several = false}).value()),
      vocabulary);
  int calls = 0, texts = 0;
  for (int run = 0; run < 12; ++run) {
    INFO("auto, run " << run);
    std::vector<int32_t> ids = RandomWalk(text_or_call, end, rng, 24);
    Result<ModelReply> reply = format.ParseReply(ids);
    REQUIRE(reply.ok());
    const std::string text = tok.Decode(ids).value();
    INFO(text);
    const size_t first = text.find_first_not_of(" \t\n\r\f\v");
    if (first != std::string::npos && text[first] == '{') {
      CHECK(reply->tool_calls.size() == 1);  // a reply that starts a call is one
      ++calls;
    } else {
      CHECK(reply->tool_calls.empty());
      ++texts;
    }
  }
  CHECK(calls + texts == 12);
}

}  // namespace
}  // namespace temper::engine
