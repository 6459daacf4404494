// ToolCallGrammar: the grammar of a model reply that is nothing but Gemma 4 tool calls — one or
// more `<|tool_call>call:NAME{ARGS}<tool_call|>`, each NAME one of the tools offered and its ARGS an
// instance of that tool's parameters schema in Gemma's argument syntax (json_schema_grammar.h,
// SchemaDialect::kGemmaArguments). This is what `tool_choice: "required"` means (every tool
// offered) and a named function (one tool), and what the Worker's turns are: its protocol has no
// reply without a call.
//
// The control tokens the grammar writes are marker bytes (grammar.h); kGemmaMarkerTokens lists
// them by text, for the vocabulary (TokenVocabulary::FromTokenizer) to map each to its token id.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "engine/constrain/grammar.h"
#include "engine/constrain/json_schema_grammar.h"

namespace temper::engine {

inline constexpr uint8_t kCallOpenMarker = kQuoteMarker + 1;
inline constexpr uint8_t kCallCloseMarker = kQuoteMarker + 2;

inline constexpr MarkerToken kGemmaMarkerTokens[] = {
    {"<|\"|>", kQuoteMarker}, {"<|tool_call>", kCallOpenMarker}, {"<tool_call|>", kCallCloseMarker}};

struct ToolSchema {
  std::string name;
  nlohmann::ordered_json parameters;  // an object schema; null for a function without arguments
};

// Each tool's $refs resolve in its own parameters. Errors: InvalidArgument for no tools, a name
// Gemma's syntax cannot carry, parameters that are not an object schema, or an unsupported schema
// keyword, naming the tool ("tools[1] 'run'.parameters/properties/n: 'multipleOf' is not
// supported").
Result<Grammar> ToolCallGrammar(std::span<const ToolSchema> tools);

// The rule of tools[index]'s arguments in `builder` (in its dialect): `{}` for a tool without
// parameters, else its parameters schema, which must be an object schema. Shared by every tool-call
// syntax (json_tool_call_grammar.h too). Errors: ToolCallGrammar's, for this tool.
Result<int> ToolArgumentsRule(SchemaGrammarBuilder& builder, const ToolSchema& tool, size_t index);

}  // namespace temper::engine
