// JsonSchemaGrammar: the Grammar (grammar.h) of the texts a JSON schema accepts — as JSON, for
// `response_format: {type: json_schema}` and the roles' structured answers, or in Gemma 4's
// tool-call argument syntax, for tool calls (tool_call_grammar.h).
//
// Supported: type (one or a list) object, array, string (with minLength and maxLength up to
// kMaxStringLength, counted in characters), integer, number, boolean, null;
// properties with required (properties come in the schema's order, kept by ordered_json; optional
// ones may be left out; additional properties are not generated); items, minItems 0 or 1; enum and
// const (any JSON values, written compactly); anyOf and oneOf (as alternatives). An empty schema,
// or an object without properties, is any value. Anything else ($ref, pattern, format, minimum,
// ...) is refused by name and path rather than silently widened: a constraint that does not
// constrain is worse than an error. One deliberate narrowing: a string with a minLength starts
// with a non-space character (the roles' parsers take a blank field for an empty one).
//
// The two dialects:
//   * kJson: JSON, with at most one space after ':' and ',' (JSON allows more, but a model that may
//     add spaces forever can spend its budget on them).
//   * kGemmaArguments: what Gemma 4 writes inside <|tool_call>call:NAME{...}<tool_call|> and what
//     ChatFormat parses: bare keys (`path:`) in the order of their names (as the chat template
//     renders calls), strings between <|"|> tokens (the marker byte kQuoteMarker; no escapes),
//     numbers, true, false and null bare, no spaces.
// In both, a string never holds "<|" or "|>": every Gemma 4 control token's text has one of them,
// so generated text can never spell a control token the reply parser would take for one.
//
// Thread safety: pure functions; a SchemaGrammarBuilder is used by one thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "engine/constrain/grammar.h"

namespace temper::engine {

// The marker byte (grammar.h) that stands for Gemma 4's <|"|> string delimiter.
inline constexpr uint8_t kQuoteMarker = kFirstMarkerByte;
// The longest maxLength (or minLength) a schema may ask for: each character of the bound is a few
// grammar rules.
inline constexpr int64_t kMaxStringLength = 16384;

enum class SchemaDialect { kJson, kGemmaArguments };

// Builds one grammar out of schemas: JsonSchemaGrammar for a single schema, the tool-call grammar
// for one schema per tool under rules of its own.
class SchemaGrammarBuilder {
 public:
  explicit SchemaGrammarBuilder(SchemaDialect dialect);

  // The rule matching `schema`'s instances. `path` names the schema in errors, e.g. "schema" or
  // "tools[2].parameters". InvalidArgument naming the JSON pointer and keyword of the first
  // unsupported part ("schema/properties/cmd: 'pattern' is not supported").
  Result<int> Schema(const nlohmann::ordered_json& schema, const std::string& path);
  // Adds a rule; returns its index.
  int Add(std::string name, std::vector<std::vector<GrammarElement>> alternatives);
  // The grammar, rooted at `root`. The builder is spent.
  Grammar Finish(int root);

 private:
  using Sequence = std::vector<GrammarElement>;
  // The rule of a string of min_length to max_length characters (-1: unbounded).
  int String(int64_t min_length, int64_t max_length);
  Result<int> BoundedString(const nlohmann::ordered_json& s, const std::string& path);
  Sequence ValueLiteral(const nlohmann::ordered_json& value) const;
  int Literals(const std::vector<nlohmann::ordered_json>& values, const std::string& path);
  Result<int> Typed(const nlohmann::ordered_json& s, const std::string& type, const std::string& path);
  Result<int> Array(const nlohmann::ordered_json& s, const std::string& path);
  Result<int> Object(const nlohmann::ordered_json& s, const std::string& path);
  Sequence Separator() const;  // between members and items
  Sequence Key(const std::string& name) const;

  const SchemaDialect dialect_;
  Grammar grammar_;
  ByteSet plain_{};  // the ASCII a string's content may hold
  bool escapes_ = false;
  int hex_ = 0, utf8_ = 0;
  int ws_ = 0, string_ = 0, integer_ = 0, number_ = 0, boolean_ = 0, null_ = 0, value_ = 0, any_object_ = 0;
};

// JSON texts the schema accepts (SchemaDialect::kJson). Errors: SchemaGrammarBuilder::Schema's,
// under the path "schema".
Result<Grammar> JsonSchemaGrammar(const nlohmann::ordered_json& schema);

}  // namespace temper::engine
