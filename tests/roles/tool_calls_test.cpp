// Matching calls to declared tools and checking their arguments: every mistake a model makes is a
// message that names the call, the argument and what was expected.
#include "roles/tool_calls.h"

#include <catch2/catch.hpp>

using namespace temper;
using nlohmann::json;

namespace {

std::vector<ToolDeclaration> Tools() {
  return {
      {"run_command", "Runs a command.",
       json::parse(
           R"({"type": "object", "properties": {"command": {"type": "string"}, "timeout_s": {"type": "integer"}},
                       "required": ["command"], "additionalProperties": false})")},
      {"finish", "Ends the attempt.", json::parse(R"({"type": "object", "properties": {"summary": {"type": "string"},
                       "outcome": {"type": "string", "enum": ["fixed", "already_compliant", "gave_up"]}},
                       "required": ["summary"], "additionalProperties": false})")},
  };
}

ChatResponse WithCall(std::string name, std::string args) {
  ChatResponse r;
  r.tool_calls.push_back({"c1", std::move(name), std::move(args)});
  return r;
}

std::string ErrorOf(const ChatResponse& r) {
  auto got = ResolveToolCalls(r, Tools());
  REQUIRE_FALSE(got.ok());
  CHECK(got.status().code() == StatusCode::kInvalidArgument);
  return got.status().message();
}

}  // namespace

TEST_CASE("well-formed calls resolve, from tool_calls or from the text") {
  auto a = ResolveToolCalls(WithCall("run_command", R"({"command": "id", "timeout_s": 30})"), Tools());
  REQUIRE(a.ok());
  REQUIRE(a->size() == 1);
  CHECK((*a)[0].id == "c1");
  CHECK((*a)[0].arguments["timeout_s"] == 30);

  ChatResponse text;
  text.text =
      "Sure.\n```json\n{\"name\": \"finish\", \"arguments\": {\"summary\": \"done\", \"outcome\": \"fixed\"}}\n```";
  auto b = ResolveToolCalls(text, Tools());
  REQUIRE(b.ok());
  REQUIRE(b->size() == 1);
  CHECK((*b)[0].name == "finish");

  // Double-encoded arguments are accepted.
  auto c = ResolveToolCalls(WithCall("run_command", R"("{\"command\": \"id\"}")"), Tools());
  REQUIRE(c.ok());
  CHECK((*c)[0].arguments["command"] == "id");

  ChatResponse none;
  none.text = "Nothing to call.";
  auto d = ResolveToolCalls(none, Tools());
  REQUIRE(d.ok());
  CHECK(d->empty());
}

TEST_CASE("mistakes are explained: unknown tools, arguments, types, enums, JSON") {
  CHECK_THAT(ErrorOf(WithCall("run_comand", R"({"command": "id"})")),
             Catch::Contains(
                 "there is no tool 'run_comand' (did you mean 'run_command'?); the tools are run_command, finish"));
  CHECK_THAT(ErrorOf(WithCall("run_command", R"({"cmd": "id"})")),
             Catch::Contains("missing the required argument 'command'"));
  CHECK_THAT(ErrorOf(WithCall("run_command", R"({"command": "id", "timout_s": 3})")),
             Catch::Contains("unknown argument 'timout_s' (did you mean 'timeout_s'?)"));
  CHECK_THAT(ErrorOf(WithCall("run_command", R"({"command": ["ls", "-l"]})")),
             Catch::Contains("argument 'command' must be a string, not an array"));
  CHECK_THAT(ErrorOf(WithCall("run_command", R"({"command": "id", "timeout_s": "30"})")),
             Catch::Contains("argument 'timeout_s' must be an integer, not a string"));
  CHECK_THAT(ErrorOf(WithCall("finish", R"({"summary": "x", "outcome": "done"})")),
             Catch::Contains("must be one of [\"fixed\",\"already_compliant\",\"gave_up\"], not \"done\""));
  CHECK_THAT(ErrorOf(WithCall("run_command", R"({"command": "id")")), Catch::Contains("are not valid JSON"));
  CHECK_THAT(ErrorOf(WithCall("run_command", R"([1, 2])")), Catch::Contains("must be a JSON object, not an array"));

  ChatResponse two;
  two.tool_calls = {{"a", "run_command", R"({"command": "id"})"}, {"b", "finish", R"({})"}};
  CHECK_THAT(ErrorOf(two), Catch::Contains("call 2 of 2 ('finish')"));
}
