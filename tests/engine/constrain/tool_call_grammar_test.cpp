#include "engine/constrain/tool_call_grammar.h"

#include <random>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "engine/constrain/grammar_matches.h"
#include "engine/constrain/token_mask.h"
#include "engine/gemma4_vocabulary.h"
#include "engine/tokenizer/chat_format.h"

namespace temper::engine {
namespace {

using testing::Matches;

using json = nlohmann::ordered_json;

// The Worker's tools, as roles/worker.cpp declares them.
std::vector<ToolSchema> WorkerLikeTools() {
  return {
      {"run_command", json::parse(R"({"type": "object", "properties": {"command": {"type": "string"}},
                                      "required": ["command"], "additionalProperties": false})")},
      {"write_file", json::parse(R"({"type": "object", "properties": {"path": {"type": "string"},
                                     "content": {"type": "string"}}, "required": ["path", "content"]})")},
      {"remove_package", json::parse(R"({"type": "object", "properties": {"packages": {"type": "array",
                                         "items": {"type": "string"}}, "purge": {"type": "boolean"}},
                                         "required": ["packages"]})")},
      {"set_limit", json::parse(R"({"type": "object", "properties": {"value": {"type": "integer"},
                                    "mode": {"enum": ["soft", "hard"]}}, "required": ["value", "mode"]})")},
      {"finish", nullptr},
  };
}

// Marker bytes written as the control tokens' text, as the reply parser reads a decoded reply.
std::string WithControlText(std::string_view marked) {
  std::string out;
  for (char c : marked) {
    const auto b = static_cast<uint8_t>(c);
    bool marker = false;
    for (const MarkerToken& m : kGemmaMarkerTokens) {
      if (m.byte == b) {
        out += m.text;
        marker = true;
      }
    }
    if (!marker) out.push_back(c);
  }
  return out;
}

const Tokenizer& Gemma4Vocabulary() {
  static const Tokenizer tokenizer = [] {
    Result<std::string> text = testing::Gemma4VocabularyTokenizerJson();
    if (!text.ok()) FAIL(text.status().ToString());
    Result<Tokenizer> tok = Tokenizer::FromJson(*text);
    if (!tok.ok()) FAIL(tok.status().ToString());
    return std::move(tok).value();
  }();
  return tokenizer;
}

const ChatFormat& Format() {
  static const ChatFormat format = ChatFormat::Create(Gemma4Vocabulary()).value();
  return format;
}

// Whether `args` keeps to the test tools' schemas (the checks the Worker makes).
void CheckKeepsToSchema(const ToolCall& call) {
  INFO(call.name << " " << call.arguments.dump());
  if (call.name == "run_command") {
    CHECK(call.arguments["command"].is_string());
  } else if (call.name == "write_file") {
    CHECK(call.arguments["path"].is_string());
    CHECK(call.arguments["content"].is_string());
  } else if (call.name == "remove_package") {
    REQUIRE(call.arguments["packages"].is_array());
    for (const auto& p : call.arguments["packages"]) CHECK(p.is_string());
    if (call.arguments.contains("purge")) CHECK(call.arguments["purge"].is_boolean());
  } else if (call.name == "set_limit") {
    CHECK(call.arguments["value"].is_number_integer());
    CHECK((call.arguments["mode"] == "soft" || call.arguments["mode"] == "hard"));
  } else {
    CHECK(call.name == "finish");
    CHECK(call.arguments.empty());
  }
}

TEST_CASE("the tool-call grammar takes Gemma's calls of the tools offered, with arguments that keep to their schemas",
          "[constrain]") {
  Result<Grammar> g = ToolCallGrammar(WorkerLikeTools());
  REQUIRE(g.ok());
  const std::string q = "\xF8", open = "\xF9", close = "\xFA";
  for (const std::string& ok : {
           open + "call:run_command{command:" + q + "grep -E '^TMOUT' /etc/profile" + q + "}" + close,
           // Arguments in the order of their names, as the chat template renders them back.
           open + "call:write_file{content:" + q + "line one\nline two\n" + q + ",path:" + q + "/etc/issue" + q + "}" +
               close,
           open + "call:remove_package{packages:[" + q + "telnet" + q + "," + q + "rsh" + q + "],purge:true}" + close,
           open + "call:remove_package{packages:[]}" + close,
           open + "call:set_limit{mode:" + q + "hard" + q + ",value:-3}" + close,
           open + "call:finish{}" + close,
           open + "call:finish{}" + close + open + "call:run_command{command:" + q + "a < b | c > d" + q + "}" + close,
       }) {
    INFO(WithControlText(ok));
    CHECK(Matches(*g, ok));
    // What the grammar takes, the reply parser reads back.
    Result<ModelReply> reply = Format().ParseReplyText(WithControlText(ok));
    INFO(reply.status().ToString());
    REQUIRE(reply.ok());
    REQUIRE_FALSE(reply->tool_calls.empty());
    for (const ToolCall& call : reply->tool_calls) CheckKeepsToSchema(call);
  }
  for (const std::string& bad : {
           std::string("plain text"),
           open + "call:rm{}" + close,                                               // not a tool offered
           open + "call:run_command{}" + close,                                      // required missing
           open + "call:run_command{command:\"ls\"}" + close,                        // JSON quotes
           open + "call:run_command{command:" + q + "ls" + q + ",extra:1}" + close,  // not a property
           open + "call:run_command{ command:" + q + "ls" + q + "}" + close,         // spaces
           open + "call:run_command{command:" + q + "echo <|x" + q + "}" + close,    // spells a control token
           open + "call:run_command{command:" + q + "x <turn|>" + q + "}" + close,   // ditto
           open + "call:set_limit{mode:" + q + "hard" + q + ",value:1.5}" + close,   // not an integer
           open + "call:set_limit{mode:" + q + "medium" + q + ",value:1}" + close,   // not in the enum
           open + "call:finish{}",                                                   // not closed
           open + "call:finish{}" + close + "and then text",                         // text after the calls
       }) {
    INFO(WithControlText(bad));
    CHECK_FALSE(Matches(*g, bad));
  }
}

// Control tokens' text written as their marker bytes.
std::string WithMarkers(std::string text) {
  for (const MarkerToken& m : kGemmaMarkerTokens) {
    for (size_t at = text.find(m.text); at != std::string::npos; at = text.find(m.text, at + 1)) {
      text.replace(at, std::string_view(m.text).size(), std::string(1, static_cast<char>(m.byte)));
    }
  }
  return text;
}

TEST_CASE("a call the grammar makes is the call the chat template renders back into the next prompt", "[constrain]") {
  // So that the prefix cache finds the model's own tokens when the Worker's next request resends
  // them: the same argument order, the same syntax.
  Result<Grammar> g = ToolCallGrammar(WorkerLikeTools());
  REQUIRE(g.ok());
  Conversation c;
  c.messages.push_back({.role = ChatRole::kUser, .content = "Fix it."});
  ChatMessage model{.role = ChatRole::kModel};
  model.tool_calls.push_back(
      {"write_file", nlohmann::json{{"path", "/etc/issue"}, {"content", "Authorized uses only.\n"}}});
  model.tool_calls.push_back({"remove_package", nlohmann::json{{"purge", true}, {"packages", {"telnet"}}}});
  c.messages.push_back(model);
  c.add_generation_prompt = false;
  Result<RenderedPrompt> rendered = Format().Render(c);
  REQUIRE(rendered.ok());
  const size_t from = rendered->text.find("<|tool_call>");
  const size_t to = rendered->text.rfind("<tool_call|>");
  REQUIRE(from != std::string::npos);
  const std::string calls = rendered->text.substr(from, to + std::string_view("<tool_call|>").size() - from);
  INFO(calls);
  CHECK(Matches(*g, WithMarkers(calls)));
}

TEST_CASE("tool parameters as clients write them: $defs and $ref, bounds, patterns, formats, maps", "[constrain]") {
  // pydantic's parameters for a tool taking a nested model: the refs resolve in this tool's schema.
  const std::vector<ToolSchema> tools = {
      {"schedule", json::parse(R"({"$defs": {"Window": {"properties": {"start": {"format": "time", "type": "string"},
          "hours": {"maximum": 12, "minimum": 1, "type": "integer"}}, "required": ["start", "hours"], "type": "object"}},
          "properties": {"host": {"format": "ipv4", "type": "string"}, "window": {"$ref": "#/$defs/Window"},
          "tag": {"pattern": "^[a-z]+\"\\\\$", "type": "string"}, "labels": {"additionalProperties": {"type": "string"},
          "type": "object"}, "retries": {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "null"}]}},
          "required": ["host", "window"], "type": "object"})")},
      {"finish", nullptr}};
  Result<Grammar> g = ToolCallGrammar(tools);
  INFO(g.status().ToString());
  REQUIRE(g.ok());
  const std::string q(1, static_cast<char>(kQuoteMarker));
  const std::string open(1, static_cast<char>(kCallOpenMarker)), close(1, static_cast<char>(kCallCloseMarker));
  const std::string window = "window:{hours:8,start:" + q + "09:00:00Z" + q + "}";
  for (const std::string& ok : {
           open + "call:schedule{host:" + q + "10.0.0.1" + q + "," + window + "}" + close,
           // Gemma's strings have no escapes: the pattern's '"' and '\' are written as they are.
           open + "call:schedule{host:" + q + "10.0.0.1" + q + ",labels:{env:" + q + "prod" + q + ",tier:" + q + "web" +
               q + "},retries:null,tag:" + q + "abc\"\\" + q + "," + window + "}" + close,
           open + "call:schedule{host:" + q + "10.0.0.1" + q + ",retries:3," + window + "}" + close,
       }) {
    INFO(WithControlText(ok));
    CHECK(Matches(*g, ok));
    Result<ModelReply> reply = Format().ParseReplyText(WithControlText(ok));
    INFO(reply.status().ToString());
    CHECK(reply.ok());
  }
  for (const std::string& bad : {
           open + "call:schedule{host:" + q + "10.0.0.256" + q + "," + window + "}" + close,
           open + "call:schedule{host:" + q + "10.0.0.1" + q + ",window:{hours:13,start:" + q + "09:00:00Z" + q + "}}" +
               close,
           open + "call:schedule{host:" + q + "10.0.0.1" + q + ",window:{hours:8,start:" + q + "9am" + q + "}}" + close,
           open + "call:schedule{host:" + q + "10.0.0.1" + q + ",tag:" + q + "abc" + q + "," + window + "}" + close,
           open + "call:schedule{host:" + q + "10.0.0.1" + q + ",retries:-1," + window + "}" + close,
           open + "call:schedule{host:" + q + "10.0.0.1" + q + ",labels:{host:1}," + window + "}" + close,
       }) {
    INFO(WithControlText(bad));
    CHECK_FALSE(Matches(*g, bad));
  }
}

TEST_CASE("a tool the grammar cannot honour is refused, named", "[constrain]") {
  CHECK_FALSE(ToolCallGrammar({}).ok());
  std::vector<ToolSchema> bad = {{"run", json::parse(R"j({"type": "object", "properties": {"cmd":
                                                       {"type": "string", "pattern": "^(?!rm)"}}})j")}};
  Result<Grammar> g = ToolCallGrammar(bad);
  REQUIRE_FALSE(g.ok());
  CHECK(g.status().message() ==
        "tools[0] 'run'.parameters/properties/cmd/pattern: lookahead '(?!' at offset 1 is not supported");
  // A $ref resolves in the tool's own parameters, not in another tool's.
  bad = {{"a", json::parse(R"({"type": "object", "$defs": {"P": {"type": "string"}}, "properties": {}})")},
         {"b", json::parse(R"({"type": "object", "properties": {"p": {"$ref": "#/$defs/P"}}})")}};
  CHECK(ToolCallGrammar(bad).status().message() ==
        "tools[1] 'b'.parameters/properties/p/$ref: '#/$defs/P' points to nothing in the schema");
  bad = {{"run", json::parse(R"({"type": "string"})")}};
  CHECK_THAT(ToolCallGrammar(bad).status().message(), Catch::Contains("must be an object schema"));
  bad = {{"run me", nullptr}};
  CHECK_THAT(ToolCallGrammar(bad).status().message(), Catch::Contains("may hold only letters"));
}

// A "model" that takes random allowed tokens, short ones mostly (so that it ever finishes), and the
// end token whenever offered; with `budget` tokens at most, drawing again from the fitting tokens
// when a draw does not fit (as the scheduler does). Returns the generated ids, end token included.
std::vector<int32_t> RandomWalk(const std::shared_ptr<GrammarMasks>& masks, int32_t end, std::mt19937_64& rng,
                                int64_t budget) {
  const TokenVocabulary& words = masks->vocabulary();
  GrammarConstraint c(masks);
  std::vector<int32_t> ids;
  auto pick_from = [&](const TokenBits& bits) {
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < static_cast<int32_t>(words.size()); ++id) {
      if (TokenAllowed(bits, id)) allowed.push_back(id);
    }
    REQUIRE_FALSE(allowed.empty());
    if (TokenAllowed(bits, end)) return end;
    int32_t pick = allowed[rng() % allowed.size()];
    for (int tries = 0; tries < 8 && words.bytes(pick) && words.bytes(pick)->size() > 3; ++tries) {
      pick = allowed[rng() % allowed.size()];
    }
    return pick;
  };
  while (static_cast<int64_t>(ids.size()) < budget) {
    const int64_t left = budget - static_cast<int64_t>(ids.size());
    int32_t pick = pick_from(c.Allowed());
    Result<bool> taken = c.AcceptWithin(pick, left);
    REQUIRE(taken.ok());
    if (!*taken) {
      pick = pick_from(c.AllowedWithin(left));
      REQUIRE(c.Accept(pick).ok());
    }
    ids.push_back(pick);
    if (pick == end) break;
  }
  return ids;
}

TEST_CASE(
    "tool-call masks over Gemma's 262K vocabulary: random walks write calls that parse and keep to the "
    "schemas, and a budget always ends them in time",
    "[constrain]") {
  const Tokenizer& tok = Gemma4Vocabulary();
  const int32_t end = *tok.TokenToId("<|tool_response>");
  Result<TokenVocabulary> words = TokenVocabulary::FromTokenizer(tok, {end}, kGemmaMarkerTokens);
  REQUIRE(words.ok());
  auto vocabulary = std::make_shared<const TokenVocabulary>(std::move(*words));
  // The byte-fallback tokens of marker bytes are no text; the marker tokens are their bytes.
  CHECK_FALSE(vocabulary->bytes(*tok.TokenToId("<0xF8>")).has_value());
  CHECK(vocabulary->bytes(*tok.TokenToId("<|\"|>")) == "\xF8");
  auto grammar = std::make_shared<const Grammar>(ToolCallGrammar(WorkerLikeTools()).value());
  auto masks = std::make_shared<GrammarMasks>(grammar, vocabulary);

  // A real call, encoded with the control tokens matched, is allowed token by token.
  const std::string call =
      "<|tool_call>call:run_command{command:<|\"|>sed -i 's/^#\\?TMOUT=.*/TMOUT=600/' "
      "/etc/profile<|\"|>}<tool_call|>";
  GrammarConstraint valid(masks);
  for (int32_t id : tok.Encode(call)) {
    INFO("token " << id << " '" << tok.IdToToken(id).value_or("?") << "'");
    REQUIRE(TokenAllowed(valid.Allowed(), id));
    REQUIRE(valid.Accept(id).ok());
  }
  CHECK(TokenAllowed(valid.Allowed(), end));

  std::mt19937_64 rng(11);
  for (int64_t budget : {int64_t{24}, int64_t{40}, int64_t{60}}) {
    int ended = 0;
    for (int run = 0; run < 6; ++run) {
      std::vector<int32_t> ids = RandomWalk(masks, end, rng, budget);
      INFO("budget " << budget << ", run " << run);
      // The shortest call (`finish{}`) is 11 tokens: every budget here can end in time.
      REQUIRE(ids.back() == end);
      CHECK(static_cast<int64_t>(ids.size()) <= budget);
      Result<ModelReply> reply = Format().ParseReply(ids);
      INFO(reply.status().ToString());
      REQUIRE(reply.ok());
      REQUIRE_FALSE(reply->tool_calls.empty());
      for (const ToolCall& c : reply->tool_calls) CheckKeepsToSchema(c);
      ++ended;
    }
    CHECK(ended == 6);
  }
}

}  // namespace
}  // namespace temper::engine
