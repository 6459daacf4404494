// /v1/chat/completions over loopback with a real HTTP client (cpp-httplib), on the tiny model with
// the 512-id chat test tokenizer: replies must be what the chat engine produces for the same
// request, streaming must follow OpenAI's chunk format line by line, the tools in a request must
// reach the rendered prompt, and bad requests must get OpenAI-style errors naming the parameter.
#include <set>

#include <httplib.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "engine/constrain/json_schema_grammar.h"
#include "engine/chat_served.h"
#include "engine/http_test_support.h"
#include "engine/serve/chat_engine.h"
#include "engine/serve/http_server.h"
#include "engine/serving_fixture.h"

namespace temper::engine::testing {
namespace {

using nlohmann::json;

json ToolsJson() {
  return json::array({{{"type", "function"},
                       {"function",
                        {{"name", "run_command"},
                         {"description", "Runs a shell command."},
                         {"parameters",
                          {{"type", "object"},
                           {"properties", {{"cmd", {{"type", "string"}, {"description", "the command"}}}}},
                           {"required", {"cmd"}}}}}}}});
}

json ChatBody(int max_tokens) {
  return {{"model", "gemma4-tiny"},
          {"messages", json::array({{{"role", "system"}, {"content", "Be brief."}},
                                    {{"role", "user"}, {"content", "Check sshd."}}})},
          {"max_tokens", max_tokens},
          {"temperature", 0}};
}

// The same request through the in-process API.
ChatEvent InProcess(ChatEngine& engine, bool with_tools, int max_tokens) {
  ChatRequest r;
  r.conversation.messages.push_back({.role = ChatRole::kSystem, .content = "Be brief."});
  r.conversation.messages.push_back({.role = ChatRole::kUser, .content = "Check sshd."});
  if (with_tools) {
    r.conversation.tools.push_back(
        {"run_command", "Runs a shell command.",
         json{{"type", "object"},
              {"properties", {{"cmd", {{"type", "string"}, {"description", "the command"}}}}},
              {"required", {"cmd"}}}});
  }
  r.max_tokens = max_tokens;
  auto s = engine.Submit(r);
  if (!s.ok()) FAIL(s.status().ToString());
  return (*s)->Wait();
}

// The tiny model, made to reply with a chosen text: each decode row whose input token starts a
// step of the script gets that step's next token as its argmax (the script's tokens are distinct).
class ScriptedReplyBackend final : public ForwardingBackend {
 public:
  explicit ScriptedReplyBackend(Backend& inner) : ForwardingBackend(inner) {}
  // Before any request: each step's input token → the token that must follow it.
  void Script(std::map<int32_t, int32_t> next) { next_ = std::move(next); }
  Result<ForwardResult> Forward(std::span<const ForwardItem> batch, const ForwardOptions& options) override {
    TEMPER_ASSIGN_OR_RETURN(ForwardResult r, inner_.Forward(batch, options));
    const size_t vocab = static_cast<size_t>(config().vocab_size);
    size_t row = 0;
    for (const ForwardItem& item : batch) {
      // An item's logit rows are those of its last tokens (all of them in a verification pass).
      const size_t rows = static_cast<size_t>(LogitRows(item));
      for (size_t j = 0; j < rows; ++j, ++row) {
        auto it = next_.find(item.tokens[item.tokens.size() - rows + j]);
        if (it == next_.end()) continue;
        std::span<float> logits(r.logits.data() + row * vocab, vocab);
        logits[static_cast<size_t>(it->second)] = *std::max_element(logits.begin(), logits.end()) + 100;
      }
    }
    return r;
  }

 private:
  std::map<int32_t, int32_t> next_;
};

TEST_CASE("a reply that breaks the chat format comes back as its text with parse_error, whole and streamed",
          "[engine][http][chat]") {
  std::unique_ptr<CpuBackend> tiny = ServingBackend();
  ScriptedReplyBackend backend(*tiny);
  const Tokenizer& tok = ChatTokenizer();
  auto engine = ChatEngine::Create(backend, tok, {}, QuietLog());
  REQUIRE(engine.ok());
  // The model answers "Hey", a stray <tool_call|>, " ok", then ends its turn.
  Conversation conversation;
  conversation.messages.push_back({.role = ChatRole::kUser, .content = "Check sshd."});
  auto prompt = (*engine)->RenderPrompt(conversation);
  REQUIRE(prompt.ok());
  std::map<int32_t, int32_t> next;
  int32_t previous = prompt->ids.back();
  for (int32_t id : tok.Encode("Hey<tool_call|> ok<turn|>")) {
    REQUIRE(next.emplace(previous, id).second);  // distinct steps
    previous = id;
  }
  backend.Script(std::move(next));
  HttpServerOptions http;
  http.model_name = "gemma4-tiny";
  http.chat = engine->get();
  auto server = HttpServer::Start((*engine)->scheduler(), http, QuietLog());
  REQUIRE(server.ok());
  httplib::Client c = LocalClient((*server)->port());

  json body = ChatBody(16);
  body["messages"] = json::array({{{"role", "user"}, {"content", "Check sshd."}}});
  auto whole = c.Post("/v1/chat/completions", body.dump(), "application/json");
  REQUIRE(whole);
  INFO(whole->body);
  REQUIRE(whole->status == 200);  // not a 500: the model's text, and what broke
  const json r = json::parse(whole->body);
  CHECK(r["choices"][0]["message"]["content"] == "Hey<tool_call|> ok");
  CHECK(r["choices"][0]["parse_error"] == "reply at byte 3: unexpected <tool_call|>");
  CHECK(r["choices"][0]["finish_reason"] == "stop");

  body["stream"] = true;
  auto streamed = c.Post("/v1/chat/completions", body.dump(), "application/json");
  REQUIRE(streamed);
  REQUIRE(streamed->status == 200);
  const std::vector<std::string> data = SseData(streamed->body);
  REQUIRE(data.back() == "[DONE]");
  std::string content, parse_error;
  for (size_t i = 0; i + 1 < data.size(); ++i) {
    const json chunk = json::parse(data[i]);
    const json& choice = chunk["choices"][0];
    if (choice["delta"].contains("content")) content += choice["delta"]["content"].get<std::string>();
    if (choice.contains("parse_error")) parse_error = choice["parse_error"];
  }
  CHECK(content == "Hey<tool_call|> ok");
  CHECK(parse_error == "reply at byte 3: unexpected <tool_call|>");
}

TEST_CASE("chat completions over HTTP: whole and streamed replies equal the in-process engine's",
          "[engine][http][chat]") {
  ChatServed s;
  const ChatEvent expected = InProcess(*s.engine, /*with_tools=*/true, 12);
  REQUIRE(expected.finish != ChatFinish::kError);
  httplib::Client c = s.Client();

  json body = ChatBody(12);
  body["tools"] = ToolsJson();
  body["tool_choice"] = "auto";
  auto whole = c.Post("/v1/chat/completions", body.dump(), "application/json");
  REQUIRE(whole);
  INFO(whole->body);
  REQUIRE(whole->status == 200);
  const json r = json::parse(whole->body);
  CHECK(r["object"] == "chat.completion");
  CHECK_THAT(r["id"].get<std::string>(), Catch::StartsWith("chatcmpl-"));
  CHECK(r["choices"][0]["message"]["role"] == "assistant");
  CHECK(r["choices"][0]["message"]["content"] == expected.content);
  CHECK(r["choices"][0]["finish_reason"] == ChatFinishName(expected.finish));
  // The tools were rendered: the prompt is as long as the in-process one with the same tools.
  CHECK(r["usage"]["prompt_tokens"] == expected.usage.prompt_tokens);
  CHECK(r["usage"]["completion_tokens"] == expected.usage.completion_tokens);
  // The same prompt's message boundaries were pinned by the in-process run.
  CHECK(r["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>() > 0);

  // tool_choice "none" drops the declarations from the prompt.
  body["tool_choice"] = "none";
  auto none = c.Post("/v1/chat/completions", body.dump(), "application/json");
  REQUIRE(none);
  REQUIRE(none->status == 200);
  const ChatEvent plain = InProcess(*s.engine, /*with_tools=*/false, 12);
  CHECK(json::parse(none->body)["usage"]["prompt_tokens"] == plain.usage.prompt_tokens);
  CHECK(plain.usage.prompt_tokens < expected.usage.prompt_tokens);

  body["tool_choice"] = "auto";
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  auto streamed = c.Post("/v1/chat/completions", body.dump(), "application/json");
  REQUIRE(streamed);
  REQUIRE(streamed->status == 200);
  CHECK_THAT(streamed->get_header_value("Content-Type"), Catch::StartsWith("text/event-stream"));
  const std::vector<std::string> data = SseData(streamed->body);
  REQUIRE(data.size() >= 4);  // role, content..., finish, usage, [DONE]
  CHECK(data.back() == "[DONE]");
  std::vector<json> chunks;
  for (size_t i = 0; i + 1 < data.size(); ++i) chunks.push_back(json::parse(data[i]));
  for (const json& ch : chunks) {
    CHECK(ch["object"] == "chat.completion.chunk");
    CHECK(ch["id"] == chunks[0]["id"]);
    CHECK(ch["model"] == "gemma4-tiny");
  }
  CHECK(chunks[0]["choices"][0]["delta"]["role"] == "assistant");
  std::string content;
  for (size_t i = 0; i + 2 < chunks.size(); ++i) {
    const json& choice = chunks[i]["choices"][0];
    CHECK(choice["finish_reason"].is_null());
    if (choice["delta"].contains("content")) content += choice["delta"]["content"].get<std::string>();
  }
  CHECK(content == expected.content);
  const json& last = chunks[chunks.size() - 2]["choices"][0];
  CHECK(last["delta"] == json::object());
  CHECK(last["finish_reason"] == ChatFinishName(expected.finish));
  const json& usage = chunks.back();
  CHECK(usage["choices"] == json::array());
  CHECK(usage["usage"]["completion_tokens"] == expected.usage.completion_tokens);
  CHECK(usage["usage"]["prompt_tokens"] == expected.usage.prompt_tokens);
}

TEST_CASE("chat completions accept assistant tool calls and tool results in the history", "[engine][http][chat]") {
  ChatServed s;
  httplib::Client c = s.Client();
  json body = ChatBody(4);  // without tools: the tiny model's context is 256 tokens
  body["messages"].push_back(
      {{"role", "assistant"},
       {"content", nullptr},
       {"tool_calls",
        json::array({{{"id", "call_1"},
                      {"type", "function"},
                      {"function", {{"name", "run_command"}, {"arguments", R"({"cmd":"sshd -t"})"}}}}})}});
  body["messages"].push_back({{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", R"({"exit":0})"}});
  auto res = c.Post("/v1/chat/completions", body.dump(), "application/json");
  REQUIRE(res);
  INFO(res->body);
  REQUIRE(res->status == 200);

  // The same conversation in process renders to the same number of prompt tokens.
  Conversation conv;
  conv.messages.push_back({.role = ChatRole::kSystem, .content = "Be brief."});
  conv.messages.push_back({.role = ChatRole::kUser, .content = "Check sshd."});
  conv.messages.push_back({.role = ChatRole::kModel,
                           .tool_calls = {{"run_command", json{{"cmd", "sshd -t"}}}},
                           .tool_responses = {{"run_command", json{{"exit", 0}}}}});
  auto prompt = s.engine->RenderPrompt(conv);
  REQUIRE(prompt.ok());
  CHECK(json::parse(res->body)["usage"]["prompt_tokens"] == prompt->ids.size());
}

TEST_CASE("bad chat requests get OpenAI-style errors naming the parameter", "[engine][http][chat]") {
  ChatServed s;
  httplib::Client c = s.Client();
  auto expect = [&](const std::string& body, int status, const std::string& code, const std::string& param,
                    const std::string& text) {
    CheckOpenAIError(c, "/v1/chat/completions", body, status, code, param, text);
  };
  expect(R"({"model": "gemma4-tiny", "messages": [)", 400, "", "", "malformed JSON");
  expect(R"({"model": "gpt-4", "messages": [{"role": "user", "content": "hi"}]})", 404, "model_not_found", "model",
         "'gpt-4' does not exist");
  expect(R"({"model": "gemma4-tiny"})", 400, "", "messages", "'messages' is required");
  expect(R"({"model": "gemma4-tiny", "messages": [{"role": "wizard", "content": "hi"}]})", 400, "", "messages[0].role",
         "got 'wizard'");
  expect(R"({"model": "gemma4-tiny", "messages": [{"role": "user", "content": 5}]})", 400, "", "messages[0].content",
         "must be a string");
  expect(R"({"model": "gemma4-tiny", "messages": [{"role": "tool", "content": "x"}]})", 400, "", "messages[0]",
         "must follow an assistant");
  expect(
      R"({"model": "gemma4-tiny", "messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "retrieval"}]})",
      400, "", "tools[0]", "must be");
  expect(R"({"model": "gemma4-tiny", "messages": [{"role": "user", "content": "hi"}], "tool_choice": "required"})", 400,
         "", "tool_choice", "the request offers no tools");
  expect(R"({"model": "gemma4-tiny", "messages": [{"role": "user", "content": "hi"}], "tool_choice": "always"})", 400,
         "", "tool_choice", "\"auto\", \"none\", \"required\" or");
  expect(
      R"({"model": "gemma4-tiny", "messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": {"name": "a b"}}]})",
      400, "", "tools", "tools[0]: name 'a b'");
  expect(R"({"model": "gemma4-tiny", "messages": [{"role": "user", "content": "hi"}], "top_p": "x"})", 400, "", "top_p",
         "must be a number");
  expect(R"({"model": "gemma4-tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 0})", 400, "",
         "max_tokens", "at least 1");
  json long_prompt = ChatBody(8);
  long_prompt["messages"][1]["content"] = std::string(300, 'x');
  expect(long_prompt.dump(), 400, "context_length_exceeded", "messages", "context limit of 256");
}

TEST_CASE("response_format json_schema: the random model's reply keeps to the schema, and a bad schema is named",
          "[engine][http][chat][constrain]") {
  ChatServed served;
  httplib::Client c = served.Client();
  const json schema =
      json::parse(R"({"type":"object","properties":{"verdict":{"enum":["pass","fail"]},"done":{"type":"boolean"}},)"
                  R"("required":["verdict","done"]})");
  auto grammar = JsonSchemaGrammar(nlohmann::ordered_json::parse(schema.dump()));
  REQUIRE(grammar.ok());
  int whole = 0;
  for (int seed = 0; seed < 6; ++seed) {
    json body = ChatBody(40);
    body["temperature"] = 1.0;
    body["seed"] = seed;
    body["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", "verdict"}, {"schema", schema}}}};
    auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
    REQUIRE(r);
    INFO(r->body);
    REQUIRE(r->status == 200);
    json reply = json::parse(r->body);
    const std::string content = reply["choices"][0]["message"]["content"].get<std::string>();
    GrammarState state = GrammarState::Start(*grammar);
    for (char ch : content) state = state.Advance(*grammar, static_cast<uint8_t>(ch));
    CHECK_FALSE(state.Dead());  // on the schema's path, whether finished or cut at max_tokens
    if (reply["choices"][0]["finish_reason"] == "stop") {
      json parsed = json::parse(content);
      CHECK((parsed["verdict"] == "pass" || parsed["verdict"] == "fail"));
      CHECK(parsed["done"].is_boolean());
      ++whole;
    }
  }
  // 40 tokens leave room for the schema's shortest text: every reply ends whole, none is cut.
  CHECK(whole == 6);

  json bad = ChatBody(8);
  bad["response_format"] = {{"type", "json_schema"},
                            {"json_schema", {{"name", "x"}, {"schema", {{"type", "string"}, {"pattern", "(?=a)"}}}}}};
  auto refused = c.Post("/v1/chat/completions", bad.dump(), "application/json");
  REQUIRE(refused);
  CHECK(refused->status == 400);
  json error = json::parse(refused->body)["error"];
  CHECK(error["param"] == "response_format.json_schema.schema");
  CHECK(error["message"] ==
        "'response_format.json_schema': schema/pattern: lookahead '(?=' at offset 0 is not supported");
  // A null schema is refused too: it must not reach the engine, where a null schema means none.
  bad["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", nullptr}}}};
  refused = c.Post("/v1/chat/completions", bad.dump(), "application/json");
  REQUIRE(refused);
  CHECK(refused->status == 400);
  error = json::parse(refused->body)["error"];
  CHECK(error["param"] == "response_format.json_schema.schema");
  CHECK(error["message"] == "'response_format.json_schema': schema: a schema must be an object");
  bad["response_format"] = {{"type", "xml"}};
  refused = c.Post("/v1/chat/completions", bad.dump(), "application/json");
  REQUIRE(refused);
  CHECK(refused->status == 400);
  CHECK(json::parse(refused->body)["error"]["param"] == "response_format.type");
}

TEST_CASE(
    "tool_choice required or named: the random model's every reply is calls of the tools asked for, whole and "
    "streamed, with arguments that keep to their schemas",
    "[engine][http][chat][constrain]") {
  ChatServed served;
  httplib::Client c = served.Client();
  // Short declarations: the tiny model's context is 256 tokens, one token per character.
  json tools =
      json::array({{{"type", "function"},
                    {"function",
                     {{"name", "run"},
                      {"parameters",
                       {{"type", "object"}, {"properties", {{"cmd", {{"type", "string"}}}}}, {"required", {"cmd"}}}}}}},
                   {{"type", "function"}, {"function", {{"name", "finish"}}}}});
  auto ask = [&](const json& tool_choice, int seed, bool stream) {
    json body = ChatBody(40);
    body["messages"] = json::array({{{"role", "user"}, {"content", "Go."}}});
    body["temperature"] = 1.0;
    body["seed"] = seed;
    body["tools"] = tools;
    body["tool_choice"] = tool_choice;
    if (stream) body["stream"] = true;
    auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
    REQUIRE(r);
    INFO(r->body);
    REQUIRE(r->status == 200);
    return r->body;
  };
  std::set<std::string> names;
  for (int seed = 0; seed < 6; ++seed) {
    const json reply = json::parse(ask("required", seed, false));
    const json& choice = reply["choices"][0];
    INFO(choice.dump());
    // Within 40 tokens every reply ends as whole calls (the budget closes what the model opened).
    CHECK(choice["finish_reason"] == "tool_calls");
    REQUIRE(choice["message"]["tool_calls"].size() >= 1);
    for (const json& call : choice["message"]["tool_calls"]) {
      const std::string name = call["function"]["name"];
      names.insert(name);
      const json args = json::parse(call["function"]["arguments"].get<std::string>());
      if (name == "run") {
        CHECK(args["cmd"].is_string());
      } else {
        CHECK(name == "finish");
        CHECK(args.empty());
      }
    }
  }
  CHECK(names.size() >= 1);

  // A named function: only it is called, streamed too.
  const json named = {{"type", "function"}, {"function", {{"name", "run"}}}};
  const json whole = json::parse(ask(named, 3, false));
  REQUIRE(whole["choices"][0]["message"]["tool_calls"].size() >= 1);
  for (const json& call : whole["choices"][0]["message"]["tool_calls"]) CHECK(call["function"]["name"] == "run");
  std::string streamed_args;
  std::string finish;
  for (const std::string& d : SseData(ask(named, 3, true))) {
    if (d == "[DONE]") continue;
    const json chunk = json::parse(d);
    if (chunk["choices"].empty()) continue;
    const json& delta = chunk["choices"][0]["delta"];
    if (delta.contains("tool_calls")) {
      for (const json& call : delta["tool_calls"]) {
        CHECK(call["function"]["name"] == "run");
        if (call["index"] == 0) streamed_args += call["function"]["arguments"].get<std::string>();
      }
    }
    if (!chunk["choices"][0]["finish_reason"].is_null()) finish = chunk["choices"][0]["finish_reason"];
  }
  CHECK(finish == "tool_calls");
  CHECK(json::parse(streamed_args) ==
        json::parse(whole["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>()));

  // Refusals name the parameter.
  json body = ChatBody(8);
  body["tools"] = tools;
  body["tool_choice"] = {{"type", "function"}, {"function", {{"name", "rm"}}}};
  auto refused = c.Post("/v1/chat/completions", body.dump(), "application/json");
  REQUIRE(refused);
  CHECK(refused->status == 400);
  CHECK(json::parse(refused->body)["error"]["param"] == "tool_choice.function.name");
  body["tool_choice"] = "required";
  body["response_format"] = {{"type", "json_object"}};
  refused = c.Post("/v1/chat/completions", body.dump(), "application/json");
  REQUIRE(refused);
  CHECK(refused->status == 400);
  CHECK(json::parse(refused->body)["error"]["param"] == "response_format");
}

TEST_CASE("a tool whose parameters hold $defs and $ref: rendered with tool_choice auto, kept to when required",
          "[engine][http][chat][constrain]") {
  ChatServed served;
  httplib::Client c = served.Client();
  const json tools = json::array({{{"type", "function"},
                                   {"function",
                                    {{"name", "pick"},
                                     {"parameters", json::parse(R"({"$defs": {"C": {"enum": ["a", "b"], "type": "string"}},
                                       "properties": {"c": {"$ref": "#/$defs/C"}}, "required": ["c"], "type": "object"})")}}}}});
  for (const char* choice : {"auto", "required"}) {
    json body = ChatBody(24);
    body["messages"] = json::array({{{"role", "user"}, {"content", "Go."}}});
    body["tools"] = tools;
    body["tool_choice"] = choice;
    auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
    REQUIRE(r);
    INFO(choice << " " << r->body);
    REQUIRE(r->status == 200);
    if (std::string(choice) == "auto") continue;
    const json reply = json::parse(r->body);
    const json& message = reply["choices"][0]["message"];
    REQUIRE(message["tool_calls"].size() >= 1);
    for (const json& call : message["tool_calls"]) {
      const json args = json::parse(call["function"]["arguments"].get<std::string>());
      CHECK((args["c"] == "a" || args["c"] == "b"));
    }
  }
}

TEST_CASE("a server without a tokenizer says so on /v1/chat/completions", "[engine][http][chat]") {
  ChatServed s("gemma4-tiny", /*with_chat=*/false);
  httplib::Client c = s.Client();
  auto res = c.Post("/v1/chat/completions", ChatBody(4).dump(), "application/json");
  REQUIRE(res);
  CHECK(res->status == 501);
  const json e = json::parse(res->body);
  CHECK(e["error"]["code"] == "no_tokenizer");
  CHECK_THAT(e["error"]["message"].get<std::string>(), Catch::Contains("--tokenizer"));
}

TEST_CASE("completions take a text prompt through the chat engine's tokenizer", "[engine][http][chat]") {
  ChatServed s;
  httplib::Client c = s.Client();
  const std::string text = "<start>Check sshd and harden it.";
  const std::vector<int32_t> ids = ChatTokenizer().Encode(text, EncodeOptions{.add_special_tokens = true});
  auto complete = [&](const json& prompt) {
    const json body = {{"model", "gemma4-tiny"}, {"prompt", prompt}, {"max_tokens", 6}, {"temperature", 0}};
    auto res = c.Post("/v1/completions", body.dump(), "application/json");
    REQUIRE(res);
    INFO(res->body);
    REQUIRE(res->status == 200);
    return json::parse(res->body);
  };
  const json by_text = complete(text);
  const json by_ids = complete(ids);
  CHECK(by_text["usage"]["prompt_tokens"] == static_cast<int64_t>(ids.size()));
  CHECK(by_text["choices"][0]["token_ids"] == by_ids["choices"][0]["token_ids"]);
  CHECK(by_text["choices"][0]["text"] == by_ids["choices"][0]["text"]);
  CHECK(complete(json::array({text}))["choices"][0]["token_ids"] == by_ids["choices"][0]["token_ids"]);

  // Several texts at once are refused, naming the field.
  const json two = {{"model", "gemma4-tiny"}, {"prompt", {"a", "b"}}, {"max_tokens", 2}};
  auto res = c.Post("/v1/completions", two.dump(), "application/json");
  REQUIRE(res);
  CHECK(res->status == 400);
  CHECK(json::parse(res->body)["error"]["param"] == "prompt");
}

}  // namespace
}  // namespace temper::engine::testing
