// The OpenAI-compatible server over loopback with a real HTTP client (cpp-httplib): results must
// be the scheduler's tokens, streaming must follow the server-sent-events format OpenAI clients
// parse, and every bad request must get an OpenAI-style JSON error naming the problem.
#include <httplib.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "engine/http_test_support.h"
#include "engine/serve/http_server.h"
#include "engine/serving_fixture.h"

namespace temper::engine::testing {
namespace {

using nlohmann::json;

struct Served {
  std::unique_ptr<CpuBackend> backend = ServingBackend();
  LetterDetokenizer letters;
  std::unique_ptr<Scheduler> scheduler;
  std::unique_ptr<HttpServer> server;
  Served() {
    SchedulerOptions options;
    options.detokenizer = &letters;
    scheduler = MakeScheduler(*backend, options);
    HttpServerOptions http;
    http.model_name = "gemma4-tiny";
    auto s = HttpServer::Start(*scheduler, http, QuietLog());
    if (!s.ok()) FAIL(s.status().ToString());
    server = std::move(*s);
  }
  httplib::Client Client() const { return LocalClient(server->port()); }
};

json Completion(const std::vector<int32_t>& prompt, int max_tokens) {
  return {{"model", "gemma4-tiny"}, {"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}};
}

TEST_CASE("the HTTP server answers health, models and metrics", "[engine][http]") {
  Served s;
  httplib::Client c = s.Client();
  auto health = c.Get("/health");
  REQUIRE(health);
  CHECK(health->status == 200);
  CHECK(json::parse(health->body)["status"] == "ok");
  auto models = c.Get("/v1/models");
  REQUIRE(models);
  CHECK(json::parse(models->body)["data"][0]["id"] == "gemma4-tiny");
  auto metrics = c.Get("/metrics");
  REQUIRE(metrics);
  CHECK_THAT(metrics->body, Catch::Contains("# TYPE temper_engine_requests_waiting gauge"));
  CHECK_THAT(metrics->body, Catch::Contains("temper_engine_prefix_cache_hit_rate"));
  CHECK_THAT(metrics->body, Catch::Contains("# TYPE temper_engine_draft_tokens_accepted_total counter"));
  CHECK_THAT(metrics->body, Catch::Contains("temper_engine_kv_blocks 256"));
}

TEST_CASE("completions over HTTP give the golden greedy tokens, whole and streamed", "[engine][http]") {
  Served s;
  httplib::Client c = s.Client();
  const std::vector<int32_t> prompt = Reference<int32_t>("input_ids_0");
  const std::vector<int32_t> greedy = Reference<int32_t>("greedy_0");

  auto whole = c.Post("/v1/completions", Completion(prompt, 16).dump(), "application/json");
  REQUIRE(whole);
  REQUIRE(whole->status == 200);
  const json body = json::parse(whole->body);
  CHECK(body["object"] == "text_completion");
  CHECK(body["choices"][0]["token_ids"].get<std::vector<int32_t>>() == greedy);
  std::string text;
  for (int32_t id : greedy) text += LetterText(id);
  CHECK(body["choices"][0]["text"] == text);
  CHECK(body["choices"][0]["finish_reason"] == "length");
  CHECK(body["usage"]["prompt_tokens"] == prompt.size());
  CHECK(body["usage"]["completion_tokens"] == 16);

  // Streamed, the same request again.
  json req = Completion(prompt, 16);
  req["stream"] = true;
  req["stream_options"] = {{"include_usage", true}};
  // Tokens the server has not written yet merge into one chunk, so a load that keeps the writer off
  // the CPU while all 16 decode gives one token chunk: streaming shows as two or more in at least one
  // of a few runs (each followed by the usage chunk).
  std::vector<json> chunks;
  for (int run = 0; run < 8 && chunks.size() < 3; ++run) {
    auto streamed = c.Post("/v1/completions", req.dump(), "application/json");
    REQUIRE(streamed);
    REQUIRE(streamed->status == 200);
    CHECK_THAT(streamed->get_header_value("Content-Type"), Catch::StartsWith("text/event-stream"));
    chunks.clear();
    bool done = false;
    for (const std::string& data : SseData(streamed->body)) {
      CHECK_FALSE(done);  // nothing after [DONE]
      if (data == "[DONE]") {
        done = true;
      } else {
        chunks.push_back(json::parse(data));
      }
    }
    CHECK(done);
    REQUIRE(chunks.size() >= 2);
  }
  REQUIRE(chunks.size() >= 3);
  std::vector<int32_t> tokens;
  std::string streamed_text;
  for (size_t i = 0; i + 1 < chunks.size(); ++i) {
    const json& choice = chunks[i]["choices"][0];
    for (int32_t id : choice["token_ids"]) tokens.push_back(id);
    streamed_text += choice["text"].get<std::string>();
    CHECK(choice["finish_reason"] == (i + 2 == chunks.size() ? json("length") : json(nullptr)));
  }
  CHECK(tokens == greedy);
  CHECK(streamed_text == text);
  const json& usage = chunks.back()["usage"];
  CHECK(usage["completion_tokens"] == 16);
  // The first request pinned the prompt's end, but a resend must feed at least one prompt token to
  // get logits, so it can only fork from a shorter checkpoint, and there is none.
  CHECK(usage["prompt_tokens_details"]["cached_tokens"] == 0);
  // Speculation is on by default; whatever it drafted is accounted for under temper's own field
  // (not OpenAI's Predicted Outputs counts), and it took at most one draft per generated token after
  // the first.
  CHECK_FALSE(usage.contains("completion_tokens_details"));
  const json& drafts = usage["temper"];
  CHECK(drafts["accepted_draft_tokens"].get<int64_t>() >= 0);
  CHECK(drafts["accepted_draft_tokens"].get<int64_t>() <= 15);
  CHECK(drafts["draft_tokens"].get<int64_t>() >= drafts["accepted_draft_tokens"].get<int64_t>());
}

TEST_CASE("bad requests get OpenAI-style errors", "[engine][http]") {
  Served s;
  httplib::Client c = s.Client();
  auto expect = [&](const std::string& body, int status, const std::string& code, const std::string& param,
                    const std::string& text) {
    CheckOpenAIError(c, "/v1/completions", body, status, code, param, text);
  };
  expect("{\"model\": \"gemma4-tiny\", \"prompt\": [1, 2", 400, "", "", "malformed JSON");
  expect("[1, 2]", 400, "", "", "JSON object");
  expect(R"({"model": "gpt-4", "prompt": [5]})", 404, "model_not_found", "model", "'gpt-4' does not exist");
  expect(R"({"prompt": [5]})", 400, "", "model", "'model' is required");
  json long_prompt = Completion(RandomPrompt(4, 250), 16);
  expect(long_prompt.dump(), 400, "context_length_exceeded", "prompt", "context limit of 256");
  expect(R"({"model": "gemma4-tiny", "prompt": [5], "temperature": "hot"})", 400, "", "temperature",
         "must be a number");
  expect(R"({"model": "gemma4-tiny", "prompt": [5], "temperature": 3})", 400, "", "temperature", "[0, 2]");
  expect(R"({"model": "gemma4-tiny", "prompt": [5], "max_tokens": 0})", 400, "", "", "max_tokens");
  expect(R"({"model": "gemma4-tiny", "prompt": [5, 9999]})", 400, "", "", "id 9999");
  expect(R"({"model": "gemma4-tiny", "prompt": "hello"})", 400, "", "prompt", "needs a tokenizer");
  expect(R"({"model": "gemma4-tiny", "prompt": [5], "n": 2})", 400, "", "n", "'n' must be 1");
  expect(R"({"model": "gemma4-tiny", "prompt": [5], "stop": 7})", 400, "", "stop", "'stop' must be");
}

TEST_CASE("stop strings and concurrent clients over HTTP", "[engine][http]") {
  Served s;
  const std::vector<int32_t> prompt = RandomPrompt(21, 12);
  httplib::Client c = s.Client();
  auto full = c.Post("/v1/completions", Completion(prompt, 10).dump(), "application/json");
  REQUIRE(full);
  const std::string text = json::parse(full->body)["choices"][0]["text"];
  json req = Completion(prompt, 10);
  req["stop"] = json::array({text.substr(5, 3)});
  auto stopped = c.Post("/v1/completions", req.dump(), "application/json");
  REQUIRE(stopped);
  const json body = json::parse(stopped->body);
  CHECK(body["choices"][0]["finish_reason"] == "stop");
  CHECK(body["choices"][0]["text"] == text.substr(0, text.find(text.substr(5, 3))));

  std::vector<std::thread> clients;
  std::vector<std::string> texts(4);
  for (int i = 0; i < 4; ++i) {
    clients.emplace_back([&, i] {
      httplib::Client ci = s.Client();
      auto r = ci.Post("/v1/completions", Completion(prompt, 10).dump(), "application/json");
      if (r && r->status == 200) texts[static_cast<size_t>(i)] = json::parse(r->body)["choices"][0]["text"];
    });
  }
  for (auto& t : clients) t.join();
  for (const std::string& t : texts) CHECK(t == text);
}

}  // namespace
}  // namespace temper::engine::testing
