#include "engine/constrain/schema_refs.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "engine/gemma4_vocabulary.h"
#include "engine/tokenizer/chat_format.h"

namespace temper::engine {
namespace {

using ojson = nlohmann::ordered_json;

TEST_CASE("local $refs resolve as JSON pointers, and remote, anchored and dangling ones are refused", "[constrain]") {
  const ojson root = ojson::parse(
      R"({"$defs": {"A": {"type": "string"}, "a/b~c": {"type": "integer"}, "sp ace": {"type": "null"}},
          "prefixItems": [{"type": "boolean"}]})");
  auto at = [&](const char* ref) { return ResolveLocalRef(root, ojson(ref), "schema"); };
  CHECK(*at("#").value() == root);
  CHECK(*at("#/$defs/A").value() == root["$defs"]["A"]);
  CHECK(*at("#/$defs/a~1b~0c").value() == root["$defs"]["a/b~c"]);
  CHECK(*at("#/$defs/sp%20ace").value() == root["$defs"]["sp ace"]);
  CHECK(*at("#/prefixItems/0").value() == root["prefixItems"][0]);
  CHECK(at("#/$defs/B").status().message() == "schema/$ref: '#/$defs/B' points to nothing in the schema");
  CHECK(at("#/prefixItems/1").status().message() == "schema/$ref: '#/prefixItems/1' points to nothing in the schema");
  CHECK(at("defs.json#/A").status().message() ==
        "schema/$ref: 'defs.json#/A' is not a local reference ('#' or '#/...'); remote schemas are not fetched");
  CHECK(at("#node").status().message() ==
        "schema/$ref: '#node' is an anchor; only JSON pointers ('#/...') are supported");
  CHECK(ResolveLocalRef(root, ojson(3), "schema").status().message() == "schema/$ref: must be a string");
}

// pydantic 2.13's parameters for a tool taking `person: Person` (an Address inside, an Optional
// field) and a recursive `tree: Node`.
const char* kToolParameters = R"({"$defs": {"Address": {"properties": {"street": {"title": "Street", "type": "string"}},
  "required": ["street"], "title": "Address", "type": "object"}, "Node": {"properties": {"name": {"type": "string"},
  "children": {"items": {"$ref": "#/$defs/Node"}, "type": "array"}}, "required": ["name"], "type": "object",
  "description": "a tree"}}, "properties": {"address": {"$ref": "#/$defs/Address", "description": "where"},
  "email": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null, "title": "Email"},
  "tree": {"$ref": "#/$defs/Node"}, "tags": {"type": ["array", "null"], "items": {"type": "string"}}},
  "required": ["address", "tree"], "type": "object"})";

TEST_CASE("a tool's parameters as the chat template renders them: refs written out, null unions nullable",
          "[constrain]") {
  Result<nlohmann::json> out = RenderableToolSchema(nlohmann::json::parse(kToolParameters), "tools[0].parameters");
  INFO(out.status().ToString());
  REQUIRE(out.ok());
  const nlohmann::json& p = *out;
  CHECK_FALSE(p.contains("$defs"));
  CHECK(p["properties"]["address"] ==
        nlohmann::json::parse(R"({"properties": {"street": {"title": "Street", "type": "string"}},
          "required": ["street"], "title": "Address", "type": "object", "description": "where"})"));
  CHECK(p["properties"]["email"] ==
        nlohmann::json::parse(R"({"type": "string", "nullable": true, "default": null, "title": "Email"})"));
  CHECK(p["properties"]["tags"]["type"] == "array");
  CHECK(p["properties"]["tags"]["nullable"] == true);
  // A recursion is written out once; the ref met again inside it is its target's type and description.
  const nlohmann::json& tree = p["properties"]["tree"];
  CHECK(tree["properties"]["children"]["items"] ==
        nlohmann::json::parse(R"({"type": "object", "description": "a tree"})"));
  CHECK(RenderableToolSchema(nullptr, "p").value().is_null());
  CHECK(RenderableToolSchema(nlohmann::json::parse(R"({"properties": {"a": {"$ref": "#/$defs/X"}}})"),
                             "tools[2].parameters")
            .status()
            .message() == "tools[2].parameters/properties/a/$ref: '#/$defs/X' points to nothing in the schema");

  // The template itself needs a type on every property: it refuses the parameters as pydantic
  // writes them, and renders them written out.
  static const Tokenizer tokenizer = Tokenizer::FromJson(testing::Gemma4VocabularyTokenizerJson().value()).value();
  const ChatFormat format = ChatFormat::Create(tokenizer).value();
  Conversation c;
  c.messages.push_back({.role = ChatRole::kUser, .content = "Register Ada."});
  c.tools = {{"register", "Registers a person", nlohmann::json::parse(kToolParameters)}};
  CHECK(format.Render(c).status().message() == "tools[0].parameters.properties.address: missing \"type\"");
  c.tools[0].parameters = p;
  Result<RenderedPrompt> rendered = format.Render(c);
  INFO(rendered.status().ToString());
  REQUIRE(rendered.ok());
  CHECK_THAT(rendered->text, Catch::Contains("address:{description:<|\"|>where<|\"|>,properties:{street:{type:<|\"|>"
                                             "STRING<|\"|>}},required:[<|\"|>street<|\"|>],type:<|\"|>OBJECT<|\"|>}"));
  CHECK_THAT(rendered->text, Catch::Contains("email:{nullable:true,type:<|\"|>STRING<|\"|>}"));
}

}  // namespace
}  // namespace temper::engine
