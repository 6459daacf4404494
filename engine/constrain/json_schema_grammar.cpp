#include "engine/constrain/json_schema_grammar.h"

#include <algorithm>
#include <array>
#include <set>

#include <fmt/format.h>

namespace temper::engine {
namespace {

using json = nlohmann::ordered_json;
using Sequence = std::vector<GrammarElement>;

// Keywords that describe without constraining, accepted and ignored.
const std::set<std::string> kAnnotations = {"description", "title", "$schema", "examples", "default", "$comment"};

Sequence Concat(std::initializer_list<Sequence> parts) {
  Sequence out;
  for (const Sequence& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

ByteSet Without(ByteSet set, std::string_view chars) {
  for (char c : chars) {
    const auto b = static_cast<uint8_t>(c);
    set[b >> 6] &= ~(uint64_t{1} << (b & 63));
  }
  return set;
}

ByteSet Union(std::initializer_list<ByteSet> sets) {
  ByteSet out{};
  for (const ByteSet& s : sets) {
    for (size_t i = 0; i < 4; ++i) out[i] |= s[i];
  }
  return out;
}

}  // namespace

SchemaGrammarBuilder::SchemaGrammarBuilder(SchemaDialect dialect) : dialect_(dialect) {
  const bool gemma = dialect_ == SchemaDialect::kGemmaArguments;
  // Shared lexical rules.
  ws_ = Add("ws", {{}, {Chars(Bytes(" "))}});
  // A string: JSON's quotes and escapes, no controls; or Gemma's <|"|> with anything between.
  // Bytes 0x80-0xff come in whole UTF-8 characters (RFC 3629): a run of byte-fallback tokens that
  // is not valid UTF-8 decodes to U+FFFDs that swallow the bytes around them, a quote included.
  escapes_ = !gemma;
  plain_ = ByteRange(0, 0x7f);
  if (!gemma) {
    plain_ = Without(plain_, "\"\\");
    plain_[0] &= ~uint64_t{0xffffffff};  // no control bytes (0x00-0x1f)
  }
  hex_ = Add("hex", {{Chars(Union({ByteRange('0', '9'), ByteRange('a', 'f'), ByteRange('A', 'F')}))}});
  std::vector<Sequence> characters;
  for (const Utf8Form& f : kUtf8Forms) {
    Sequence c = {Chars(ByteRange(f.first_lo, f.first_hi))};
    for (int k = 0; k < f.rest_count; ++k) {
      c.push_back(Chars(ByteRange(f.rest[static_cast<size_t>(k)].first, f.rest[static_cast<size_t>(k)].second)));
    }
    characters.push_back(std::move(c));
  }
  utf8_ = Add("utf8", std::move(characters));
  string_ = String(0, -1);
  const int digits = Add("digits", {});
  grammar_.rules[static_cast<size_t>(digits)].alternatives = {{}, {Chars(ByteRange('0', '9')), Ref(digits)}};
  const int int_part = Add("int-part", {Literal("0"), {Chars(ByteRange('1', '9')), Ref(digits)}});
  integer_ = Add("integer", {{Ref(int_part)}, Concat({Literal("-"), {Ref(int_part)}})});
  const int fraction = Add("fraction", {{}, {Chars(Bytes(".")), Chars(ByteRange('0', '9')), Ref(digits)}});
  const int exponent =
      Add("exponent", {{},
                       {Chars(Bytes("eE")), Chars(ByteRange('0', '9')), Ref(digits)},
                       {Chars(Bytes("eE")), Chars(Bytes("+-")), Chars(ByteRange('0', '9')), Ref(digits)}});
  number_ = Add("number", {{Ref(integer_), Ref(fraction), Ref(exponent)}});
  boolean_ = Add("boolean", {Literal("true"), Literal("false")});
  null_ = Add("null", {Literal("null")});
  // Any value (an empty schema). Gemma's keys are bare names.
  value_ = Add("value", {});
  int key = string_;
  if (gemma) {
    const ByteSet first = Union({ByteRange('a', 'z'), ByteRange('A', 'Z'), Bytes("_")});
    const int rest = Add("key-rest", {});
    grammar_.rules[static_cast<size_t>(rest)].alternatives = {
        {},
        {Chars(Union({first, ByteRange('0', '9'), Bytes(".-")})), Ref(rest)}};
    key = Add("key", {{Chars(first), Ref(rest)}});
  }
  const int members = Add("members", {});
  const int member =
      Add("member", {Concat({{Ref(key)}, Literal(":"), gemma ? Sequence{} : Sequence{Ref(ws_)}, {Ref(value_)}})});
  grammar_.rules[static_cast<size_t>(members)].alternatives = {{},
                                                               Concat({Separator(), {Ref(member)}, {Ref(members)}})};
  const int object = Add("object", {Concat({Literal("{"), Literal("}")}),
                                    Concat({Literal("{"), {Ref(member)}, {Ref(members)}, Literal("}")})});
  const int elements = Add("elements", {});
  grammar_.rules[static_cast<size_t>(elements)].alternatives = {{},
                                                                Concat({Separator(), {Ref(value_)}, {Ref(elements)}})};
  const int array = Add("array", {Concat({Literal("["), Literal("]")}),
                                  Concat({Literal("["), {Ref(value_)}, {Ref(elements)}, Literal("]")})});
  any_object_ = object;
  grammar_.rules[static_cast<size_t>(value_)].alternatives = {{Ref(object)},  {Ref(array)},    {Ref(string_)},
                                                              {Ref(number_)}, {Ref(boolean_)}, {Ref(null_)}};
}

int SchemaGrammarBuilder::String(int64_t min_length, int64_t max_length) {
  // The content is a walk over rules R[j][t]: j characters written so far (capped: at max_length
  // when there is one, else at min_length, where it loops), t the three states that keep "<|" and
  // "|>" out — anywhere (0), right after a '<' (1: no '|' next), right after a '|' (2: no '>' next).
  // Each may end the string once j >= min_length. A character is a plain ASCII byte, a whole UTF-8
  // character, or (JSON) an escape.
  const bool bounded = max_length >= 0;
  const int64_t cap = bounded ? max_length : min_length;
  const std::string name = fmt::format("chars[{},{}]", min_length, max_length);
  std::vector<std::array<int, 3>> r(static_cast<size_t>(cap + 1));
  for (auto& row : r) {
    for (int& rule : row) rule = Add(name, {});
  }
  const ByteSet other = Without(plain_, "<|");
  for (int64_t j = 0; j <= cap; ++j) {
    for (int t = 0; t < 3; ++t) {
      std::vector<Sequence> alts;
      if (j >= min_length) alts.push_back({});
      const int64_t next = j < cap ? j + 1 : (bounded ? -1 : j);
      if (next >= 0) {
        const auto& to = r[static_cast<size_t>(next)];
        // A string that must hold something starts with a non-space character: the roles' parsers
        // take a blank field for an empty one (deliberately narrower than minLength).
        ByteSet first = t == 2 ? Without(other, ">") : other;
        if (j == 0 && min_length > 0) first = Without(first, " \t\r\n");
        alts.push_back({Chars(first), Ref(to[0])});
        alts.push_back({Ref(utf8_), Ref(to[0])});
        alts.push_back({Chars(Bytes("<")), Ref(to[1])});
        if (t != 1) alts.push_back({Chars(Bytes("|")), Ref(to[2])});
        if (escapes_ && !(j == 0 && min_length > 0)) {
          alts.push_back({Chars(Bytes("\\")), Chars(Bytes("\"\\/bfnrt")), Ref(to[0])});
          alts.push_back(
              {Chars(Bytes("\\")), Chars(Bytes("u")), Ref(hex_), Ref(hex_), Ref(hex_), Ref(hex_), Ref(to[0])});
        }
      }
      grammar_.rules[static_cast<size_t>(r[static_cast<size_t>(j)][static_cast<size_t>(t)])].alternatives =
          std::move(alts);
    }
  }
  const Sequence quote = escapes_ ? Literal("\"") : Sequence{Marker(kQuoteMarker)};
  return Add(fmt::format("string[{},{}]", min_length, max_length), {Concat({quote, {Ref(r[0][0])}, quote})});
}

int SchemaGrammarBuilder::Add(std::string name, std::vector<Sequence> alternatives) {
  grammar_.rules.push_back(GrammarRule{std::move(name), std::move(alternatives)});
  return static_cast<int>(grammar_.rules.size() - 1);
}

Grammar SchemaGrammarBuilder::Finish(int root) {
  grammar_.root = root;
  return std::move(grammar_);
}

SchemaGrammarBuilder::Sequence SchemaGrammarBuilder::Separator() const {
  if (dialect_ == SchemaDialect::kGemmaArguments) return Literal(",");
  return Concat({Literal(","), {Ref(ws_)}});
}

SchemaGrammarBuilder::Sequence SchemaGrammarBuilder::Key(const std::string& name) const {
  if (dialect_ == SchemaDialect::kGemmaArguments) return Literal(name + ":");
  return Concat({Literal(json(name).dump() + ":"), {Ref(ws_)}});
}

// A value written as the dialect writes it: compact JSON, or Gemma's arguments syntax.
SchemaGrammarBuilder::Sequence SchemaGrammarBuilder::ValueLiteral(const json& v) const {
  if (dialect_ == SchemaDialect::kJson) return Literal(v.dump());
  if (v.is_string()) {
    const Sequence quote = {Marker(kQuoteMarker)};
    return Concat({quote, Literal(v.get<std::string>()), quote});
  }
  if (v.is_object()) {
    Sequence out = Literal("{");
    bool first = true;
    for (const auto& [k, item] : v.items()) {
      if (!first) out.push_back(Chars(Bytes(",")));
      first = false;
      const Sequence key = Literal(k + ":");
      const Sequence value = ValueLiteral(item);
      out.insert(out.end(), key.begin(), key.end());
      out.insert(out.end(), value.begin(), value.end());
    }
    out.push_back(Chars(Bytes("}")));
    return out;
  }
  if (v.is_array()) {
    Sequence out = Literal("[");
    for (size_t i = 0; i < v.size(); ++i) {
      if (i > 0) out.push_back(Chars(Bytes(",")));
      const Sequence item = ValueLiteral(v[i]);
      out.insert(out.end(), item.begin(), item.end());
    }
    out.push_back(Chars(Bytes("]")));
    return out;
  }
  return Literal(v.dump());  // numbers, true, false, null
}

// A rule matching exactly one of `values`.
int SchemaGrammarBuilder::Literals(const std::vector<json>& values, const std::string& path) {
  std::vector<Sequence> alternatives;
  for (const json& v : values) alternatives.push_back(ValueLiteral(v));
  return Add(path, std::move(alternatives));
}

Result<int> SchemaGrammarBuilder::Schema(const json& s, const std::string& path) {
  if (s.is_boolean() && s.get<bool>()) return value_;
  if (!s.is_object()) return Status::InvalidArgument(fmt::format("{}: a schema must be an object", path));
  for (const auto& [key, value] : s.items()) {
    static const std::set<std::string> kKnown = {
        "type",  "properties",           "required", "items",     "enum",     "const", "anyOf",
        "oneOf", "additionalProperties", "minItems", "minLength", "maxLength"};
    if (!kKnown.count(key) && !kAnnotations.count(key)) {
      return Status::InvalidArgument(fmt::format("{}: '{}' is not supported", path, key));
    }
  }
  if (s.contains("const")) return Literals({s["const"]}, path);
  if (s.contains("enum")) {
    if (!s["enum"].is_array() || s["enum"].empty()) {
      return Status::InvalidArgument(fmt::format("{}/enum: must be a non-empty array", path));
    }
    return Literals(s["enum"].get<std::vector<json>>(), path);
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    if (!s.contains(key)) continue;
    if (!s[key].is_array() || s[key].empty()) {
      return Status::InvalidArgument(fmt::format("{}/{}: must be a non-empty array", path, key));
    }
    std::vector<Sequence> alternatives;
    for (size_t i = 0; i < s[key].size(); ++i) {
      TEMPER_ASSIGN_OR_RETURN(int r, Schema(s[key][i], fmt::format("{}/{}/{}", path, key, i)));
      alternatives.push_back({Ref(r)});
    }
    return Add(path, std::move(alternatives));
  }
  if (!s.contains("type")) return value_;
  std::vector<std::string> types;
  if (s["type"].is_string()) {
    types.push_back(s["type"].get<std::string>());
  } else if (s["type"].is_array()) {
    for (const json& t : s["type"]) {
      if (!t.is_string()) return Status::InvalidArgument(fmt::format("{}/type: a list of type names", path));
      types.push_back(t.get<std::string>());
    }
  } else {
    return Status::InvalidArgument(fmt::format("{}/type: a type name or a list of them", path));
  }
  std::vector<Sequence> alternatives;
  for (const std::string& type : types) {
    TEMPER_ASSIGN_OR_RETURN(int r, Typed(s, type, path));
    alternatives.push_back({Ref(r)});
  }
  return alternatives.size() == 1 ? alternatives.front().front().rule : Add(path, std::move(alternatives));
}

Result<int> SchemaGrammarBuilder::Typed(const json& s, const std::string& type, const std::string& path) {
  if (type == "string") return BoundedString(s, path);
  if (type == "integer") return integer_;
  if (type == "number") return number_;
  if (type == "boolean") return boolean_;
  if (type == "null") return null_;
  if (type == "array") return Array(s, path);
  if (type == "object") return Object(s, path);
  return Status::InvalidArgument(fmt::format("{}/type: '{}' is not a JSON schema type", path, type));
}

Result<int> SchemaGrammarBuilder::BoundedString(const json& s, const std::string& path) {
  int64_t bounds[2] = {0, -1};
  const char* keys[2] = {"minLength", "maxLength"};
  for (int i = 0; i < 2; ++i) {
    if (!s.contains(keys[i])) continue;
    const json& v = s[keys[i]];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > kMaxStringLength) {
      return Status::InvalidArgument(
          fmt::format("{}/{}: must be an integer from 0 to {}", path, keys[i], kMaxStringLength));
    }
    bounds[i] = v.get<int64_t>();
  }
  if (bounds[1] >= 0 && bounds[0] > bounds[1]) {
    return Status::InvalidArgument(fmt::format("{}: minLength {} exceeds maxLength {}", path, bounds[0], bounds[1]));
  }
  if (bounds[0] == 0 && bounds[1] < 0) return string_;
  return String(bounds[0], bounds[1]);
}

Result<int> SchemaGrammarBuilder::Array(const json& s, const std::string& path) {
  int item = value_;
  if (s.contains("items")) {
    TEMPER_ASSIGN_OR_RETURN(item, Schema(s["items"], path + "/items"));
  }
  const int64_t min_items = s.value("minItems", int64_t{0});
  if (min_items < 0 || min_items > 1) {
    return Status::InvalidArgument(fmt::format("{}/minItems: only 0 or 1 is supported", path));
  }
  const int rest = Add(path + "/rest", {});
  grammar_.rules[static_cast<size_t>(rest)].alternatives = {{}, Concat({Separator(), {Ref(item)}, {Ref(rest)}})};
  std::vector<Sequence> alternatives = {Concat({Literal("["), {Ref(item)}, {Ref(rest)}, Literal("]")})};
  if (min_items == 0) alternatives.push_back(Literal("[]"));
  return Add(path, std::move(alternatives));
}

Result<int> SchemaGrammarBuilder::Object(const json& s, const std::string& path) {
  if (!s.contains("properties")) return any_object_;
  const json& properties = s["properties"];
  if (!properties.is_object()) return Status::InvalidArgument(fmt::format("{}/properties: must be an object", path));
  std::set<std::string> required;
  if (s.contains("required")) {
    if (!s["required"].is_array()) return Status::InvalidArgument(fmt::format("{}/required: must be an array", path));
    for (const json& r : s["required"]) {
      if (!r.is_string() || !properties.contains(r.get<std::string>())) {
        return Status::InvalidArgument(fmt::format("{}/required: {} is not one of the properties", path, r.dump()));
      }
      required.insert(r.get<std::string>());
    }
  }
  // key: value for each property: in the schema's order in JSON; in Gemma's arguments in the order
  // of their names, as the chat template renders a call back into the next prompt (dictsort), so
  // the prefix cache finds the call the model wrote in the prompt that resends it.
  std::vector<std::string> names;
  for (const auto& [name, sub] : properties.items()) names.push_back(name);
  if (dialect_ == SchemaDialect::kGemmaArguments) std::sort(names.begin(), names.end());
  std::vector<int> members;
  std::vector<bool> needed;
  for (const std::string& name : names) {
    const json& sub = properties[name];
    TEMPER_ASSIGN_OR_RETURN(int value, Schema(sub, path + "/properties/" + name));
    members.push_back(Add(path + "/" + name, {Concat({Key(name), {Ref(value)}})}));
    needed.push_back(required.count(name) > 0);
  }
  // after[i]: the properties from i on when one is already written (each then starts with a
  // separator); first[i]: the same when none is written yet.
  const size_t n = members.size();
  std::vector<int> after(n + 1), first(n + 1);
  after[n] = Add(path + "/end", {{}});
  first[n] = after[n];
  for (size_t i = n; i-- > 0;) {
    std::vector<Sequence> a = {Concat({Separator(), {Ref(members[i])}, {Ref(after[i + 1])}})};
    if (!needed[i]) a.push_back({Ref(after[i + 1])});
    after[i] = Add(fmt::format("{}/after-{}", path, i), std::move(a));
    std::vector<Sequence> f = {{Ref(members[i]), Ref(after[i + 1])}};
    if (!needed[i]) f.push_back({Ref(first[i + 1])});
    first[i] = Add(fmt::format("{}/first-{}", path, i), std::move(f));
  }
  return Add(path, {Concat({Literal("{"), {Ref(first[0])}, Literal("}")})});
}

Result<Grammar> JsonSchemaGrammar(const nlohmann::ordered_json& schema) {
  SchemaGrammarBuilder builder(SchemaDialect::kJson);
  TEMPER_ASSIGN_OR_RETURN(int root, builder.Schema(schema, "schema"));
  return builder.Finish(root);
}

}  // namespace temper::engine
