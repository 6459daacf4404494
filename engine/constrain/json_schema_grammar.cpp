#include "engine/constrain/json_schema_grammar.h"

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

class Compiler {
 public:
  Compiler() {
    // Shared lexical rules.
    ws_ = Add("ws", {{}, {Chars(Bytes(" "))}});
    const int hex = Add("hex", {{Chars(Union({ByteRange('0', '9'), ByteRange('a', 'f'), ByteRange('A', 'F')}))}});
    // A string's content: any byte but '"', '\' and controls, or an escape; repeated.
    ByteSet plain = AnyByteExcept("\"\\");
    for (int b = 0; b < 0x20; ++b) plain[static_cast<size_t>(b) >> 6] &= ~(uint64_t{1} << (b & 63));
    const int chars = Add("chars", {});
    grammar_.rules[static_cast<size_t>(chars)].alternatives = {
        {},
        {Chars(plain), Ref(chars)},
        {Chars(Bytes("\\")), Chars(Bytes("\"\\/bfnrt")), Ref(chars)},
        {Chars(Bytes("\\")), Chars(Bytes("u")), Ref(hex), Ref(hex), Ref(hex), Ref(hex), Ref(chars)}};
    string_ = Add("string", {Concat({Literal("\""), {Ref(chars)}, Literal("\"")})});
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
    // Any JSON value (an empty schema).
    value_ = Add("value", {});
    const int members = Add("members", {});
    const int member = Add("member", {Concat({{Ref(string_)}, Literal(":"), {Ref(ws_)}, {Ref(value_)}})});
    grammar_.rules[static_cast<size_t>(members)].alternatives = {
        {},
        Concat({Literal(","), {Ref(ws_)}, {Ref(member)}, {Ref(members)}})};
    const int object = Add("object", {Concat({Literal("{"), Literal("}")}),
                                      Concat({Literal("{"), {Ref(member)}, {Ref(members)}, Literal("}")})});
    const int elements = Add("elements", {});
    grammar_.rules[static_cast<size_t>(elements)].alternatives = {
        {},
        Concat({Literal(","), {Ref(ws_)}, {Ref(value_)}, {Ref(elements)}})};
    const int array = Add("array", {Concat({Literal("["), Literal("]")}),
                                    Concat({Literal("["), {Ref(value_)}, {Ref(elements)}, Literal("]")})});
    any_object_ = object;
    grammar_.rules[static_cast<size_t>(value_)].alternatives = {{Ref(object)},  {Ref(array)},    {Ref(string_)},
                                                                {Ref(number_)}, {Ref(boolean_)}, {Ref(null_)}};
  }

  Result<Grammar> Compile(const json& schema) {
    TEMPER_ASSIGN_OR_RETURN(int root, Schema(schema, "schema"));
    grammar_.root = root;
    return std::move(grammar_);
  }

 private:
  static ByteSet Union(std::initializer_list<ByteSet> sets) {
    ByteSet out{};
    for (const ByteSet& s : sets) {
      for (size_t i = 0; i < 4; ++i) out[i] |= s[i];
    }
    return out;
  }

  int Add(std::string name, std::vector<Sequence> alternatives) {
    grammar_.rules.push_back(GrammarRule{std::move(name), std::move(alternatives)});
    return static_cast<int>(grammar_.rules.size() - 1);
  }

  // A rule matching exactly one of `values`, each written as compact JSON.
  int Literals(const std::vector<json>& values, const std::string& path) {
    std::vector<Sequence> alternatives;
    for (const json& v : values) alternatives.push_back(Literal(v.dump()));
    return Add(path, std::move(alternatives));
  }

  Result<int> Schema(const json& s, const std::string& path) {
    if (s.is_boolean() && s.get<bool>()) return value_;
    if (!s.is_object()) return Status::InvalidArgument(fmt::format("{}: a schema must be an object", path));
    for (const auto& [key, value] : s.items()) {
      static const std::set<std::string> kKnown = {
          "type",  "properties",           "required", "items", "enum", "const", "anyOf",
          "oneOf", "additionalProperties", "minItems"};
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

  Result<int> Typed(const json& s, const std::string& type, const std::string& path) {
    if (type == "string") return string_;
    if (type == "integer") return integer_;
    if (type == "number") return number_;
    if (type == "boolean") return boolean_;
    if (type == "null") return null_;
    if (type == "array") return Array(s, path);
    if (type == "object") return Object(s, path);
    return Status::InvalidArgument(fmt::format("{}/type: '{}' is not a JSON schema type", path, type));
  }

  Result<int> Array(const json& s, const std::string& path) {
    int item = value_;
    if (s.contains("items")) {
      TEMPER_ASSIGN_OR_RETURN(item, Schema(s["items"], path + "/items"));
    }
    const int64_t min_items = s.value("minItems", int64_t{0});
    if (min_items < 0 || min_items > 1) {
      return Status::InvalidArgument(fmt::format("{}/minItems: only 0 or 1 is supported", path));
    }
    const int rest = Add(path + "/rest", {});
    grammar_.rules[static_cast<size_t>(rest)].alternatives = {
        {},
        Concat({Literal(","), {Ref(ws_)}, {Ref(item)}, {Ref(rest)}})};
    std::vector<Sequence> alternatives = {Concat({Literal("["), {Ref(item)}, {Ref(rest)}, Literal("]")})};
    if (min_items == 0) alternatives.push_back(Literal("[]"));
    return Add(path, std::move(alternatives));
  }

  Result<int> Object(const json& s, const std::string& path) {
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
    // "key": value for each property, in the schema's order.
    std::vector<int> members;
    std::vector<bool> needed;
    for (const auto& [name, sub] : properties.items()) {
      TEMPER_ASSIGN_OR_RETURN(int value, Schema(sub, path + "/properties/" + name));
      members.push_back(
          Add(path + "/" + name, {Concat({Literal(json(name).dump()), Literal(":"), {Ref(ws_)}, {Ref(value)}})}));
      needed.push_back(required.count(name) > 0);
    }
    // after[i]: the properties from i on when one is already written (each then starts with a
    // comma); first[i]: the same when none is written yet.
    const size_t n = members.size();
    std::vector<int> after(n + 1), first(n + 1);
    after[n] = Add(path + "/end", {{}});
    first[n] = after[n];
    for (size_t i = n; i-- > 0;) {
      std::vector<Sequence> a = {Concat({Literal(","), {Ref(ws_)}, {Ref(members[i])}, {Ref(after[i + 1])}})};
      if (!needed[i]) a.push_back({Ref(after[i + 1])});
      after[i] = Add(fmt::format("{}/after-{}", path, i), std::move(a));
      std::vector<Sequence> f = {{Ref(members[i]), Ref(after[i + 1])}};
      if (!needed[i]) f.push_back({Ref(first[i + 1])});
      first[i] = Add(fmt::format("{}/first-{}", path, i), std::move(f));
    }
    return Add(path, {Concat({Literal("{"), {Ref(first[0])}, Literal("}")})});
  }

  Grammar grammar_;
  int ws_ = 0, string_ = 0, integer_ = 0, number_ = 0, boolean_ = 0, null_ = 0, value_ = 0, any_object_ = 0;
};

}  // namespace

Result<Grammar> JsonSchemaGrammar(const nlohmann::ordered_json& schema) { return Compiler().Compile(schema); }

}  // namespace temper::engine
