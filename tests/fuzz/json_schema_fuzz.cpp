// libFuzzer target: a client's JSON schema through the grammar compiler (json_schema_grammar.h),
// and its first bytes as a `pattern` through the regular-expression automaton (regex_automaton.h).
//
// Schemas come from any HTTP client (response_format, tools' parameters), so compiling one must
// give a grammar or a Status for every input, within the compiler's bounds, and a grammar whose
// root can end. Run: build-fuzz/fuzz_json_schema CORPUS_DIR
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "engine/constrain/json_schema_grammar.h"
#include "engine/constrain/regex_automaton.h"
#include "engine/constrain/schema_refs.h"

namespace {

using temper::engine::Grammar;

void CheckEnds(const Grammar& g) {
  if (temper::engine::MinimalLengths(g)[static_cast<size_t>(g.root)] >= temper::engine::kNoCompletion) {
    __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // The whole input as a pattern: an automaton whose every state can end, or a Status.
  auto dfa = temper::engine::RegexDfa(text);
  if (dfa.ok()) {
    for (const auto& state : dfa->states) {
      for (const auto& edge : state.edges) {
        if (edge.to < 0 || static_cast<size_t>(edge.to) >= dfa->states.size()) __builtin_trap();
      }
    }
    auto g = temper::engine::JsonSchemaGrammar(nlohmann::ordered_json{{"type", "string"}, {"pattern", text}});
    if (g.ok()) CheckEnds(*g);
  }
  // The whole input as a schema.
  const auto schema = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return 0;
  auto g = temper::engine::JsonSchemaGrammar(schema);
  if (g.ok()) CheckEnds(*g);
  (void)temper::engine::RenderableToolSchema(nlohmann::json(schema), "parameters");
  return 0;
}
