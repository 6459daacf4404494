// JsonSchemaGrammar: the Grammar (grammar.h) of the texts a JSON schema accepts — as JSON, for
// `response_format: {type: json_schema}` and the roles' structured answers, or in Gemma 4's
// tool-call argument syntax, for tool calls (tool_call_grammar.h).
//
// Supported, as pydantic, zod and OpenAI's strict mode write schemas:
//   * type (one or a list; without one, the type the keywords imply: "properties" an object,
//     "items" an array, "pattern" a string, "minimum" a number...), enum and const (any JSON values,
//     written compactly), anyOf and oneOf (as alternatives), allOf of one schema, "nullable": true
//     (OpenAPI's: the schema or null). An empty schema is any value.
//   * $ref to a local JSON pointer ("#", "#/$defs/X", "#/definitions/X"), resolved in the schema
//     being compiled: for a tool, its own parameters (schema_refs.h). A recursive $ref is followed
//     kMaxRefRecursion levels deep along one branch; below that the alternatives that need it are
//     dropped (an optional child left out, the null of an Optional taken), so the grammar stays
//     finite and every text it starts can end. A schema that cannot end within that depth, a
//     remote or dangling $ref, is refused.
//   * object: properties with required (in the schema's order, kept by ordered_json; optional ones
//     may be left out); additionalProperties false or absent: no other keys; true or a schema:
//     after the declared ones, any number of other keys (never a declared name; keys are not checked
//     for repeats among themselves, as llguidance does not) with values of that schema. An object
//     with neither properties nor additionalProperties is any object.
//   * array: items, prefixItems (and draft 4's items list with additionalItems), minItems and
//     maxItems up to kMaxArrayItems.
//   * string: minLength and maxLength up to kMaxStringLength (in characters); pattern (an ECMA-262
//     subset, regex_automaton.h: unanchored sides match any text, as JSON Schema says; lookaround,
//     backreferences and the like refused naming the construct and offset); format date, time,
//     date-time (RFC 3339, offset required, no leap second: Python's datetime reads every one),
//     duration, email and uri (practical subsets), hostname, ipv4, ipv6, uuid. An unknown format is
//     refused, as llguidance does: it is a constraint the grammar would silently drop.
//   * integer and number: minimum, maximum, exclusiveMinimum and exclusiveMaximum (the number form,
//     and draft 4's boolean form), compared as exact decimals; an integer format int32 or int64
//     bounds it too (float and double constrain nothing a JSON number can spell). Exact: an
//     integer's digits spell only the numbers in range; a bounded number is written without an
//     exponent (every decimal value still has a spelling), so its integer and fraction digits are
//     held to the range exactly.
// Anything else (multipleOf, uniqueItems true, patternProperties, if/then, ...) is refused by name
// and path rather than silently widened: a constraint that does not constrain is worse than an
// error. Deliberate narrowings: a string with a minLength starts with a non-space character (the
// roles' parsers take a blank field for an empty one); a string from a pattern or format spells
// each character one way (escapes only where JSON needs them).
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
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "engine/constrain/grammar.h"
#include "engine/constrain/regex_automaton.h"

namespace temper::engine {

// The marker byte (grammar.h) that stands for Gemma 4's <|"|> string delimiter.
inline constexpr uint8_t kQuoteMarker = kFirstMarkerByte;
// The longest maxLength (or minLength) a schema may ask for: each character of the bound is a few
// grammar rules.
inline constexpr int64_t kMaxStringLength = 16384;
// How deep one recursive $ref is followed (the tree of a recursive model): each level is a copy of
// its rules. Eight levels hold the trees a reply writes, and keep the recognizer's stacks far under
// its bound (grammar.cpp's kMaxResolveDepth), so no text ever runs into it.
inline constexpr int kMaxRefRecursion = 8;
// The largest minItems or maxItems (or prefixItems count): each count is a rule of its own.
inline constexpr int64_t kMaxArrayItems = 1024;

enum class SchemaDialect { kJson, kGemmaArguments };

// A number's bound, as an exact decimal (json_schema_grammar.cpp).
struct DecimalBound;

// Builds one grammar out of schemas: JsonSchemaGrammar for a single schema, the tool-call grammar
// for one schema per tool under rules of its own.
class SchemaGrammarBuilder {
 public:
  explicit SchemaGrammarBuilder(SchemaDialect dialect);

  // The rule matching `schema`'s instances; its $refs resolve in `schema`. `path` names the schema
  // in errors, e.g. "schema" or "tools[2].parameters". InvalidArgument naming the JSON pointer and
  // keyword of the first unsupported part ("schema/properties/cmd: 'multipleOf' is not supported",
  // "schema/properties/id: pattern: lookahead '(?=' at offset 0 is not supported").
  Result<int> Schema(const nlohmann::ordered_json& schema, const std::string& path);
  // Adds a rule; returns its index.
  int Add(std::string name, std::vector<std::vector<GrammarElement>> alternatives);
  // The grammar, rooted at `root`, without the alternatives that can never end (a recursion cut at
  // kMaxRefRecursion, an empty range). The builder is spent.
  Grammar Finish(int root);

 private:
  using Sequence = std::vector<GrammarElement>;
  Result<int> Node(const nlohmann::ordered_json& s, const std::string& path);
  Result<int> Reference(const nlohmann::ordered_json& s, const std::string& path);
  Result<int> Core(const nlohmann::ordered_json& s, const std::string& path);
  // The rule of a string of min_length to max_length characters (-1: unbounded).
  int String(int64_t min_length, int64_t max_length);
  Result<int> BoundedString(const nlohmann::ordered_json& s, const std::string& path);
  // A string whose content `dfa` accepts, spelled in the dialect (escapes where JSON needs them).
  int AutomatonString(const CharDfa& dfa, const std::string& name, bool quoted = true);
  std::vector<Sequence> Spellings(const CodeSet& chars) const;
  Sequence ValueLiteral(const nlohmann::ordered_json& value) const;
  int Literals(const std::vector<nlohmann::ordered_json>& values, const std::string& path);
  Result<int> Typed(const nlohmann::ordered_json& s, const std::string& type, const std::string& path);
  Result<int> Number(const nlohmann::ordered_json& s, bool integer, const std::string& path);
  // The digits of the integers lo..hi (no hi: unbounded), lo <= hi, both without sign.
  std::vector<Sequence> IntegerDigits(const std::string& lo, const std::string* hi);
  // The rule of magnitudes (absolute values) from `low` to `high` (none: unbounded).
  int Magnitudes(const DecimalBound& low, const DecimalBound* high, bool integer, const std::string& name);
  // An optional fraction ('.' and digits) whose value keeps to the fraction digits of the bounds.
  int Fraction(const DecimalBound* low, const DecimalBound* high);
  Result<int> Array(const nlohmann::ordered_json& s, const std::string& path);
  Result<int> Object(const nlohmann::ordered_json& s, const std::string& path);
  Sequence Separator() const;  // between members and items
  Sequence Key(const std::string& name) const;

  const SchemaDialect dialect_;
  Grammar grammar_;
  ByteSet plain_{};  // the ASCII a string's content may hold
  bool escapes_ = false;
  int hex_ = 0, utf8_ = 0, digits_ = 0, key_ = 0;
  int ws_ = 0, string_ = 0, integer_ = 0, number_ = 0, boolean_ = 0, null_ = 0, value_ = 0, any_object_ = 0;
  // The schema being compiled ($refs resolve in it), its path, and the $refs being expanded.
  const nlohmann::ordered_json* root_ = nullptr;
  std::string root_path_;
  std::map<std::string, int> expanding_;             // $ref -> how many times on the way down
  std::map<std::pair<std::string, int>, int> refs_;  // ($ref, that count) -> its rule
};

// JSON texts the schema accepts (SchemaDialect::kJson). Errors: SchemaGrammarBuilder::Schema's,
// under the path "schema".
Result<Grammar> JsonSchemaGrammar(const nlohmann::ordered_json& schema);

}  // namespace temper::engine
