#include "engine/constrain/json_schema_grammar.h"

#include <algorithm>
#include <array>
#include <functional>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "engine/constrain/schema_refs.h"

namespace temper::engine {

struct DecimalBound {
  bool negative = false;
  std::string whole = "0";  // the integer part's digits, no leading zeros
  std::string fraction;     // the fraction's digits, no trailing zeros
  bool strict = false;      // exclusive
};

namespace {

using json = nlohmann::ordered_json;
using Sequence = std::vector<GrammarElement>;

// Keywords that describe without constraining, accepted and ignored.
const std::set<std::string> kAnnotations = {"description", "title",         "$schema",  "examples",
                                            "default",     "$comment",      "readOnly", "writeOnly",
                                            "deprecated",  "discriminator", "$defs",    "definitions"};

// The keywords each type's constraints are spelled with: they imply the type where none is given.
const std::pair<const char*, std::set<std::string>> kTypeKeywords[] = {
    {"object", {"properties", "required", "additionalProperties"}},
    {"array", {"items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems"}},
    {"string", {"minLength", "maxLength", "pattern", "format"}},
    {"number", {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}},
};

// Whether the compiler reads `key` (or knows it for an annotation).
bool Known(const std::string& key) {
  static const std::set<std::string> kAnyType = {"type",  "enum",  "const",    "anyOf",
                                                 "oneOf", "allOf", "nullable", "$ref"};
  return kAnyType.count(key) || kAnnotations.count(key) ||
         std::any_of(std::begin(kTypeKeywords), std::end(kTypeKeywords),
                     [&](const auto& type) { return type.second.count(key) > 0; });
}

// The formats, as patterns (regex_automaton.h). Dates keep to each month's length and to leap
// years, and to years 0001-9999 (Python's datetime, behind pydantic, has no year 0).
constexpr const char* kYear = "(?:[1-9]\\d{3}|0[1-9]\\d{2}|00[1-9]\\d|000[1-9])";
constexpr const char* kLeapYear = "(?:\\d\\d(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)";
std::string DatePattern() {
  return fmt::format(
      "(?:{0}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\\d|30)|"
      "02-(?:0[1-9]|1\\d|2[0-8]))|{1}-02-29)",
      kYear, kLeapYear);
}
constexpr const char* kTime = "(?:[01]\\d|2[0-3]):[0-5]\\d:[0-5]\\d(?:\\.\\d+)?(?:Z|[+-](?:[01]\\d|2[0-3]):[0-5]\\d)";
constexpr const char* kDurationTime =
    "T(?:\\d+H(?:\\d+M)?(?:\\d+(?:\\.\\d+)?S)?|\\d+M(?:\\d+(?:\\.\\d+)?S)?|\\d+(?:\\.\\d+)?S)";
constexpr const char* kIpv4 =
    "(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)(?:\\.(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)){3}";
constexpr const char* kLabel = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?";

// RFC 4291 §2.2's text forms (RFC 3986's IPv6address): eight groups, or fewer around one "::",
// the last two may be an IPv4 address.
std::string Ipv6Pattern() {
  const std::string h = "[0-9A-Fa-f]{1,4}";
  const std::string ls32 = fmt::format("(?:{0}:{0}|{1})", h, kIpv4);
  auto before = [&](int n) { return n < 0 ? std::string() : fmt::format("(?:(?:{0}:){{0,{1}}}{0})?", h, n); };
  auto groups = [&](int n) { return fmt::format("(?:{}:){{{}}}", h, n); };
  std::vector<std::string> forms = {groups(6) + ls32, "::" + groups(5) + ls32};
  for (int k = 0; k <= 4; ++k) forms.push_back(before(k) + "::" + groups(4 - k) + ls32);
  forms.back() = before(4) + "::" + ls32;
  forms.push_back(before(5) + "::" + h);
  forms.push_back(before(6) + "::");
  std::string out = "(?:";
  for (size_t i = 0; i < forms.size(); ++i) out += (i ? "|" : "") + forms[i];
  return out + ")";
}

// The pattern of a string format; empty for one not known.
std::string FormatPattern(const std::string& format) {
  if (format == "date") return DatePattern();
  if (format == "time") return kTime;
  if (format == "date-time") return DatePattern() + "T" + kTime;
  if (format == "duration") {
    return fmt::format("P(?:\\d+W|(?:\\d+Y(?:\\d+M)?(?:\\d+D)?|\\d+M(?:\\d+D)?|\\d+D)(?:{0})?|{0})", kDurationTime);
  }
  if (format == "uuid") return "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}";
  if (format == "ipv4") return kIpv4;
  if (format == "ipv6") return Ipv6Pattern();
  if (format == "hostname") return fmt::format("{0}(?:\\.{0})*", kLabel);
  // A dot-atom local part of the characters addresses use in practice, and a domain of a TLD.
  if (format == "email") {
    return "[A-Za-z0-9_%+-]+(?:\\.[A-Za-z0-9_%+-]+)*@(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?\\.)+[A-Za-z]{2,}";
  }
  // A scheme, ':', and RFC 3986's URI characters, '%' only before two hex digits.
  if (format == "uri") {
    return "[A-Za-z][A-Za-z0-9+.-]*:(?:[A-Za-z0-9._~!$&'()*+,;=:@/?#\\[\\]-]|%[0-9A-Fa-f]{2})+";
  }
  return {};
}
constexpr const char* kFormats = "date, time, date-time, duration, email, hostname, ipv4, ipv6, uri, uuid";

// OpenAPI's number formats: int32 and int64 bound an integer; float and double hold any JSON number.
bool NumericFormat(const json& format) {
  return format == "int32" || format == "int64" || format == "float" || format == "double";
}
// Whether `s`'s types include one of `names` (a format applies to the instances of its type only).
bool HasType(const json& s, std::initializer_list<const char*> names) {
  if (!s.contains("type")) return false;
  const json& t = s["type"];
  for (const char* n : names) {
    if (t == n || (t.is_array() && std::find(t.begin(), t.end(), n) != t.end())) return true;
  }
  return false;
}

// Strings of min to max characters (max -1: unbounded); with a minLength, the first is no space.
CharDfa LengthDfa(int64_t min, int64_t max) {
  const int64_t cap = max >= 0 ? max : min;
  CharDfa dfa;
  for (int64_t j = 0; j <= cap; ++j) {
    CharDfa::State st{{}, j >= min};
    const CodeSet chars = j == 0 && min > 0 ? Difference(AnyCodePoint(), CodePoints(U" \t\r\n")) : AnyCodePoint();
    if (j < cap) st.edges.push_back({chars, static_cast<int>(j + 1)});
    if (j == cap && max < 0) st.edges.push_back({chars, static_cast<int>(j)});
    dfa.states.push_back(std::move(st));
  }
  return dfa;
}

// Strings that never hold "<|" or "|>": anywhere (0), right after a '<' (1), right after a '|' (2).
CharDfa NoControlTokenText() {
  const CodeSet other = Difference(AnyCodePoint(), CodePoints(U"<|"));
  const CodeSet lt = CodePoints(U"<"), bar = CodePoints(U"|");
  CharDfa dfa;
  dfa.states.push_back({{{other, 0}, {lt, 1}, {bar, 2}}, true});
  dfa.states.push_back({{{other, 0}, {lt, 1}}, true});
  dfa.states.push_back({{{Difference(other, CodePoints(U">")), 0}, {lt, 1}, {bar, 2}}, true});
  return dfa;
}

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

// Decimal digit strings without sign: n + 1 and n - 1 (n > 0), and their order.
std::string Increment(std::string n) {
  for (size_t i = n.size(); i-- > 0;) {
    if (n[i] != '9') {
      ++n[i];
      return n;
    }
    n[i] = '0';
  }
  return "1" + n;
}
std::string Decrement(std::string n) {
  for (size_t i = n.size(); i-- > 0;) {
    if (n[i] != '0') {
      --n[i];
      break;
    }
    n[i] = '9';
  }
  const size_t nonzero = n.find_first_not_of('0');
  return nonzero == std::string::npos ? "0" : n.substr(nonzero);
}
int CompareDigits(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  return a.compare(b) < 0 ? -1 : a.compare(b) > 0 ? 1 : 0;
}
// |a| against |b|.
int CompareMagnitude(const DecimalBound& a, const DecimalBound& b) {
  if (int c = CompareDigits(a.whole, b.whole)) return c;
  for (size_t i = 0; i < std::max(a.fraction.size(), b.fraction.size()); ++i) {
    const char x = i < a.fraction.size() ? a.fraction[i] : '0', y = i < b.fraction.size() ? b.fraction[i] : '0';
    if (x != y) return x < y ? -1 : 1;
  }
  return 0;
}
int Compare(const DecimalBound& a, const DecimalBound& b) {
  if (a.negative != b.negative) return a.negative ? -1 : 1;
  const int c = CompareMagnitude(a, b);
  return a.negative ? -c : c;
}

// A JSON number's exact value: from its text as nlohmann writes it, exact for integers and the
// shortest that reads back for the rest ("0.1", "1e+30").
DecimalBound ToDecimal(const json& v) {
  const std::string text = v.dump();
  DecimalBound d;
  size_t i = 0;
  if (text[i] == '-') {
    d.negative = true;
    ++i;
  }
  std::string digits;
  int64_t point = -1;
  for (; i < text.size() && text[i] != 'e' && text[i] != 'E'; ++i) {
    if (text[i] == '.') {
      point = static_cast<int64_t>(digits.size());
    } else {
      digits.push_back(text[i]);
    }
  }
  if (point < 0) point = static_cast<int64_t>(digits.size());
  if (i < text.size()) point += std::stoll(text.substr(i + 1));
  if (point < 0) {
    digits.insert(0, static_cast<size_t>(-point), '0');
    point = 0;
  }
  if (point > static_cast<int64_t>(digits.size())) digits.append(static_cast<size_t>(point) - digits.size(), '0');
  d.whole = digits.substr(0, static_cast<size_t>(point));
  d.fraction = digits.substr(static_cast<size_t>(point));
  d.whole.erase(0, std::min(d.whole.find_first_not_of('0'), d.whole.size()));
  if (d.whole.empty()) d.whole = "0";
  d.fraction.erase(d.fraction.find_last_not_of('0') + 1);
  if (d.whole == "0" && d.fraction.empty()) d.negative = false;
  return d;
}

// The least integer >= d and the greatest <= d.
DecimalBound Ceil(DecimalBound d) {
  if (d.fraction.empty()) return d;
  d.fraction.clear();
  if (!d.negative) d.whole = Increment(d.whole);
  if (d.whole == "0") d.negative = false;
  return d;
}
DecimalBound Floor(DecimalBound d) {
  if (d.fraction.empty()) return d;
  d.fraction.clear();
  if (d.negative) d.whole = Increment(d.whole);
  return d;
}
// An integer's neighbours.
DecimalBound Next(DecimalBound d) {
  if (!d.negative) {
    d.whole = Increment(d.whole);
  } else {
    d.whole = Decrement(d.whole);
    if (d.whole == "0") d.negative = false;
  }
  return d;
}
DecimalBound Previous(DecimalBound d) {
  if (d.negative || d.whole == "0") {
    d.whole = d.negative ? Increment(d.whole) : "1";
    d.negative = true;
  } else {
    d.whole = Decrement(d.whole);
  }
  return d;
}
std::string Text(const DecimalBound& d) {
  return (d.negative ? "-" : "") + d.whole + (d.fraction.empty() ? "" : "." + d.fraction);
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
  digits_ = Add("digits", {});
  grammar_.rules[static_cast<size_t>(digits_)].alternatives = {{}, {Chars(ByteRange('0', '9')), Ref(digits_)}};
  const int int_part = Add("int-part", {Literal("0"), {Chars(ByteRange('1', '9')), Ref(digits_)}});
  integer_ = Add("integer", {{Ref(int_part)}, Concat({Literal("-"), {Ref(int_part)}})});
  const int fraction = Add("fraction", {{}, {Chars(Bytes(".")), Chars(ByteRange('0', '9')), Ref(digits_)}});
  const int exponent =
      Add("exponent", {{},
                       {Chars(Bytes("eE")), Chars(ByteRange('0', '9')), Ref(digits_)},
                       {Chars(Bytes("eE")), Chars(Bytes("+-")), Chars(ByteRange('0', '9')), Ref(digits_)}});
  number_ = Add("number", {{Ref(integer_), Ref(fraction), Ref(exponent)}});
  boolean_ = Add("boolean", {Literal("true"), Literal("false")});
  null_ = Add("null", {Literal("null")});
  // Any value (an empty schema). Gemma's keys are bare names.
  value_ = Add("value", {});
  key_ = string_;
  if (gemma) {
    const ByteSet first = Union({ByteRange('a', 'z'), ByteRange('A', 'Z'), Bytes("_")});
    const int rest = Add("key-rest", {});
    grammar_.rules[static_cast<size_t>(rest)].alternatives = {
        {},
        {Chars(Union({first, ByteRange('0', '9'), Bytes(".-")})), Ref(rest)}};
    key_ = Add("key", {{Chars(first), Ref(rest)}});
  }
  const int members = Add("members", {});
  const int member =
      Add("member", {Concat({{Ref(key_)}, Literal(":"), gemma ? Sequence{} : Sequence{Ref(ws_)}, {Ref(value_)}})});
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
  // An alternative that refers to a rule with no finite match (a $ref recursion cut off, a number
  // range's dead end) can never end: dropped, so every text the grammar starts can be made whole.
  const std::vector<int64_t> lengths = MinimalLengths(grammar_);
  for (GrammarRule& rule : grammar_.rules) {
    std::erase_if(rule.alternatives, [&](const Sequence& alt) {
      return std::any_of(alt.begin(), alt.end(), [&](const GrammarElement& e) {
        return e.rule >= 0 && lengths[static_cast<size_t>(e.rule)] >= kNoCompletion;
      });
    });
  }
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
  root_ = &s;
  root_path_ = path;
  expanding_.clear();
  refs_.clear();
  TEMPER_ASSIGN_OR_RETURN(int rule, Node(s, path));
  // Only a $ref recursion cut at its depth can leave the whole schema without a finite instance.
  if (!refs_.empty() && MinimalLengths(grammar_)[static_cast<size_t>(rule)] >= kNoCompletion) {
    return Status::InvalidArgument(fmt::format(
        "{}: no instance of the schema ends within {} levels of a recursive '$ref'", path, kMaxRefRecursion));
  }
  return rule;
}

Result<int> SchemaGrammarBuilder::Node(const json& s, const std::string& path) {
  if (s.is_boolean()) {
    if (s.get<bool>()) return value_;
    return Status::InvalidArgument(fmt::format("{}: the schema false accepts no value", path));
  }
  if (!s.is_object()) return Status::InvalidArgument(fmt::format("{}: a schema must be an object", path));
  for (const auto& [key, value] : s.items()) {
    if (!Known(key)) {
      return Status::InvalidArgument(fmt::format("{}: '{}' is not supported", path, key));
    }
  }
  if (s.contains("uniqueItems") && s["uniqueItems"] != false) {
    return Status::InvalidArgument(fmt::format("{}: 'uniqueItems' true is not supported", path));
  }
  TEMPER_ASSIGN_OR_RETURN(int core, Core(s, path));
  if (!s.contains("nullable")) return core;
  if (!s["nullable"].is_boolean()) return Status::InvalidArgument(fmt::format("{}/nullable: must be a boolean", path));
  if (!s["nullable"].get<bool>()) return core;
  return Add(path + "|null", {{Ref(core)}, {Ref(null_)}});
}

Result<int> SchemaGrammarBuilder::Reference(const json& s, const std::string& path) {
  for (const auto& [key, value] : s.items()) {
    if (key != "$ref" && key != "nullable" && !kAnnotations.count(key)) {
      return Status::InvalidArgument(fmt::format("{}: '{}' beside '$ref' is not supported", path, key));
    }
  }
  TEMPER_ASSIGN_OR_RETURN(const json* target, ResolveLocalRef(*root_, s["$ref"], path));
  const std::string ref = s["$ref"].get<std::string>();
  const int depth = expanding_[ref];
  // Past the depth: a rule that matches nothing, which Finish drops with the alternatives needing it.
  if (depth >= kMaxRefRecursion) return Add(path + "/$ref (recursion cut)", {});
  if (auto it = refs_.find({ref, depth}); it != refs_.end()) return it->second;
  ++expanding_[ref];
  Result<int> rule = Node(*target, root_path_ + ref.substr(1));
  --expanding_[ref];
  if (rule.ok()) refs_[{ref, depth}] = *rule;
  return rule;
}

Result<int> SchemaGrammarBuilder::Core(const json& s, const std::string& path) {
  if (s.contains("$ref")) return Reference(s, path);
  if (s.contains("allOf")) {
    const json& all = s["allOf"];
    if (!all.is_array() || all.size() != 1) {
      return Status::InvalidArgument(fmt::format("{}/allOf: only one schema is supported", path));
    }
    for (const auto& [key, value] : s.items()) {
      if (key != "allOf" && key != "nullable" && !kAnnotations.count(key)) {
        return Status::InvalidArgument(fmt::format("{}: '{}' beside 'allOf' is not supported", path, key));
      }
    }
    return Node(all[0], path + "/allOf/0");
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
      TEMPER_ASSIGN_OR_RETURN(int r, Node(s[key][i], fmt::format("{}/{}/{}", path, key, i)));
      alternatives.push_back({Ref(r)});
    }
    return Add(path, std::move(alternatives));
  }
  std::vector<std::string> types;
  if (!s.contains("type")) {
    // No type: the one the keywords constrain (narrower than JSON Schema, where they constrain
    // only values of their type and let any other through).
    for (const auto& [type, keywords] : kTypeKeywords) {
      if (std::any_of(keywords.begin(), keywords.end(), [&](const std::string& k) { return s.contains(k); })) {
        types.push_back(type);
      }
    }
    if (types.empty()) return value_;
  } else if (s["type"].is_string()) {
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
  if (type == "integer") return Number(s, true, path);
  if (type == "number") return Number(s, false, path);
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
  const bool formatted = s.contains("format") && !(NumericFormat(s["format"]) && HasType(s, {"integer", "number"}));
  if (!s.contains("pattern") && !formatted) {
    if (bounds[0] == 0 && bounds[1] < 0) return string_;
    return String(bounds[0], bounds[1]);
  }
  // The content as an automaton: the pattern, the format, the length, and never "<|" or "|>".
  CharDfa dfa = NoControlTokenText();
  if (s.contains("pattern")) {
    if (!s["pattern"].is_string()) return Status::InvalidArgument(fmt::format("{}/pattern: must be a string", path));
    Result<CharDfa> pattern = RegexDfa(s["pattern"].get<std::string>());
    if (!pattern.ok()) return Status::InvalidArgument(fmt::format("{}/pattern: {}", path, pattern.status().message()));
    TEMPER_ASSIGN_OR_RETURN(dfa, Intersect(dfa, *pattern));
  }
  if (formatted) {
    const std::string format = s["format"].is_string() ? s["format"].get<std::string>() : s["format"].dump();
    const std::string pattern = FormatPattern(format);
    if (pattern.empty()) {
      return Status::InvalidArgument(
          fmt::format("{}/format: '{}' is not supported (supported: {})", path, format, kFormats));
    }
    Result<CharDfa> format_dfa = RegexDfa("^" + pattern + "$");
    if (!format_dfa.ok()) return format_dfa.status().WithContext(path + "/format");
    Result<CharDfa> both = Intersect(dfa, *format_dfa);
    if (!both.ok()) return Status::InvalidArgument(fmt::format("{}: {}", path, both.status().message()));
    dfa = std::move(*both);
  }
  if (bounds[0] > 0 || bounds[1] >= 0) {
    Result<CharDfa> counted = Intersect(dfa, LengthDfa(bounds[0], bounds[1]));
    if (!counted.ok()) {
      return Status::InvalidArgument(
          fmt::format("{}: the pattern with minLength/maxLength: {}", path, counted.status().message()));
    }
    dfa = std::move(*counted);
  }
  if (dfa.states.empty()) {
    return Status::InvalidArgument(fmt::format(
        "{}: no string keeps to the pattern, format and length together (strings never hold '<|' or '|>')", path));
  }
  return AutomatonString(dfa, path);
}

// The ways the dialect spells one character of `chars`: one alternative per kind of spelling.
std::vector<SchemaGrammarBuilder::Sequence> SchemaGrammarBuilder::Spellings(const CodeSet& chars) const {
  std::vector<Sequence> out;
  ByteSet raw{};
  std::string escaped;                   // after a backslash: " \ b f n r t
  std::array<uint16_t, 2> unicode = {};  // controls spelled \u000X and \u001X, by low nibble
  for (const CodeRange& r : chars) {
    for (char32_t c = r.lo; c <= std::min<char32_t>(r.hi, 0x7f); ++c) {
      const auto b = static_cast<uint8_t>(c);
      const char* shorthand = c == '"'    ? "\""
                              : c == '\\' ? "\\"
                              : c == '\b' ? "b"
                              : c == '\f' ? "f"
                              : c == '\n' ? "n"
                              : c == '\r' ? "r"
                              : c == '\t' ? "t"
                                          : nullptr;
      if (!escapes_ || (c >= 0x20 && !shorthand)) {
        raw[b >> 6] |= uint64_t{1} << (b & 63);
      } else if (shorthand) {
        escaped += shorthand;
      } else {
        unicode[c >> 4] |= static_cast<uint16_t>(1u << (c & 15));
      }
    }
  }
  if (raw != ByteSet{}) out.push_back({Chars(raw)});
  if (!escaped.empty()) out.push_back({Chars(Bytes("\\")), Chars(Bytes(escaped))});
  for (int high = 0; high < 2; ++high) {
    if (!unicode[static_cast<size_t>(high)]) continue;
    std::string low;
    for (int n = 0; n < 16; ++n) {
      if (!(unicode[static_cast<size_t>(high)] >> n & 1)) continue;
      low += "0123456789abcdef"[n];
      if (n >= 10) low += "ABCDEF"[n - 10];
    }
    out.push_back(Concat({Literal("\\u00"), {Chars(Bytes(high ? "1" : "0")), Chars(Bytes(low))}}));
  }
  const CodeSet wide = Intersection(chars, {{0x80, kMaxCodePoint}});
  if (wide == Intersection(AnyCodePoint(), {{0x80, kMaxCodePoint}})) {
    out.push_back({Ref(utf8_)});
  } else {
    for (const CodeRange& r : wide) {
      for (const auto& bytes : Utf8Sequences(r.lo, r.hi)) {
        Sequence seq;
        for (const auto& [lo, hi] : bytes) seq.push_back(Chars(ByteRange(lo, hi)));
        out.push_back(std::move(seq));
      }
    }
  }
  return out;
}

int SchemaGrammarBuilder::AutomatonString(const CharDfa& dfa, const std::string& name, bool quoted) {
  // A rule per state: end here where it accepts, or spell a character and go on. The rules are
  // added last state first: a state's successors mostly come later in the automaton, so this puts
  // them before it, and MinimalLengths' passes settle at once.
  const size_t n = dfa.states.size();
  std::vector<int> rules(n);
  for (size_t k = n; k-- > 0;) rules[k] = Add(fmt::format("{}#{}", name, k), {});
  for (size_t k = 0; k < n; ++k) {
    std::vector<Sequence> alternatives;
    if (dfa.states[k].accepting) alternatives.push_back({});
    for (const CharDfa::Edge& e : dfa.states[k].edges) {
      for (Sequence spelling : Spellings(e.chars)) {
        spelling.push_back(Ref(rules[static_cast<size_t>(e.to)]));
        alternatives.push_back(std::move(spelling));
      }
    }
    grammar_.rules[static_cast<size_t>(rules[k])].alternatives = std::move(alternatives);
  }
  if (!quoted) return rules[0];
  const Sequence quote = escapes_ ? Literal("\"") : Sequence{Marker(kQuoteMarker)};
  return Add(name, {Concat({quote, {Ref(rules[0])}, quote})});
}

Result<int> SchemaGrammarBuilder::Number(const json& s, bool integer, const std::string& path) {
  // The tightest lower and upper bounds among the keywords.
  std::optional<DecimalBound> low, high;
  auto bound = [&](const char* key, bool is_low, bool strict) -> Status {
    const json& v = s[key];
    if (!v.is_number()) return Status::InvalidArgument(fmt::format("{}/{}: must be a number", path, key));
    DecimalBound b = ToDecimal(v);
    b.strict = strict;
    std::optional<DecimalBound>& current = is_low ? low : high;
    const int c = current ? Compare(b, *current) : 0;
    if (!current || (is_low ? c > 0 : c < 0) || (c == 0 && strict)) current = b;
    return Status::OK();
  };
  for (const auto& [key, is_low] : {std::pair{"minimum", true}, std::pair{"maximum", false}}) {
    if (!s.contains(key)) continue;
    // Draft 4: exclusiveMinimum/exclusiveMaximum true makes the bound exclusive.
    const json& exclusive = s.value(is_low ? "exclusiveMinimum" : "exclusiveMaximum", json(false));
    TEMPER_RETURN_IF_ERROR(bound(key, is_low, exclusive.is_boolean() && exclusive.get<bool>()));
  }
  for (const auto& [key, is_low] : {std::pair{"exclusiveMinimum", true}, std::pair{"exclusiveMaximum", false}}) {
    if (s.contains(key) && !s[key].is_boolean()) TEMPER_RETURN_IF_ERROR(bound(key, is_low, true));
  }
  if (s.contains("format") && !NumericFormat(s["format"]) && !HasType(s, {"string"})) {
    return Status::InvalidArgument(
        fmt::format("{}/format: {} is not supported for numbers (supported: int32, int64, float, double)", path,
                    s["format"].dump()));
  }
  if (s.contains("format") && s["format"].is_string()) {
    const std::string format = s["format"].get<std::string>();
    if (integer && (format == "int32" || format == "int64")) {
      const json limits = format == "int32" ? json::array({INT32_MIN, INT32_MAX}) : json::array({INT64_MIN, INT64_MAX});
      const DecimalBound least = ToDecimal(limits[0]), most = ToDecimal(limits[1]);
      if (!low || Compare(least, *low) > 0) low = least;
      if (!high || Compare(most, *high) < 0) high = most;
    }
  }
  if (!low && !high) return integer ? integer_ : number_;
  if (integer) {
    // Integers: the bounds rounded inwards, inclusive.
    if (low) {
      low = low->strict ? Next(Floor(*low)) : Ceil(*low);
      low->strict = false;
    }
    if (high) {
      high = high->strict ? Previous(Ceil(*high)) : Floor(*high);
      high->strict = false;
    }
  }
  // Negative numbers are '-' and a magnitude, the rest a magnitude: each side its range of them.
  std::vector<Sequence> alternatives;
  auto nonempty = [&](const DecimalBound& a, const DecimalBound* b) {
    if (!b) return true;
    const int c = CompareMagnitude(a, *b);
    if (integer && a.strict) return CompareDigits(Increment(a.whole), b->whole) <= 0;
    return c < 0 || (c == 0 && !a.strict && !b->strict);
  };
  auto magnitude = [](const DecimalBound& d, bool strict) {
    DecimalBound m = d;
    m.negative = false;
    m.strict = strict;
    return m;
  };
  if (!low || low->negative) {
    const DecimalBound from =
        high && high->negative ? magnitude(*high, high->strict) : DecimalBound{false, "0", "", true};
    const std::optional<DecimalBound> to = low ? std::optional(magnitude(*low, low->strict)) : std::nullopt;
    if (nonempty(from, to ? &*to : nullptr)) {
      alternatives.push_back(
          Concat({Literal("-"), {Ref(Magnitudes(from, to ? &*to : nullptr, integer, path + "/-"))}}));
    }
  }
  if (!high || !high->negative) {
    const DecimalBound from = low && !low->negative ? *low : DecimalBound{};
    if (nonempty(from, high ? &*high : nullptr)) {
      alternatives.push_back({Ref(Magnitudes(from, high ? &*high : nullptr, integer, path + "/+"))});
    }
  }
  if (alternatives.empty()) {
    return Status::InvalidArgument(fmt::format("{}: no {} lies within the bounds ({} {}, {} {})", path,
                                               integer ? "integer" : "number", low->strict ? ">" : ">=", Text(*low),
                                               high->strict ? "<" : "<=", Text(*high)));
  }
  return Add(path, std::move(alternatives));
}

std::vector<SchemaGrammarBuilder::Sequence> SchemaGrammarBuilder::IntegerDigits(const std::string& lo,
                                                                                const std::string* hi) {
  // Each length's numbers split into runs that differ in one digit position (the digit-range
  // decomposition of llguidance and xgrammar): 137..2045 is 13[7-9] 1[4-9]\d [2-9]\d\d 1\d\d\d
  // 20[0-3]\d 204[0-5].
  std::vector<Sequence> out;
  const auto digit = [](char a, char b) { return Chars(ByteRange(static_cast<uint8_t>(a), static_cast<uint8_t>(b))); };
  std::function<void(const std::string&, const std::string&, Sequence)> same_length = [&](const std::string& x,
                                                                                          const std::string& y,
                                                                                          Sequence prefix) {
    if (x.empty()) {
      out.push_back(std::move(prefix));
      return;
    }
    const std::string xs = x.substr(1), ys = y.substr(1);
    if (x[0] == y[0]) {
      prefix.push_back(digit(x[0], x[0]));
      same_length(xs, ys, std::move(prefix));
      return;
    }
    const bool low_zeros = xs.find_first_not_of('0') == std::string::npos;
    const bool high_nines = ys.find_first_not_of('9') == std::string::npos;
    if (!low_zeros) {
      Sequence p = prefix;
      p.push_back(digit(x[0], x[0]));
      same_length(xs, std::string(xs.size(), '9'), std::move(p));
    }
    const char a = low_zeros ? x[0] : static_cast<char>(x[0] + 1), b = high_nines ? y[0] : static_cast<char>(y[0] - 1);
    if (a <= b) {
      Sequence p = prefix;
      p.push_back(digit(a, b));
      p.insert(p.end(), xs.size(), digit('0', '9'));
      out.push_back(std::move(p));
    }
    if (!high_nines) {
      prefix.push_back(digit(y[0], y[0]));
      same_length(std::string(xs.size(), '0'), ys, std::move(prefix));
    }
  };
  const size_t last = hi ? hi->size() : lo.size();
  for (size_t length = lo.size(); length <= last; ++length) {
    const std::string x = length == lo.size() ? lo : "1" + std::string(length - 1, '0');
    const std::string y = hi && length == hi->size() ? *hi : std::string(length, '9');
    same_length(x, y, {});
  }
  if (!hi) {
    // Every number longer than lo.
    Sequence longer = {digit('1', '9')};
    longer.insert(longer.end(), lo.size(), digit('0', '9'));
    longer.push_back(Ref(digits_));
    out.push_back(std::move(longer));
  }
  return out;
}

int SchemaGrammarBuilder::Magnitudes(const DecimalBound& low, const DecimalBound* high, bool integer,
                                     const std::string& name) {
  if (integer) {
    const std::string from = low.strict ? Increment(low.whole) : low.whole;
    return Add(name, IntegerDigits(from, high ? &high->whole : nullptr));
  }
  // low.whole, with a fraction at least low's; the integers between, with any fraction;
  // high.whole, with a fraction at most high's.
  std::vector<Sequence> alternatives;
  if (high && low.whole == high->whole) {
    alternatives.push_back(Concat({Literal(low.whole), {Ref(Fraction(&low, high))}}));
    return Add(name, std::move(alternatives));
  }
  alternatives.push_back(Concat({Literal(low.whole), {Ref(Fraction(&low, nullptr))}}));
  const std::string from = Increment(low.whole);
  const std::string to = high ? Decrement(high->whole) : "";
  if (!high || CompareDigits(from, to) <= 0) {
    const int any_fraction = Fraction(nullptr, nullptr);
    for (Sequence digits : IntegerDigits(from, high ? &to : nullptr)) {
      digits.push_back(Ref(any_fraction));
      alternatives.push_back(std::move(digits));
    }
  }
  if (high) alternatives.push_back(Concat({Literal(high->whole), {Ref(Fraction(nullptr, high))}}));
  return Add(name, std::move(alternatives));
}

int SchemaGrammarBuilder::Fraction(const DecimalBound* low, const DecimalBound* high) {
  // An automaton over the fraction's digits: state (i, j) has matched the first i digits of low's
  // fraction and j of high's (-1: already past that bound, no longer constraining). Ends where the
  // digits left (read as zeros) keep to both bounds.
  const std::string lo = low ? low->fraction : "", hi = high ? high->fraction : "";
  const auto lo_size = static_cast<int>(lo.size()), hi_size = static_cast<int>(hi.size());
  auto can_end = [&](int i, int j) {
    const bool above = i < 0 || (i >= lo_size && !low->strict);
    const bool below = j < 0 || !high->strict || j < hi_size;
    return above && below;
  };
  constexpr int kDead = -2;
  auto step = [](int at, const std::string& digits, char c, bool is_low) {
    if (at < 0) return -1;
    const char d = at < static_cast<int>(digits.size()) ? digits[static_cast<size_t>(at)] : '0';
    if (c == d) return at < static_cast<int>(digits.size()) ? at + 1 : at;
    return (is_low ? c > d : c < d) ? -1 : kDead;
  };
  std::map<std::pair<int, int>, int> rules;
  // The digits from state (i, j): runs of digits that lead to one same state share an alternative.
  std::function<std::vector<Sequence>(int, int)> digits_from;
  std::function<int(int, int)> state = [&](int i, int j) {
    if (auto it = rules.find({i, j}); it != rules.end()) return it->second;
    const int rule = Add(fmt::format("fraction({},{})", i, j), {});
    rules[{i, j}] = rule;
    std::vector<Sequence> alternatives = digits_from(i, j);
    if (can_end(i, j)) alternatives.insert(alternatives.begin(), Sequence{});
    grammar_.rules[static_cast<size_t>(rule)].alternatives = std::move(alternatives);
    return rule;
  };
  digits_from = [&](int i, int j) {
    std::vector<Sequence> out;
    for (char c = '0'; c <= '9';) {
      const int ni = step(i, lo, c, true), nj = step(j, hi, c, false);
      char last = c;
      while (last < '9' && step(i, lo, last + 1, true) == ni && step(j, hi, last + 1, false) == nj) ++last;
      if (ni != kDead && nj != kDead) {
        out.push_back({Chars(ByteRange(static_cast<uint8_t>(c), static_cast<uint8_t>(last))), Ref(state(ni, nj))});
      }
      c = static_cast<char>(last + 1);
    }
    return out;
  };
  const int i0 = low ? 0 : -1, j0 = high ? 0 : -1;
  std::vector<Sequence> alternatives;
  if (can_end(i0, j0)) alternatives.push_back({});  // no fraction: the value of ".0"
  for (Sequence digits : digits_from(i0, j0)) alternatives.push_back(Concat({Literal("."), digits}));
  return Add("fraction", std::move(alternatives));
}

Result<int> SchemaGrammarBuilder::Array(const json& s, const std::string& path) {
  // Positions below prefix.size() take their own schema, the rest `rest` (unless items are closed).
  std::vector<int> prefix;
  int rest = value_;
  bool closed = false;
  const json* positional = s.contains("prefixItems")                      ? &s["prefixItems"]
                           : s.contains("items") && s["items"].is_array() ? &s["items"]
                                                                          : nullptr;
  const char* positional_key = s.contains("prefixItems") ? "prefixItems" : "items";
  if (positional) {
    if (!positional->is_array() || positional->size() > static_cast<size_t>(kMaxArrayItems)) {
      return Status::InvalidArgument(
          fmt::format("{}/{}: must be an array of at most {} schemas", path, positional_key, kMaxArrayItems));
    }
    for (size_t i = 0; i < positional->size(); ++i) {
      TEMPER_ASSIGN_OR_RETURN(int r, Node((*positional)[i], fmt::format("{}/{}/{}", path, positional_key, i)));
      prefix.push_back(r);
    }
  }
  // After a prefixItems, "items" holds the rest; after draft 4's items list, "additionalItems".
  const char* rest_key = s.contains("prefixItems") ? "items" : positional ? "additionalItems" : "items";
  if (s.contains(rest_key)) {
    if (s[rest_key] == false) {
      closed = true;
    } else {
      TEMPER_ASSIGN_OR_RETURN(rest, Node(s[rest_key], path + "/" + rest_key));
    }
  }
  int64_t bounds[2] = {0, -1};
  const char* keys[2] = {"minItems", "maxItems"};
  for (int i = 0; i < 2; ++i) {
    if (!s.contains(keys[i])) continue;
    const json& v = s[keys[i]];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > kMaxArrayItems) {
      return Status::InvalidArgument(
          fmt::format("{}/{}: must be an integer from 0 to {}", path, keys[i], kMaxArrayItems));
    }
    bounds[i] = v.get<int64_t>();
  }
  const auto fixed = static_cast<int64_t>(prefix.size());
  if (closed) bounds[1] = bounds[1] < 0 ? fixed : std::min(bounds[1], fixed);
  if (bounds[1] >= 0 && bounds[0] > bounds[1]) {
    return Status::InvalidArgument(
        fmt::format("{}: minItems {} exceeds the {} items allowed", path, bounds[0], bounds[1]));
  }
  const int64_t min = bounds[0], max = bounds[1];
  const int64_t cap = max >= 0 ? max : std::max(min, fixed);
  auto item = [&](int64_t k) { return k < fixed ? prefix[static_cast<size_t>(k)] : rest; };
  // after[k]: k items written; the array may end (k >= minItems) or take item k.
  std::vector<int> after(static_cast<size_t>(cap) + 1);
  for (int64_t k = cap; k >= 1; --k) after[static_cast<size_t>(k)] = Add(fmt::format("{}/after-{}", path, k), {});
  for (int64_t k = 1; k <= cap; ++k) {
    std::vector<Sequence> alternatives;
    if (k >= min) alternatives.push_back({});
    if (k < cap) {
      alternatives.push_back(Concat({Separator(), {Ref(item(k)), Ref(after[static_cast<size_t>(k + 1)])}}));
    } else if (max < 0) {
      alternatives.push_back(Concat({Separator(), {Ref(rest), Ref(after[static_cast<size_t>(k)])}}));
    }
    grammar_.rules[static_cast<size_t>(after[static_cast<size_t>(k)])].alternatives = std::move(alternatives);
  }
  std::vector<Sequence> alternatives;
  if (cap >= 1) alternatives.push_back(Concat({Literal("["), {Ref(item(0)), Ref(after[1])}, Literal("]")}));
  if (cap == 0 && max < 0) {
    // No minimum and nothing positional: an unbounded list of `rest`.
    const int more = Add(path + "/more", {});
    grammar_.rules[static_cast<size_t>(more)].alternatives = {{}, Concat({Separator(), {Ref(rest), Ref(more)}})};
    alternatives.push_back(Concat({Literal("["), {Ref(rest), Ref(more)}, Literal("]")}));
  }
  if (min == 0) alternatives.push_back(Literal("[]"));
  return Add(path, std::move(alternatives));
}

Result<int> SchemaGrammarBuilder::Object(const json& s, const std::string& path) {
  // Other keys than the declared ones: none (false or absent), any value (true) or a schema's.
  std::optional<int> additional;
  if (s.contains("additionalProperties") && s["additionalProperties"] != false) {
    TEMPER_ASSIGN_OR_RETURN(additional, Node(s["additionalProperties"], path + "/additionalProperties"));
  }
  if (!s.contains("properties") && !s.contains("additionalProperties")) return any_object_;
  const json properties = s.value("properties", json::object());
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
    TEMPER_ASSIGN_OR_RETURN(int value, Node(sub, path + "/properties/" + name));
    members.push_back(Add(path + "/" + name, {Concat({Key(name), {Ref(value)}})}));
    needed.push_back(required.count(name) > 0);
  }
  // after[i]: the properties from i on when one is already written (each then starts with a
  // separator); first[i]: the same when none is written yet. Past the declared ones, the others.
  const size_t n = members.size();
  std::vector<int> after(n + 1), first(n + 1);
  if (additional) {
    // A key that is none of the declared names (in Gemma's syntax, also a bare name).
    int key = key_;
    if (!names.empty()) {
      CharDfa keys = AllStringsExcept(names);
      if (dialect_ == SchemaDialect::kGemmaArguments) {
        TEMPER_ASSIGN_OR_RETURN(CharDfa bare, RegexDfa("^[A-Za-z_][A-Za-z0-9_.-]*$"));
        TEMPER_ASSIGN_OR_RETURN(keys, Intersect(keys, bare));
      }
      TEMPER_ASSIGN_OR_RETURN(keys, Intersect(keys, NoControlTokenText()));
      key = AutomatonString(keys, path + "/additional-key", dialect_ == SchemaDialect::kJson);
    }
    const Sequence colon = dialect_ == SchemaDialect::kJson ? Concat({Literal(":"), {Ref(ws_)}}) : Literal(":");
    const int member = Add(path + "/additional", {Concat({{Ref(key)}, colon, {Ref(*additional)}})});
    after[n] = Add(path + "/more", {});
    grammar_.rules[static_cast<size_t>(after[n])].alternatives = {{},
                                                                  Concat({Separator(), {Ref(member), Ref(after[n])}})};
    first[n] = Add(path + "/more-first", {{}, {Ref(member), Ref(after[n])}});
  } else {
    after[n] = Add(path + "/end", {{}});
    first[n] = after[n];
  }
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
