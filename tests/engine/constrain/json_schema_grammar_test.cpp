#include "engine/constrain/json_schema_grammar.h"

#include <functional>
#include <random>
#include <regex>

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "engine/constrain/grammar_matches.h"
#include "engine/constrain/token_mask.h"
#include "engine/gzip_file.h"

namespace temper::engine {
namespace {

using testing::Matches;

using json = nlohmann::ordered_json;

Grammar Compiled(const json& schema) {
  auto g = JsonSchemaGrammar(schema);
  INFO(g.status().ToString());
  REQUIRE(g.ok());
  return std::move(*g);
}

const json kToolArgs = json::parse(R"({
  "type": "object",
  "description": "a Worker's shell call",
  "properties": {
    "command": {"type": "string"},
    "timeout": {"type": "integer"},
    "sudo": {"type": "boolean"},
    "mode": {"enum": ["check", "apply"]}
  },
  "required": ["command", "mode"]
})");

TEST_CASE("a JSON schema's grammar takes exactly the texts the schema accepts", "[constrain]") {
  const Grammar g = Compiled(kToolArgs);
  for (const char* ok :
       {R"({"command":"ls -l /etc","mode":"check"})", R"({"command": "x", "timeout": 30, "mode": "apply"})",
        R"({"command":"a \"q\" \\ \u00e9 é","sudo":false,"mode":"check"})",
        R"({"command":"","timeout":-7,"sudo":true,"mode":"apply"})"}) {
    INFO(ok);
    CHECK(Matches(g, ok));
    CHECK(json::accept(ok));
  }
  for (const char* bad :
       {R"({})", R"({"mode":"check"})", R"({"command":1,"mode":"check"})", R"({"command":"x","mode":"delete"})",
        R"({"command":"x","mode":"check","extra":1})", R"({"mode":"check","command":"x"})",
        R"({"command":"x","mode":"check")", R"({"command":"x\q","mode":"check"})", R"({"command":"x",,"mode":"check"})",
        R"({"command":"x","timeout":01,"mode":"check"})", "{\"command\":\"tab\there\",\"mode\":\"check\"}",
        R"( {"command":"x","mode":"check"})", "{\"command\":\"\xc3(\",\"mode\":\"check\"}",
        "{\"command\":\"\xed\xa0\x80\",\"mode\":\"check\"}", "{\"command\":\"<|x\",\"mode\":\"check\"}",
        "{\"command\":\"x<turn|>\",\"mode\":\"check\"}"}) {
    INFO(bad);
    CHECK_FALSE(Matches(g, bad));
  }
}

TEST_CASE("arrays, alternatives, constants and any JSON value", "[constrain]") {
  const Grammar list = Compiled(json::parse(R"({"type":"array","items":{"type":"integer"},"minItems":1})"));
  CHECK(Matches(list, "[1, 2,3]"));
  CHECK_FALSE(Matches(list, "[]"));
  CHECK_FALSE(Matches(list, "[1,]"));
  const Grammar maybe = Compiled(json::parse(R"({"anyOf":[{"type":"string"},{"type":"null"}]})"));
  CHECK(Matches(maybe, "null"));
  CHECK(Matches(maybe, R"("s")"));
  CHECK_FALSE(Matches(maybe, "1"));
  const Grammar numbers = Compiled(json::parse(R"({"type":["number","boolean"]})"));
  for (const char* ok : {"0", "-1.5", "2e10", "3.25E-2", "true"}) CHECK(Matches(numbers, ok));
  for (const char* bad : {"1.", ".5", "+1", "--1", "1e"}) CHECK_FALSE(Matches(numbers, bad));
  const Grammar any = Compiled(json::object());
  CHECK(Matches(any, R"({"a":[1,{"b":null}],"c":"\u00e9","d":-0.5})"));
  CHECK_FALSE(Matches(any, R"({"a":})"));
  const Grammar fixed = Compiled(json::parse(R"({"const":{"k":[1,"two"]}})"));
  CHECK(Matches(fixed, R"({"k":[1,"two"]})"));
  CHECK_FALSE(Matches(fixed, R"({"k":[1,"three"]})"));
}

TEST_CASE("string lengths: minLength and maxLength count characters, and a required string starts with a non-space",
          "[constrain]") {
  const Grammar g = Compiled(json::parse(R"({"type":"string","minLength":1,"maxLength":3})"));
  for (const char* ok : {R"("a")", R"("abc")", "\"\xc3\xa9t\xc3\xa9\"", R"("a\n")", R"("a\u00e9b")", R"("a  ")"}) {
    INFO(ok);
    CHECK(Matches(g, ok));
  }
  for (const char* bad : {R"("")", R"("abcd")", R"(" a")", R"("\na")", "\"\xc3\xa9t\xc3\xa9s\""}) {
    INFO(bad);
    CHECK_FALSE(Matches(g, bad));
  }
  const Grammar at_most = Compiled(json::parse(R"({"type":"string","maxLength":2})"));
  CHECK(Matches(at_most, R"("")"));
  CHECK(Matches(at_most, R"(" x")"));
  CHECK_FALSE(Matches(at_most, R"("xyz")"));
  for (const char* schema :
       {R"({"type":"string","maxLength":-1})", R"({"type":"string","maxLength":"3"})",
        R"({"type":"string","maxLength":100000})", R"({"type":"string","minLength":4,"maxLength":3})"}) {
    INFO(schema);
    CHECK_FALSE(JsonSchemaGrammar(json::parse(schema)).ok());
  }
}

TEST_CASE("a schema keyword the grammar cannot honour is refused by path", "[constrain]") {
  auto error = [](const char* schema) { return JsonSchemaGrammar(json::parse(schema)).status().message(); };
  CHECK(error(R"({"type":"object","properties":{"n":{"type":"integer","multipleOf":5}}})") ==
        "schema/properties/n: 'multipleOf' is not supported");
  CHECK(error(R"({"type":"object","properties":{"a":{}},"required":["b"]})") ==
        R"(schema/required: "b" is not one of the properties)");
  CHECK(error(R"({"type":"text"})") == "schema/type: 'text' is not a JSON schema type");
  CHECK(error(R"({"type":"array","uniqueItems":true})") == "schema: 'uniqueItems' true is not supported");
  CHECK(error(R"({"type":"object","patternProperties":{"^x":{}}})") == "schema: 'patternProperties' is not supported");
  CHECK(error(R"({"allOf":[{"type":"string"},{"minLength":1}]})") == "schema/allOf: only one schema is supported");
  CHECK(error(R"({"type":"string","format":"iri"})") ==
        "schema/format: 'iri' is not supported (supported: date, time, date-time, duration, email, hostname, ipv4, "
        "ipv6, uri, uuid)");
  CHECK(error(R"({"type":"integer","format":"uint8"})") ==
        R"(schema/format: "uint8" is not supported for numbers (supported: int32, int64, float, double))");
  CHECK(error(R"({"type":"integer","minimum":5,"maximum":4.5})") ==
        "schema: no integer lies within the bounds (>= 5, <= 4)");
  CHECK(error(R"({"type":"number","exclusiveMinimum":1,"maximum":1})") ==
        "schema: no number lies within the bounds (> 1, <= 1)");
  CHECK(error(R"({"type":"array","minItems":3,"maxItems":2})") == "schema: minItems 3 exceeds the 2 items allowed");
  CHECK(error(R"({"type":"array","maxItems":5000})") == "schema/maxItems: must be an integer from 0 to 1024");
  CHECK(error(R"({"type":"array","prefixItems":[{}],"items":false,"minItems":2})") ==
        "schema: minItems 2 exceeds the 1 items allowed");
}

// pydantic 2.13's model_json_schema() for
//   class Address(BaseModel):
//       street: str
//       zip_code: str = Field(pattern=r"^\d{5}(-\d{4})?$")
//   class Person(BaseModel):
//       name: str = Field(min_length=1, max_length=40)
//       age: int = Field(ge=0, le=150)
//       height_m: float = Field(gt=0, lt=3.5)
//       address: Address
//       born: datetime
//       email: Optional[str] = None
const char* kPydanticPerson =
    R"({"$defs": {"Address": {"properties": {"street": {"title": "Street", "type": "string"}, "zip_code": {"pattern": "^\\d{5}(-\\d{4})?$", "title": "Zip Code", "type": "string"}}, "required": ["street", "zip_code"], "title": "Address", "type": "object"}}, "properties": {"name": {"maxLength": 40, "minLength": 1, "title": "Name", "type": "string"}, "age": {"maximum": 150, "minimum": 0, "title": "Age", "type": "integer"}, "height_m": {"exclusiveMaximum": 3.5, "exclusiveMinimum": 0, "title": "Height M", "type": "number"}, "address": {"$ref": "#/$defs/Address"}, "born": {"format": "date-time", "title": "Born", "type": "string"}, "email": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null, "title": "Email"}}, "required": ["name", "age", "height_m", "address", "born"], "title": "Person", "type": "object"})";

TEST_CASE("pydantic's nested model with Field bounds, a pattern and a date-time", "[constrain]") {
  const Grammar g = Compiled(json::parse(kPydanticPerson));
  auto person = [&](std::string_view age, std::string_view height, std::string_view zip, std::string_view born) {
    return fmt::format(
        R"({{"name": "Ada", "age": {}, "height_m": {}, "address": {{"street": "1 Main St", "zip_code": "{}"}}, "born": "{}"}})",
        age, height, zip, born);
  };
  const std::vector<std::string> valid = {
      person("36", "1.7", "02139", "1815-12-10T08:30:00Z"),
      person("0", "0.5", "02139-1234", "2024-02-29T23:59:59.5+01:00"),
      person("150", "3.4999", "99999", "2000-01-01T00:00:00-05:30"),
      R"({"name":"A","age":1,"height_m":2,"address":{"street":"","zip_code":"12345"},"born":"1999-12-31T12:00:00Z","email":null})",
      R"({"name":"A","age":1,"height_m":2,"address":{"street":"","zip_code":"12345"},"born":"1999-12-31T12:00:00Z","email":"a@b.c"})"};
  for (const std::string& ok : valid) {
    INFO(ok);
    CHECK(Matches(g, ok));
  }
  for (const std::string& bad :
       {person("151", "1.7", "02139", "1815-12-10T08:30:00Z"), person("-1", "1.7", "02139", "1815-12-10T08:30:00Z"),
        person("36", "0", "02139", "1815-12-10T08:30:00Z"), person("36", "3.5", "02139", "1815-12-10T08:30:00Z"),
        person("36", "1e0", "02139", "1815-12-10T08:30:00Z"), person("36", "1.7", "2139", "1815-12-10T08:30:00Z"),
        person("36", "1.7", "02139-12", "1815-12-10T08:30:00Z"), person("36", "1.7", "02139", "2023-02-29T08:30:00Z"),
        person("36", "1.7", "02139", "1815-12-10 08:30:00Z"), person("36", "1.7", "02139", "1815-12-10T08:30:00"),
        person("36", "1.7", "02139", "1815-13-10T08:30:00Z"), person("36", "1.7", "02139", "1815-12-10T24:00:00Z"),
        person("36.0", "1.7", "02139", "1815-12-10T08:30:00Z")}) {
    INFO(bad);
    CHECK_FALSE(Matches(g, bad));
  }
}

TEST_CASE("$ref: local pointers, recursion to a bounded depth, and refusals by path", "[constrain]") {
  // pydantic 2.13's schema for `class Node(BaseModel): name: str; children: list["Node"] = []`.
  const Grammar tree = Compiled(json::parse(
      R"({"$defs": {"Node": {"properties": {"name": {"title": "Name", "type": "string"}, "children": {"default": [], "items": {"$ref": "#/$defs/Node"}, "title": "Children", "type": "array"}}, "required": ["name"], "title": "Node", "type": "object"}}, "$ref": "#/$defs/Node"})"));
  CHECK(Matches(tree, R"({"name":"a"})"));
  CHECK(
      Matches(tree, R"({"name":"a","children":[{"name":"b","children":[{"name":"c"}]},{"name":"d","children":[]}]})"));
  CHECK_FALSE(Matches(tree, R"({"name":"a","children":[{"children":[]}]})"));
  // As deep as kMaxRefRecursion levels, not one more.
  auto nested = [](int levels) {
    std::string text = R"({"name":"x"})";
    for (int i = 1; i < levels; ++i) text = R"({"name":"x","children":[)" + text + "]}";
    return text;
  };
  CHECK(Matches(tree, nested(kMaxRefRecursion)));
  CHECK_FALSE(Matches(tree, nested(kMaxRefRecursion + 1)));

  // "#" is the whole schema; "definitions" as zod-to-json-schema writes them.
  const Grammar list = Compiled(json::parse(
      R"({"type":"object","properties":{"v":{"type":"integer"},"next":{"anyOf":[{"$ref":"#"},{"type":"null"}]}},"required":["v","next"]})"));
  CHECK(Matches(list, R"({"v":1,"next":{"v":2,"next":null}})"));
  CHECK_FALSE(Matches(list, R"({"v":1})"));
  const Grammar old = Compiled(json::parse(
      R"({"definitions":{"id":{"type":"string","format":"uuid"}},"type":"array","items":{"$ref":"#/definitions/id"}})"));
  CHECK(Matches(old, R"(["123e4567-e89b-12d3-a456-426614174000"])"));
  CHECK_FALSE(Matches(old, R"(["123e4567"])"));

  auto error = [](const char* schema) { return JsonSchemaGrammar(json::parse(schema)).status().message(); };
  CHECK(error(R"({"type":"object","properties":{"a":{"$ref":"#/$defs/B"}}})") ==
        "schema/properties/a/$ref: '#/$defs/B' points to nothing in the schema");
  CHECK(error(R"({"properties":{"a":{"$ref":"https://example.com/a.json"}}})") ==
        "schema/properties/a/$ref: 'https://example.com/a.json' is not a local reference ('#' or '#/...'); remote "
        "schemas are not fetched");
  CHECK(error(R"({"$defs":{"A":{"type":"object","properties":{"x":{"minimum":"1"}}}},"$ref":"#/$defs/A"})") ==
        "schema/$defs/A/properties/x/minimum: must be a number");
  CHECK(error(R"({"$ref":"#/$defs/A","$defs":{"A":{"$ref":"#/$defs/A"}}})") ==
        "schema: no instance of the schema ends within 8 levels of a recursive '$ref'");
  CHECK(error(R"({"type":"object","properties":{"me":{"$ref":"#"}},"required":["me"]})") ==
        "schema: no instance of the schema ends within 8 levels of a recursive '$ref'");
  CHECK(error(R"({"$defs":{"A":{"type":"string"}},"properties":{"a":{"$ref":"#/$defs/A","maxLength":3}}})") ==
        "schema/properties/a: 'maxLength' beside '$ref' is not supported");
}

// Whether `text` is an integer the grammar of `schema` takes, for every integer in a window.
void CheckIntegers(const json& schema, int64_t from, int64_t to, const std::function<bool(int64_t)>& in_range) {
  const Grammar g = Compiled(schema);
  for (int64_t n = from; n <= to; ++n) {
    INFO(schema.dump() << " " << n);
    CHECK(Matches(g, std::to_string(n)) == in_range(n));
  }
}

TEST_CASE("integer bounds: the digits spell exactly the integers in range", "[constrain]") {
  CheckIntegers(json::parse(R"({"type":"integer","minimum":-137,"maximum":2045})"), -3000, 3000,
                [](int64_t n) { return n >= -137 && n <= 2045; });
  CheckIntegers(json::parse(R"({"type":"integer","exclusiveMinimum":-10,"exclusiveMaximum":-2})"), -300, 300,
                [](int64_t n) { return n > -10 && n < -2; });
  CheckIntegers(json::parse(R"({"type":"integer","minimum":7.5})"), -100, 1200, [](int64_t n) { return n >= 8; });
  CheckIntegers(json::parse(R"({"type":"integer","maximum":-99.5})"), -1200, 100, [](int64_t n) { return n <= -100; });
  CheckIntegers(json::parse(R"({"type":"integer","minimum":0,"maximum":100,"exclusiveMaximum":true})"), -10, 200,
                [](int64_t n) { return n >= 0 && n < 100; });
  const Grammar some = Compiled(json::parse(R"({"type":"integer","minimum":10})"));
  for (const char* bad : {"010", "-0", "1.0", "1e3", "+12", ""}) CHECK_FALSE(Matches(some, bad));
  CHECK(Matches(some, "123456789012345678901234567890"));

  // zod's z.number().int(): the safe integers.
  const Grammar safe =
      Compiled(json::parse(R"({"type":"integer","minimum":-9007199254740991,"maximum":9007199254740991})"));
  for (const char* ok :
       {"0", "-1", "42", "9007199254740991", "-9007199254740991", "9007199254740990", "999999999999999"}) {
    INFO(ok);
    CHECK(Matches(safe, ok));
  }
  for (const char* bad : {"9007199254740992", "-9007199254740992", "10000000000000000", "-0", "1.5"}) {
    INFO(bad);
    CHECK_FALSE(Matches(safe, bad));
  }
  const Grammar int32 = Compiled(json::parse(R"({"type":"integer","format":"int32"})"));
  CHECK(Matches(int32, "-2147483648"));
  CHECK(Matches(int32, "2147483647"));
  CHECK_FALSE(Matches(int32, "2147483648"));
}

TEST_CASE("number bounds: integer and fraction digits held to the range, exactly", "[constrain]") {
  // Every decimal of up to three fraction digits in a window, against the bounds as exact decimals
  // (in thousandths, so the comparison is exact).
  struct Case {
    const char* schema;
    std::function<bool(int64_t)> in_range;  // by value in thousandths
  };
  const Case cases[] = {
      {R"({"type":"number","exclusiveMinimum":0,"exclusiveMaximum":3.5})", [](int64_t m) { return m > 0 && m < 3500; }},
      {R"({"type":"number","minimum":-2.25,"maximum":10})", [](int64_t m) { return m >= -2250 && m <= 10000; }},
      {R"({"type":"number","minimum":0})", [](int64_t m) { return m >= 0; }},
      {R"({"type":"number","exclusiveMaximum":-0.125})", [](int64_t m) { return m < -125; }},
      {R"({"type":"number","minimum":1.05,"maximum":1.5})", [](int64_t m) { return m >= 1050 && m <= 1500; }},
      {R"({"type":"number","exclusiveMinimum":-1.5,"exclusiveMaximum":-1.25})",
       [](int64_t m) { return m > -1500 && m < -1250; }},
  };
  for (const Case& c : cases) {
    const Grammar g = Compiled(json::parse(c.schema));
    for (int64_t m = -12000; m <= 12000; m += 1 + (m > -3000 && m < 3000 ? 0 : 6)) {
      const std::string sign = m < 0 ? "-" : "";
      const int64_t a = m < 0 ? -m : m;
      const std::string whole = sign + std::to_string(a / 1000);
      const std::string frac = fmt::format("{:03d}", a % 1000);
      for (const std::string& text : {whole + "." + frac, whole + "." + frac + "000"}) {
        INFO(c.schema << " " << text);
        CHECK(Matches(g, text) == (c.in_range(m) && text != "-0.000" && text != "-0.000000"));
      }
      if (a % 1000 == 0) {
        INFO(c.schema << " " << whole);
        CHECK(Matches(g, whole) == (c.in_range(m) && whole != "-0"));
      }
    }
  }
  const Grammar positive = Compiled(json::parse(R"({"type":"number","exclusiveMinimum":0})"));
  for (const char* ok : {"0.0001", "7", "123456789.5"}) CHECK(Matches(positive, ok));
  for (const char* bad : {"0", "0.0", "-0.5", "1e5", "1.", ".5", "00.5"}) {
    INFO(bad);
    CHECK_FALSE(Matches(positive, bad));
  }
}

// The JSON text of a string value.
std::string Quoted(std::string_view s) { return json(std::string(s)).dump(); }

TEST_CASE("pattern: the regular expression, unanchored where it says so, as a JSON string", "[constrain]") {
  struct Case {
    const char* pattern;
    std::vector<std::string> ok, bad;
  };
  const Case cases[] = {
      {R"(^\d{3}-\d{4}$)", {"555-1234"}, {"555-123", "5551234", "a555-1234", "555-12345"}},
      {"^[a-z_][a-z0-9_]*$", {"a", "snake_case_2"}, {"", "2a", "A", "a-b"}},
      {"abc", {"abc", "xxabcyy", "abcabc"}, {"ab", "xbc", ""}},
      {"^ab", {"ab", "abzzz"}, {"zab"}},
      {"yz$", {"yz", "xxyz"}, {"yzx"}},
      {"^(cat|dog)s?$", {"cat", "dogs"}, {"cats!", "bird"}},
      {"^[^@\\s]+@[^@\\s]+$", {"a@b", "x.y@z.w"}, {"@b", "a@", "a b@c", "a@b@c"}},
      {"^a{2,3}b{2,}c?$", {"aabb", "aaabbbbc"}, {"abb", "aaaabb", "aab"}},
      {R"(^\w+\.\w+$)", {"file.txt"}, {"file", "file.", ".txt"}},
      {R"(^[\x41-\x43\u00e9]+$)",
       {"ABC",
        "\xc3\xa9"
        "A"},
       {"D", "e"}},
      {R"(^(?:[01]\d|2[0-3]):[0-5]\d$)", {"00:00", "23:59"}, {"24:00", "12:60"}},
      {"^.{2}$", {"ab", "\xc3\xa9\xe2\x82\xac"}, {"a", "abc", "a\n"}},
      {"^\"[^\"]*\"$", {"\"quoted\""}, {"\"a\"b\""}},
      {R"(^C:\\[a-z]+$)", {"C:\\temp"}, {"C:temp", "C:\\\\temp"}},
      {R"(^a\tb$)", {"a\tb"}, {"a b"}},
  };
  for (const Case& c : cases) {
    json schema = {{"type", "string"}, {"pattern", c.pattern}};
    const Grammar g = Compiled(schema);
    for (const std::string& ok : c.ok) {
      INFO(c.pattern << " " << Quoted(ok));
      CHECK(Matches(g, Quoted(ok)));
    }
    for (const std::string& bad : c.bad) {
      INFO(c.pattern << " " << Quoted(bad));
      CHECK_FALSE(Matches(g, Quoted(bad)));
    }
  }
  // One spelling per character: escapes only where JSON needs them.
  const Grammar quote = Compiled(json::parse(R"({"type":"string","pattern":"^[a\"]+$"})"));
  CHECK(Matches(quote, R"("a\"a")"));
  CHECK_FALSE(Matches(quote, R"("a"a")"));
  CHECK_FALSE(Matches(quote, R"("\u0061")"));
  // Never "<|" or "|>", whatever the pattern allows.
  const Grammar pipes = Compiled(json::parse(R"({"type":"string","pattern":"^[<|>a]*$"})"));
  CHECK(Matches(pipes, R"("a<a|a>")"));
  CHECK(Matches(pipes, R"("|<>")"));
  CHECK_FALSE(Matches(pipes, R"("a<|a")"));
  CHECK_FALSE(Matches(pipes, R"("a|>a")"));
  // With a length: both hold.
  const Grammar counted =
      Compiled(json::parse(R"({"type":"string","pattern":"^[a-z]+$","minLength":2,"maxLength":3})"));
  CHECK(Matches(counted, R"("ab")"));
  CHECK(Matches(counted, R"("abc")"));
  CHECK_FALSE(Matches(counted, R"("a")"));
  CHECK_FALSE(Matches(counted, R"("abcd")"));

  auto error = [](const char* pattern) {
    return JsonSchemaGrammar(
               json{{"type", "object"}, {"properties", {{"id", {{"type", "string"}, {"pattern", pattern}}}}}})
        .status()
        .message();
  };
  CHECK(error("^(?=a)b$") == "schema/properties/id/pattern: lookahead '(?=' at offset 1 is not supported");
  CHECK(error("(?<!x)y") == "schema/properties/id/pattern: lookbehind '(?<!' at offset 0 is not supported");
  CHECK(error("^(a)\\1$") == "schema/properties/id/pattern: backreference '\\1' at offset 4 is not supported");
  CHECK(error("\\bword") == "schema/properties/id/pattern: word boundary '\\b' at offset 0 is not supported");
  CHECK(error("\\p{L}+") == "schema/properties/id/pattern: Unicode property escape '\\p' at offset 0 is not supported");
  CHECK(error("a^b") == "schema/properties/id/pattern: anchor '^' after the start at offset 1 is not supported");
  CHECK(error("(?i)abc") == "schema/properties/id/pattern: group flags '(?' at offset 0 is not supported");
  CHECK(error("a(b") == "schema/properties/id/pattern: unclosed '(' at offset 1");
  CHECK(error("[a-") == "schema/properties/id/pattern: unclosed '[' at offset 0");
  CHECK(error("^<\\|$") ==
        "schema/properties/id: no string keeps to the pattern, format and length together (strings never hold '<|' "
        "or '|>')");
}

// Random texts against std::regex (ECMAScript, the same syntax): the automaton reads patterns as a
// regex engine does.
TEST_CASE("pattern automata agree with std::regex on random strings", "[constrain]") {
  const char* patterns[] = {"^(ab|a)*b?$", "a.c",          "^[^abc]{1,3}$", "^(a|bc){2,4}$", "^x?y+z*$",
                            "(aa|b)+c$",   "^[a-c-]+[.]$", "^(a*b*)*c$",    "b{2}",          "^\\d+(\\.\\d{1,2})?$"};
  std::mt19937_64 rng(11);
  const std::string alphabet = "abcxyz.-1 ";
  for (const char* p : patterns) {
    const Grammar g = Compiled(json{{"type", "string"}, {"pattern", p}});
    const std::regex re(p, std::regex::ECMAScript);
    for (int i = 0; i < 400; ++i) {
      std::string s;
      const size_t n = rng() % 7;
      for (size_t k = 0; k < n; ++k) s += alphabet[rng() % alphabet.size()];
      INFO(p << " " << Quoted(s));
      CHECK(Matches(g, Quoted(s)) == std::regex_search(s, re));
    }
  }
}

TEST_CASE("formats: each a grammar of its own", "[constrain]") {
  struct Case {
    const char* format;
    std::vector<std::string> ok, bad;
  };
  const Case cases[] = {
      {"date",
       {"2024-02-29", "2000-02-29", "1999-12-31", "0001-01-01"},
       {"2023-02-29", "1900-02-29", "2024-04-31", "2024-13-01", "0000-01-01", "2024-1-01", "20240101"}},
      {"time", {"23:59:59Z", "00:00:00.123+05:30", "12:30:00-08:00"}, {"24:00:00Z", "12:30:00", "12:60:00Z", "12:30Z"}},
      {"date-time",
       {"2024-06-01T12:00:00Z", "2024-06-01T12:00:00.5-01:00"},
       {"2024-06-01 12:00:00Z", "2024-06-01T12:00:00"}},
      {"duration", {"P1D", "PT1H30M", "P1Y2M3DT4H5M6.5S", "P2W"}, {"P", "PT", "P1H", "1D", "P1DT"}},
      {"uuid",
       {"123e4567-e89b-12d3-a456-426614174000", "00000000-0000-0000-0000-00000000000A"},
       {"123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400g"}},
      {"email",
       {"ada@example.com", "first.last+tag@sub.example.org"},
       {"ada", "@example.com", "ada@example", "ada@@example.com", ".ada@example.com", "a b@example.com"}},
      {"ipv4", {"127.0.0.1", "255.255.255.255", "0.0.0.0"}, {"256.0.0.1", "1.2.3", "01.2.3.4", "1.2.3.4.5"}},
      {"ipv6",
       {"::1", "2001:db8::8a2e:370:7334", "fe80::", "::", "1:2:3:4:5:6:7:8", "::ffff:192.168.0.1", "1::2:3"},
       {"1:2:3:4:5:6:7:8:9", "1::2::3", "12345::", ":1", "g::1"}},
      {"uri",
       {"https://example.com/a?b=c#d", "urn:isbn:0451450523", "mailto:ada@example.com"},
       {"example.com", "https://exa mple.com", "1http://x", "http://x/%zz"}},
      {"hostname", {"example.com", "a-b.c", "localhost"}, {"-a.com", "a..b", "a_b.com"}},
  };
  for (const Case& c : cases) {
    const Grammar g = Compiled(json{{"type", "string"}, {"format", c.format}});
    for (const std::string& ok : c.ok) {
      INFO(c.format << " " << ok);
      CHECK(Matches(g, Quoted(ok)));
    }
    for (const std::string& bad : c.bad) {
      INFO(c.format << " " << bad);
      CHECK_FALSE(Matches(g, Quoted(bad)));
    }
  }
}

TEST_CASE("a format or pattern with a long length: pydantic's HttpUrl, a long repetition", "[constrain]") {
  const Grammar url =
      Compiled(json::parse(R"({"format": "uri", "maxLength": 2083, "minLength": 1, "type": "string"})"));
  CHECK(Matches(url, R"("https://example.com/a")"));
  CHECK(Matches(url, Quoted("https://example.com/" + std::string(2063, 'a'))));
  CHECK_FALSE(Matches(url, Quoted("https://example.com/" + std::string(2064, 'a'))));
  CHECK_FALSE(Matches(url, R"("")"));
  const Grammar long_run = Compiled(json::parse(R"({"type":"string","pattern":"^a{1000}$"})"));
  CHECK(Matches(long_run, Quoted(std::string(1000, 'a'))));
  CHECK_FALSE(Matches(long_run, Quoted(std::string(999, 'a'))));
  CHECK(JsonSchemaGrammar(json::parse(R"({"type":"string","pattern":"^(a|b)*a(a|b){12}$"})")).status().message() ==
        "schema/pattern: the automaton would exceed 4096 states");
}

TEST_CASE("arrays: minItems, maxItems and prefixItems", "[constrain]") {
  const Grammar two_to_four =
      Compiled(json::parse(R"({"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":4})"));
  for (const char* ok : {"[1,2]", "[1, 2, 3]", "[1,2,3,4]"}) CHECK(Matches(two_to_four, ok));
  for (const char* bad : {"[]", "[1]", "[1,2,3,4,5]", "[1,\"a\"]"}) CHECK_FALSE(Matches(two_to_four, bad));
  const Grammar at_least = Compiled(json::parse(R"({"type":"array","minItems":3})"));
  CHECK(Matches(at_least, R"([1,"a",null,{}])"));
  CHECK_FALSE(Matches(at_least, "[1,2]"));
  const Grammar at_most = Compiled(json::parse(R"({"type":"array","maxItems":0})"));
  CHECK(Matches(at_most, "[]"));
  CHECK_FALSE(Matches(at_most, "[1]"));
  const Grammar pair = Compiled(json::parse(
      R"({"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false,"minItems":1})"));
  for (const char* ok : {R"(["a"])", R"(["a",1])"}) CHECK(Matches(pair, ok));
  for (const char* bad : {"[]", "[1]", R"(["a","b"])", R"(["a",1,2])"}) CHECK_FALSE(Matches(pair, bad));
  const Grammar head =
      Compiled(json::parse(R"({"type":"array","prefixItems":[{"const":"cmd"}],"items":{"type":"string"}})"));
  CHECK(Matches(head, R"(["cmd","a","b"])"));
  CHECK_FALSE(Matches(head, R"(["x","a"])"));
  CHECK_FALSE(Matches(head, R"(["cmd",1])"));
}

TEST_CASE("additionalProperties, nullable and null unions, types the keywords imply", "[constrain]") {
  // pydantic's dict[str, int].
  const Grammar map = Compiled(json::parse(R"({"additionalProperties":{"type":"integer"},"type":"object"})"));
  for (const char* ok : {"{}", R"({"a":1})", R"({"a": 1, "b\"c": 2})"}) CHECK(Matches(map, ok));
  for (const char* bad : {R"({"a":"x"})", R"({"a":1,})"}) CHECK_FALSE(Matches(map, bad));
  const Grammar open = Compiled(json::parse(
      R"({"type":"object","properties":{"id":{"type":"integer"}},"required":["id"],"additionalProperties":true})"));
  for (const char* ok : {R"({"id":1})", R"({"id":1,"note":"x","tags":[1]})", R"({"id":1,"idx":2,"i":3})"}) {
    INFO(ok);
    CHECK(Matches(open, ok));
  }
  for (const char* bad : {R"({"note":"x"})", R"({"id":1,"id":2})", R"({"note":"x","id":1})"}) {
    INFO(bad);
    CHECK_FALSE(Matches(open, bad));
  }
  const Grammar closed = Compiled(json::parse(R"({"type":"object","additionalProperties":false})"));
  CHECK(Matches(closed, "{}"));
  CHECK_FALSE(Matches(closed, R"({"a":1})"));

  const Grammar nullable = Compiled(json::parse(R"({"type":"string","format":"date","nullable":true})"));
  CHECK(Matches(nullable, "null"));
  CHECK(Matches(nullable, R"("2024-01-31")"));
  CHECK_FALSE(Matches(nullable, R"("x")"));
  const Grammar listed = Compiled(json::parse(R"({"type":["integer","null"],"minimum":1})"));
  CHECK(Matches(listed, "null"));
  CHECK(Matches(listed, "3"));
  CHECK_FALSE(Matches(listed, "0"));

  const Grammar implied = Compiled(json::parse(R"({"properties":{"n":{"minimum":0}},"required":["n"]})"));
  CHECK(Matches(implied, R"({"n":0.5})"));
  CHECK_FALSE(Matches(implied, R"({"n":-1})"));
  CHECK_FALSE(Matches(implied, "[]"));
  const Grammar wrapped = Compiled(json::parse(R"({"allOf":[{"type":"boolean"}],"description":"pydantic 1"})"));
  CHECK(Matches(wrapped, "true"));
  CHECK_FALSE(Matches(wrapped, "1"));
}

// The Gemma 3 tokenizer (262,144 ids), once per process: every case on it is one TEST_CASE.
const Tokenizer& Gemma3() {
  static const Tokenizer tokenizer = [] {
    Result<std::string> text =
        testing::ReadGzipFile(std::string(TEMPER_TEST_DATA_DIR) + "/tokenizer/gemma3-tokenizer.json.gz");
    if (!text.ok()) FAIL(text.status().ToString());
    Result<Tokenizer> tok = Tokenizer::FromJson(*text);
    if (!tok.ok()) FAIL(tok.status().ToString());
    return std::move(tok).value();
  }();
  return tokenizer;
}

TEST_CASE("token masks over the 262K vocabulary: every allowed token fits, and no valid text is blocked",
          "[constrain]") {
  const Tokenizer& tok = Gemma3();
  const int32_t end = *tok.TokenToId("<end_of_turn>");
  auto vocabulary = std::make_shared<const TokenVocabulary>(TokenVocabulary::FromTokenizer(tok, {end}).value());
  auto grammar = std::make_shared<const Grammar>(Compiled(kToolArgs));
  CHECK(TokenBytes(tok, *tok.TokenToId("<0x0A>")) == "\n");
  CHECK_FALSE(TokenBytes(tok, end).has_value());

  // Complete: the tokens of a valid text are each allowed where they come, and the end after it.
  const std::string text = R"({"command": "grep -E '^TMOUT=' /etc/profile.d/*.sh", "timeout": 60, "mode": "check"})";
  auto masks = std::make_shared<GrammarMasks>(grammar, vocabulary);
  GrammarConstraint valid(masks);
  for (int32_t id : tok.Encode(text)) {
    INFO("token " << id << " " << *TokenBytes(tok, id));
    REQUIRE(TokenAllowed(valid.Allowed(), id));
    REQUIRE(valid.Accept(id).ok());
  }
  CHECK(valid.Complete());
  CHECK(TokenAllowed(valid.Allowed(), end));

  // Sound: a "model" that picks any allowed token never breaks the grammar; the end token is
  // offered only once the text is whole, and what it ends parses and keeps to the schema.
  std::mt19937_64 rng(7);
  int completed = 0;
  for (int run = 0; run < 20; ++run) {
    GrammarConstraint c(masks);
    std::string out;
    for (int step = 0; step < 60; ++step) {
      const TokenBits& bits = c.Allowed();
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < static_cast<int32_t>(vocabulary->size()); ++id) {
        if (TokenAllowed(bits, id)) allowed.push_back(id);
      }
      REQUIRE_FALSE(allowed.empty());
      // The end whenever offered, else short tokens mostly: a random walk that ever finishes.
      int32_t pick = allowed[rng() % allowed.size()];
      if (TokenAllowed(bits, end)) pick = end;
      for (int tries = 0; tries < 8 && vocabulary->bytes(pick) && vocabulary->bytes(pick)->size() > 2; ++tries) {
        pick = allowed[rng() % allowed.size()];
      }
      REQUIRE(c.Accept(pick).ok());
      if (pick == end) {
        json parsed = json::parse(out);  // throws (fails the case) on anything but JSON
        CHECK(parsed.contains("command"));
        CHECK((parsed["mode"] == "check" || parsed["mode"] == "apply"));
        ++completed;
        break;
      }
      out += *vocabulary->bytes(pick);
    }
  }
  CHECK(completed > 0);
}

TEST_CASE("masks for a counted string over the 262K vocabulary: random walks write whole values within its length",
          "[constrain]") {
  const Tokenizer& tok = Gemma3();
  const int32_t end = *tok.TokenToId("<end_of_turn>");
  auto vocabulary = std::make_shared<const TokenVocabulary>(TokenVocabulary::FromTokenizer(tok, {end}).value());
  auto grammar = std::make_shared<const Grammar>(Compiled(json::parse(
      R"({"type":"object","properties":{"lesson":{"type":"string","minLength":1,"maxLength":24}},"required":["lesson"]})")));
  auto masks = std::make_shared<GrammarMasks>(grammar, vocabulary);
  std::mt19937_64 rng(3);
  for (int run = 0; run < 12; ++run) {
    GrammarConstraint c(masks);
    std::string out;
    bool ended = false;
    for (int step = 0; step < 80 && !ended; ++step) {
      const TokenBits& bits = c.Allowed();
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < static_cast<int32_t>(vocabulary->size()); ++id) {
        if (TokenAllowed(bits, id)) allowed.push_back(id);
      }
      REQUIRE_FALSE(allowed.empty());
      const int32_t pick = TokenAllowed(bits, end) ? end : allowed[rng() % allowed.size()];
      REQUIRE(c.Accept(pick).ok());
      if (pick == end) {
        ended = true;
      } else {
        out += *vocabulary->bytes(pick);
      }
    }
    INFO(out);
    REQUIRE(ended);  // the length bound closes the string: no walk runs on
    const nlohmann::json parsed = nlohmann::json::parse(out);
    const std::string lesson = parsed["lesson"].get<std::string>();
    // Characters, not bytes.
    size_t chars = 0;
    for (unsigned char ch : lesson) chars += (ch & 0xc0) != 0x80;
    CHECK(chars >= 1);
    CHECK(chars <= 24);
    CHECK(lesson[0] != ' ');
  }
}

TEST_CASE("masks for patterns, formats and bounds over the 262K vocabulary: random walks write valid values",
          "[constrain]") {
  const Tokenizer& tok = Gemma3();
  const int32_t end = *tok.TokenToId("<end_of_turn>");
  auto vocabulary = std::make_shared<const TokenVocabulary>(TokenVocabulary::FromTokenizer(tok, {end}).value());
  auto grammar = std::make_shared<const Grammar>(Compiled(json::parse(
      R"({"type":"object","properties":{"ticket":{"type":"string","pattern":"[A-Z]{2}-\\d+","maxLength":12},
          "slug":{"type":"string","pattern":"^[a-z0-9-]{1,10}$"},"day":{"type":"string","format":"date"},
          "n":{"type":"integer","minimum":-5,"maximum":50},"x":{"type":"number","exclusiveMinimum":0,"maximum":1}},
          "required":["ticket","slug","day","n","x"]})")));
  auto masks = std::make_shared<GrammarMasks>(grammar, vocabulary);
  const std::regex ticket("[A-Z]{2}-\\d+"), slug("^[a-z0-9-]{1,10}$"), day("^\\d{4}-\\d{2}-\\d{2}$");
  std::mt19937_64 rng(5);
  int ended = 0;
  for (int run = 0; run < 12; ++run) {
    GrammarConstraint c(masks);
    std::string out;
    for (int step = 0; step < 120; ++step) {
      const TokenBits& bits = c.Allowed();
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < static_cast<int32_t>(vocabulary->size()); ++id) {
        if (TokenAllowed(bits, id)) allowed.push_back(id);
      }
      REQUIRE_FALSE(allowed.empty());
      const int32_t pick = TokenAllowed(bits, end) ? end : allowed[rng() % allowed.size()];
      REQUIRE(c.Accept(pick).ok());
      if (pick == end) break;
      out += *vocabulary->bytes(pick);
    }
    if (!c.Complete()) continue;
    ++ended;
    INFO(out);
    const json v = json::parse(out);
    CHECK(std::regex_search(v["ticket"].get<std::string>(), ticket));
    CHECK(std::regex_search(v["slug"].get<std::string>(), slug));
    CHECK(std::regex_search(v["day"].get<std::string>(), day));
    CHECK(v["n"].get<int64_t>() >= -5);
    CHECK(v["n"].get<int64_t>() <= 50);
    CHECK(v["x"].get<double>() > 0);
    CHECK(v["x"].get<double>() <= 1);
  }
  CHECK(ended > 0);
}

}  // namespace
}  // namespace temper::engine
