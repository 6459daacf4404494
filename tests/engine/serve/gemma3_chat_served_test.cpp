// /v1/chat/completions with Gemma 3's tokenizer (and so its chat format) over loopback, as
// `temper-lm serve --tokenizer gemma3 ...` runs it: a request carrying tools gets OpenAI-format tool
// calls, whole and streamed, whose arguments keep to the tool's schema; with tool_choice auto every
// reply is text or a whole call. The model is synthetic (seeded random weights of a small Gemma 3
// with its 262,144-token vocabulary), so it is the grammar that writes the calls.
#include <httplib.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "engine/cpu/cpu_backend.h"
#include "engine/gemma3_synthetic_config.h"
#include "engine/gemma3_tokenizer.h"
#include "engine/http_test_support.h"
#include "engine/model/model_config.h"
#include "engine/model/weights.h"
#include "engine/serve/chat_engine.h"
#include "engine/serve/http_server.h"

namespace temper::engine::testing {
namespace {

using nlohmann::json;

const Logger& Quiet() {
  static const Logger log(LogLevel::kWarning);
  return log;
}

struct Gemma3Served {
  std::unique_ptr<CpuBackend> backend;
  std::unique_ptr<ChatEngine> engine;
  std::unique_ptr<HttpServer> server;

  Gemma3Served() {
    Result<ModelConfig> config = ParseModelConfig(Gemma3VocabularyConfigJson(), "gemma3-scaled-rope, 262K vocabulary");
    if (!config.ok()) FAIL(config.status().ToString());
    Result<std::unique_ptr<ModelWeights>> weights = ModelWeights::Synthetic(*config, 3);
    if (!weights.ok()) FAIL(weights.status().ToString());
    CpuBackendOptions options;
    options.threads = 2;
    options.max_context = 512;  // the tool preamble alone is ~140 tokens
    options.kv.max_tokens = 2048;
    options.kv.max_sequences = 4;
    Result<std::unique_ptr<CpuBackend>> b = CpuBackend::Create(*config, std::move(*weights), options);
    if (!b.ok()) FAIL(b.status().ToString());
    backend = std::move(*b);
    Result<std::unique_ptr<ChatEngine>> e = ChatEngine::Create(*backend, Gemma3Tokenizer(), {}, Quiet());
    if (!e.ok()) FAIL(e.status().ToString());
    engine = std::move(*e);
    HttpServerOptions http;
    http.model_name = "gemma3-synthetic";
    http.chat = engine.get();
    Result<std::unique_ptr<HttpServer>> s = HttpServer::Start(engine->scheduler(), http, Quiet());
    if (!s.ok()) FAIL(s.status().ToString());
    server = std::move(*s);
  }
};

const json kTools =
    json::array({{{"type", "function"},
                  {"function",
                   {{"name", "run_command"},
                    {"description", "Run a shell command"},
                    {"parameters",
                     {{"type", "object"},
                      {"properties", {{"command", {{"type", "string"}, {"maxLength", 40}}}}},
                      {"required", {"command"}}}}}}},
                 {{"type", "function"}, {"function", {{"name", "finish"}, {"description", "Say the work is done"}}}}});

json Body(const json& tool_choice, int seed) {
  return {{"model", "gemma3-synthetic"},
          {"messages", json::array({{{"role", "system"}, {"content", "You harden hosts."}},
                                    {{"role", "user"}, {"content", "Check sshd."}}})},
          {"tools", kTools},
          {"tool_choice", tool_choice},
          {"max_tokens", 40},
          {"temperature", 1.0},
          {"seed", seed}};
}

void CheckCall(const json& call) {
  INFO(call.dump());
  CHECK(call["type"] == "function");
  CHECK(call["id"].is_string());
  const std::string name = call["function"]["name"];
  const json args = json::parse(call["function"]["arguments"].get<std::string>());
  if (name == "run_command") {
    CHECK(args["command"].is_string());
    CHECK(args.size() == 1);
  } else {
    CHECK(name == "finish");
    CHECK(args.empty());
  }
}

TEST_CASE("a Gemma 3 model is not served with a Gemma 4 tokenizer's chat format", "[engine][chat][gemma3]") {
  Gemma3Served served;
  Result<Tokenizer> gemma4 =
      Tokenizer::FromFile(std::string(TEMPER_TEST_DATA_DIR) + "/tokenizer/gemma4-chat-tiny-tokenizer.json");
  REQUIRE(gemma4.ok());
  Result<std::unique_ptr<ChatEngine>> mismatched = ChatEngine::Create(*served.backend, *gemma4, {}, Quiet());
  REQUIRE_FALSE(mismatched.ok());
  CHECK(mismatched.status().code() == StatusCode::kNotFound);
  CHECK_THAT(mismatched.status().message(),
             Catch::Contains("the chat format of a 'gemma3_text' model") &&
                 Catch::Contains("tokenizer has no token '<start_of_turn>' (needed by Gemma 3's chat format)"));
}

TEST_CASE("chat completions with Gemma 3's tokenizer answer a tool-carrying request with OpenAI tool calls",
          "[engine][http][chat][gemma3]") {
  Gemma3Served served;
  CHECK(std::string(served.engine->format().family_name()) == "Gemma 3");
  httplib::Client c = LocalClient(served.server->port());
  auto post = [&](const json& body) {
    auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
    REQUIRE(r);
    INFO(r->body);
    REQUIRE(r->status == 200);
    return r->body;
  };

  // The prompt is Gemma 3's, tools declared: as long as the engine renders it.
  Conversation conversation;
  conversation.messages = {{.role = ChatRole::kSystem, .content = "You harden hosts."},
                           {.role = ChatRole::kUser, .content = "Check sshd."}};
  for (const json& t : kTools) {
    conversation.tools.push_back(
        {t["function"]["name"], t["function"]["description"], t["function"].value("parameters", json(nullptr))});
  }
  Result<RenderedPrompt> prompt = served.engine->RenderPrompt(conversation);
  REQUIRE(prompt.ok());
  CHECK(prompt->text.starts_with("<bos><start_of_turn>user\nYou harden hosts.\n\nYou can call the functions"));

  for (int seed = 0; seed < 3; ++seed) {
    const json reply = json::parse(post(Body("required", seed)));
    const json& choice = reply["choices"][0];
    INFO(choice.dump());
    CHECK(reply["usage"]["prompt_tokens"] == prompt->ids.size());
    CHECK(choice["finish_reason"] == "tool_calls");
    CHECK(choice["message"]["content"].is_null());
    REQUIRE(choice["message"]["tool_calls"].size() >= 1);
    for (const json& call : choice["message"]["tool_calls"]) CheckCall(call);
  }

  // A named function, streamed: OpenAI's tool-call deltas, the same call as the whole reply.
  const json named = {{"type", "function"}, {"function", {{"name", "run_command"}}}};
  json body = Body(named, 5);
  body["parallel_tool_calls"] = false;
  const json whole = json::parse(post(body));
  REQUIRE(whole["choices"][0]["message"]["tool_calls"].size() == 1);
  CheckCall(whole["choices"][0]["message"]["tool_calls"][0]);
  CHECK(whole["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "run_command");
  body["stream"] = true;
  std::string streamed_args, finish;
  for (const std::string& d : SseData(post(body))) {
    if (d == "[DONE]") continue;
    const json chunk = json::parse(d);
    if (chunk["choices"].empty()) continue;
    const json& delta = chunk["choices"][0]["delta"];
    if (delta.contains("tool_calls")) {
      for (const json& call : delta["tool_calls"]) {
        CHECK(call["index"] == 0);
        CHECK(call["function"]["name"] == "run_command");
        streamed_args += call["function"]["arguments"].get<std::string>();
      }
    }
    if (!chunk["choices"][0]["finish_reason"].is_null()) finish = chunk["choices"][0]["finish_reason"];
  }
  CHECK(finish == "tool_calls");
  CHECK(json::parse(streamed_args) ==
        json::parse(whole["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>()));

  // A text reply cut by max_tokens says so, as it would without the grammar (which spends the last
  // slot on the stop token that ends a constrained reply whole). No call fits in 6 tokens.
  int cut = 0;
  for (int seed = 0; seed < 4; ++seed) {
    json short_body = Body("auto", seed);
    short_body["max_tokens"] = 6;
    const json reply = json::parse(post(short_body));
    INFO(reply.dump());
    const bool filled = reply["usage"]["completion_tokens"] == 6;
    CHECK(reply["choices"][0]["finish_reason"] == (filled ? "length" : "stop"));
    cut += filled ? 1 : 0;
  }
  CHECK(cut >= 1);

  // tool_choice auto: text or whole calls, never a call that breaks off into text.
  for (int seed = 0; seed < 4; ++seed) {
    const json choice = json::parse(post(Body("auto", seed)))["choices"][0];
    INFO(choice.dump());
    CHECK_FALSE(choice.contains("parse_error"));
    if (choice["finish_reason"] == "tool_calls") {
      for (const json& call : choice["message"]["tool_calls"]) CheckCall(call);
    } else {
      CHECK(choice["message"]["content"].is_string());
      CHECK_FALSE(choice["message"].contains("tool_calls"));
    }
  }
}

}  // namespace
}  // namespace temper::engine::testing
