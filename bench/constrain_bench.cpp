// constrain_bench: what a token mask costs at Gemma's 262,144-token vocabulary (issue 23's goal: at
// most 5% of a 31B decode step on the reference box, about 3 ms, and far less where possible).
//
// The tokenizer is the tests' Gemma 4 chat tokenizer with the real vocabulary
// (tests/engine/gemma4_vocabulary.h). Each text generated token by token as the tokenizer splits
// it, asking for the mask of each state reached:
//   * a Worker-like tool call's arguments as JSON (response_format json_schema);
//   * a Worker call in Gemma 4's own syntax under the tool-call grammar of the Worker's six tools
//     (tool_choice required, and the Worker's turns on an inprocess endpoint);
//   * the schema features clients send (issue 45): a pydantic nested model with bounds, a pattern
//     and a date-time; zod's integer bounds; unanchored patterns; formats; a recursive $ref;
//   * the budget masks a request's last tokens take (AllowedWithin) inside that call's command
//     string, with 2 to 16 tokens left.
// Printed per case: each mask's time, split into first visits of a state (a walk) and repeats (a
// cache lookup), and the worst single mask.
//
//   constrain_bench
#include <algorithm>
#include <cstdio>
#include <numeric>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/bench_timing.h"
#include "engine/constrain/json_schema_grammar.h"
#include "engine/constrain/token_mask.h"
#include "engine/constrain/tool_call_grammar.h"
#include "engine/gemma4_vocabulary.h"

using temper::bench::Clock;
using temper::bench::Seconds;
using namespace temper::engine;
using json = nlohmann::ordered_json;

namespace {

void Summary(const char* name, std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const double mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  std::printf("  %-32s mean %8.3f ms  median %8.3f ms  p90 %8.3f ms  max %8.3f ms  (%zu masks)\n", name, mean,
              v[v.size() / 2], v[v.size() * 9 / 10], v.back(), v.size());
}

// Masks for `ids` under `grammar`, twice: first on a fresh masker, then once it has met every
// state. Returns false when a token of the text is masked out (the grammar or mask is wrong).
bool TimeMasks(const char* name, const Grammar& grammar, const TokenVocabulary& vocabulary,
               const std::vector<int32_t>& ids) {
  std::vector<double> first, repeat;
  TokenMasker masker(grammar, vocabulary);
  for (int pass = 0; pass < 2; ++pass) {
    GrammarState state = GrammarState::Start(grammar);
    for (int32_t id : ids) {
      auto t = Clock::now();
      const TokenBits& bits = masker.Allowed(state);
      const double ms = Seconds(t, Clock::now()) * 1e3;
      if (!TokenAllowed(bits, id)) {
        std::fprintf(stderr, "%s: token %d was masked out\n", name, id);
        return false;
      }
      (pass == 0 ? first : repeat).push_back(ms);
      for (char ch : *vocabulary.bytes(id)) state = state.Advance(grammar, static_cast<uint8_t>(ch));
    }
  }
  std::printf("%s: %zu tokens, %llu distinct states walked\n", name, ids.size(),
              static_cast<unsigned long long>(masker.stats().misses));
  Summary("per token, first generation", first);
  Summary("per token, states all met before", repeat);
  return true;
}

}  // namespace

int main() {
  auto text = temper::engine::testing::Gemma4VocabularyTokenizerJson();
  if (!text.ok()) {
    std::fprintf(stderr, "%s\n", text.status().ToString().c_str());
    return 1;
  }
  auto tok = Tokenizer::FromJson(*text);
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", tok.status().ToString().c_str());
    return 1;
  }
  const std::vector<int32_t> ends = {*tok->TokenToId("<turn|>"), *tok->TokenToId("<|tool_response>")};
  auto t0 = Clock::now();
  auto words = TokenVocabulary::FromTokenizer(*tok, ends, kGemmaMarkerTokens, 262144);
  if (!words.ok()) {
    std::fprintf(stderr, "%s\n", words.status().ToString().c_str());
    return 1;
  }
  const TokenVocabulary& vocabulary = *words;
  std::printf("vocabulary %zu ids, tries built in %.2f s\n", vocabulary.size(), Seconds(t0, Clock::now()));

  // 1. JSON arguments (response_format).
  const auto arguments_schema = json::parse(R"({
    "type": "object",
    "properties": {
      "command": {"type": "string"},
      "timeout": {"type": "integer"},
      "sudo": {"type": "boolean"},
      "mode": {"enum": ["check", "apply"]}
    },
    "required": ["command", "mode"]})");
  const Grammar arguments = *JsonSchemaGrammar(arguments_schema);
  const std::string arguments_text =
      R"({"command": "sed -i 's/^#\\?\\s*TMOUT=.*/TMOUT=600/' /etc/profile.d/99-terminal_tmout.sh && grep -n TMOUT )"
      R"(/etc/profile.d/99-terminal_tmout.sh", "timeout": 120, "sudo": true, "mode": "apply"})";
  if (!TimeMasks("JSON arguments", arguments, vocabulary, tok->Encode(arguments_text))) return 1;

  // 2. A Worker call in Gemma's syntax, under the grammar of the Worker's six tools.
  const std::vector<ToolSchema> tools = {
      {"run_command", json::parse(R"({"type":"object","properties":{"command":{"type":"string","minLength":1}},
                                      "required":["command"]})")},
      {"read_file", json::parse(R"({"type":"object","properties":{"path":{"type":"string","minLength":1}},
                                    "required":["path"]})")},
      {"write_file", json::parse(R"({"type":"object","properties":{"path":{"type":"string","minLength":1},
                                     "content":{"type":"string"}},"required":["path","content"]})")},
      {"install_package", json::parse(R"({"type":"object","properties":{"packages":{"type":"array","minItems":1,
                                          "items":{"type":"string","minLength":1}}},"required":["packages"]})")},
      {"remove_package", json::parse(R"({"type":"object","properties":{"packages":{"type":"array","minItems":1,
                                         "items":{"type":"string","minLength":1}},"purge":{"type":"boolean"}},
                                         "required":["packages"]})")},
      {"finish", json::parse(R"({"type":"object","properties":{"summary":{"type":"string","minLength":1}},
                                 "required":["summary"]})")},
  };
  const Grammar calls = *ToolCallGrammar(tools);
  const std::string call_text =
      "<|tool_call>call:run_command{command:<|\"|>sed -i 's/^#\\?\\s*TMOUT=.*/TMOUT=600/' "
      "/etc/profile.d/99-terminal_tmout.sh && grep -n TMOUT /etc/profile.d/99-terminal_tmout.sh<|\"|>}<tool_call|>";
  const std::vector<int32_t> call_ids = tok->Encode(call_text, EncodeOptions{.match_special_tokens = true});
  if (!TimeMasks("Gemma tool call", calls, vocabulary, call_ids)) return 1;

  // 3. The schema features clients send (issue 45), each as JSON with a text that keeps to it.
  const struct {
    const char* name;
    const char* schema;
    const char* text;
  } features[] = {
      {"pydantic nested model",
       R"({"$defs": {"Address": {"properties": {"street": {"title": "Street", "type": "string"},
         "zip_code": {"pattern": "^\\d{5}(-\\d{4})?$", "title": "Zip Code", "type": "string"}}, "required": ["street",
         "zip_code"], "title": "Address", "type": "object"}}, "properties": {"name": {"maxLength": 40, "minLength": 1,
         "title": "Name", "type": "string"}, "age": {"maximum": 150, "minimum": 0, "title": "Age", "type": "integer"},
         "height_m": {"exclusiveMaximum": 3.5, "exclusiveMinimum": 0, "title": "Height M", "type": "number"}, "address":
         {"$ref": "#/$defs/Address"}, "born": {"format": "date-time", "title": "Born", "type": "string"}, "email":
         {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null, "title": "Email"}}, "required": ["name",
         "age", "height_m", "address", "born"], "title": "Person", "type": "object"})",
       R"({"name": "Ada Lovelace", "age": 36, "height_m": 1.65, "address": {"street": "12 St James's Square", "zip_code": "02139-4307"}, "born": "1815-12-10T08:30:00Z", "email": "ada@example.com"})"},
      {"zod int bounds", R"({"type":"object","properties":{"count":{"type":"integer","minimum":-9007199254740991,
         "maximum":9007199254740991},"ratio":{"type":"number","minimum":-1,"maximum":1}},"required":["count","ratio"],
         "additionalProperties":false})",
       R"({"count": -4503599627370496, "ratio": -0.3333333333})"},
      {"unanchored pattern", R"({"type":"object","properties":{"ticket":{"type":"string","pattern":"[A-Z]{2,5}-\\d+"},
         "note":{"type":"string","pattern":"^[^<>]*$"}},"required":["ticket","note"]})",
       R"({"ticket": "see ABC-1234 and the logs", "note": "reboot host after the patch window closes"})"},
      {"formats", R"({"type":"object","properties":{"id":{"type":"string","format":"uuid"},"mail":{"type":"string",
         "format":"email"},"ip":{"type":"string","format":"ipv6"},"site":{"format":"uri","maxLength":2083,"minLength":1,
         "type":"string"},"day":
         {"type":"string","format":"date"}},"required":["id","mail","ip","site","day"]})",
       R"({"id": "123e4567-e89b-12d3-a456-426614174000", "mail": "first.last+tag@mail.example.org", "ip": "2001:db8::8a2e:370:7334", "site": "https://example.com/a/b?c=d#e", "day": "2024-02-29"})"},
      // The walk's worst case: most tokens live (no plain shortcut), every one walked to its end.
      {"pattern without spaces", R"({"type":"object","properties":{"slug":{"type":"string","pattern":"^\\S+$"}},
         "required":["slug"]})",
       R"({"slug": "hardening/ssh-root-login_2024-06.cfg"})"},
      {"recursive tree, map", R"({"$defs": {"Node": {"properties": {"name": {"type": "string"}, "children": {"items":
         {"$ref": "#/$defs/Node"}, "type": "array", "maxItems": 4}, "attrs": {"additionalProperties": {"type": "string"},
         "type": "object"}}, "required": ["name"], "type": "object"}}, "$ref": "#/$defs/Node"})",
       R"({"name": "root", "children": [{"name": "a", "children": [{"name": "a1", "attrs": {"owner": "ops"}}]}, {"name": "b"}]})"},
  };
  for (const auto& f : features) {
    auto t = Clock::now();
    temper::Result<Grammar> g = JsonSchemaGrammar(json::parse(f.schema));
    if (!g.ok()) {
      std::fprintf(stderr, "%s: %s\n", f.name, g.status().ToString().c_str());
      return 1;
    }
    std::printf("%s: grammar of %zu rules built in %.2f ms\n", f.name, g->rules.size(), Seconds(t, Clock::now()) * 1e3);
    if (!TimeMasks(f.name, *g, vocabulary, tok->Encode(f.text))) return 1;
  }

  // 4. Budget masks inside the command string: after its opening <|"|> and one token of it.
  TokenMasker masker(calls, vocabulary);
  GrammarState state = GrammarState::Start(calls);
  std::string so_far;
  auto inside_string = [&] {
    const size_t quote = so_far.find(static_cast<char>(kQuoteMarker));
    return quote != std::string::npos && quote + 1 < so_far.size();
  };
  for (size_t i = 0; i < call_ids.size() && !inside_string(); ++i) {
    so_far += *vocabulary.bytes(call_ids[i]);
    for (char ch : *vocabulary.bytes(call_ids[i])) state = state.Advance(calls, static_cast<uint8_t>(ch));
  }
  std::vector<double> within;
  TokenBits bits;
  for (int pass = 0; pass < 2; ++pass) {
    for (int64_t left = 2; left <= 16; ++left) {
      auto t = Clock::now();
      masker.AllowedWithin(state, left - 2, bits);
      within.push_back(Seconds(t, Clock::now()) * 1e3);
    }
  }
  std::printf("budget masks inside a tool call's string (after %zu bytes), 2 to 16 tokens left (twice):\n",
              so_far.size());
  Summary("per mask", within);
  return 0;
}
