// OpenAIClient against a real HTTP server on 127.0.0.1 (cpp-httplib) that plays an OpenAI-compatible
// server: whole and streamed replies, tool calls, retries with backoff and Retry-After, timeouts,
// truncated streams, malformed bodies, and the API key's handling.
#include "roles/openai_client.h"

#include "roles/local_server.h"
#include "scratch_space.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace temper;
using temper::testing::LocalServer;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

// A Logger writing to a temporary file, to check what reaches the log.
struct CapturedLog {
  FILE* file = std::tmpfile();
  Logger logger{LogLevel::kDebug, Logger::Style::kPlain, fileno(file)};
  ~CapturedLog() { std::fclose(file); }
  std::string Text() {
    std::fflush(file);
    std::rewind(file);
    std::string s;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, file)) > 0) s.append(buf, n);
    return s;
  }
};

struct Fixture {
  CapturedLog log;
  std::vector<std::chrono::milliseconds> sleeps;
  OpenAIEndpoint endpoint;

  std::unique_ptr<OpenAIClient> Client(const std::string& base_url) {
    endpoint.base_url = base_url;
    if (endpoint.model.empty()) endpoint.model = "google/gemma-4-31b-it";
    OpenAIClientOptions options;
    options.initial_backoff = 100ms;
    options.max_backoff = 1000ms;
    options.max_retry_after = 5s;
    options.sleep = [this](std::chrono::milliseconds d) { sleeps.push_back(d); };
    auto client = OpenAIClient::Create("vllm", endpoint, log.logger, options);
    REQUIRE(client.ok());
    return std::move(*client);
  }
};

ChatRequest SimpleRequest() {
  ChatRequest r;
  r.role_name = "worker";
  r.messages = {{ChatRole::kSystem, "You fix STIG rules."}, {ChatRole::kUser, "Fix sshd_disable_root_login."}};
  r.tools.push_back({"run_command", "Runs a shell command.",
                     json{{"type", "object"}, {"properties", {{"command", {{"type", "string"}}}}}}});
  r.sampling.temperature = 0.2;
  r.sampling.seed = 7;
  r.max_tokens = 256;
  return r;
}

const char* kWholeReply = R"({
  "id": "cmpl-1", "object": "chat.completion", "model": "google/gemma-4-31b-it",
  "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
    "role": "assistant", "content": null, "reasoning_content": "Check the config first.",
    "tool_calls": [{"id": "call_1", "type": "function",
                    "function": {"name": "run_command", "arguments": "{\"command\": \"sshd -T\"}"}}]}}],
  "usage": {"prompt_tokens": 120, "completion_tokens": 17, "total_tokens": 137,
            "prompt_tokens_details": {"cached_tokens": 96}}})";

std::string Sse(const json& chunk) { return "data: " + chunk.dump() + "\n\n"; }

json Delta(json delta, const char* finish = nullptr) {
  json c = {{"object", "chat.completion.chunk"},
            {"model", "gemma"},
            {"choices", {{{"index", 0}, {"delta", std::move(delta)}}}}};
  if (finish) c["choices"][0]["finish_reason"] = finish;
  return c;
}

}  // namespace

TEST_CASE("a whole reply: request body, text, tool calls, usage with cached tokens") {
  json seen;
  LocalServer server([&](const httplib::Request& req, httplib::Response& res) {
    seen = json::parse(req.body);
    res.set_content(kWholeReply, "application/json");
  });
  Fixture f;
  auto client = f.Client(server.base_url());
  auto r = client->Chat(SimpleRequest(), nullptr);
  REQUIRE(r.ok());
  CHECK(seen["model"] == "google/gemma-4-31b-it");
  CHECK(seen["messages"].size() == 2);
  CHECK(seen["messages"][0]["role"] == "system");
  CHECK(seen["tools"][0]["function"]["name"] == "run_command");
  CHECK(seen["seed"] == 7);
  CHECK(seen["max_tokens"] == 256);
  CHECK_FALSE(seen.contains("stream"));
  CHECK_FALSE(seen.contains("top_k"));  // unset: not sent to strict servers
  CHECK(r->text.empty());
  CHECK(r->reasoning == "Check the config first.");
  REQUIRE(r->tool_calls.size() == 1);
  CHECK(r->tool_calls[0].id == "call_1");
  CHECK(r->tool_calls[0].name == "run_command");
  CHECK(json::parse(r->tool_calls[0].arguments)["command"] == "sshd -T");
  CHECK(r->finish_reason == FinishReason::kToolCalls);
  CHECK(r->usage.prompt_tokens == 120);
  CHECK(r->usage.completion_tokens == 17);
  CHECK(r->usage.cached_prompt_tokens == 96);
  CHECK(r->attempts == 1);
  CHECK(f.sleeps.empty());
}

TEST_CASE("a streamed reply: SSE pieces reach the callbacks in order and fold into one response") {
  json seen;
  LocalServer server([&](const httplib::Request& req, httplib::Response& res) {
    seen = json::parse(req.body);
    std::string body;
    body += ": keep-alive comment\n\n";
    body += Sse(Delta({{"role", "assistant"}}));
    body += Sse(Delta({{"reasoning_content", "Think"}}));
    body += Sse(Delta({{"content", "Applying "}}));
    body += Sse(Delta({{"content", "the fix."}}));
    body += Sse(Delta(
        {{"tool_calls",
          {{{"index", 0}, {"id", "c1"}, {"function", {{"name", "write_file"}, {"arguments", "{\"path\": "}}}}}}}));
    body += Sse(Delta({{"tool_calls", {{{"index", 0}, {"function", {{"arguments", "\"/etc/issue\"}"}}}}}}}));
    body += Sse(
        Delta({{"tool_calls", {{{"index", 1}, {"id", "c2"}, {"function", {{"name", "finish"}, {"arguments", "{}"}}}}}}},
              "tool_calls"));
    body += Sse(json{{"choices", json::array()}, {"usage", {{"prompt_tokens", 50}, {"completion_tokens", 9}}}});
    body += "data: [DONE]\n\n";
    // Send in small pieces so events and CRLFs split across reads.
    res.set_chunked_content_provider("text/event-stream", [body](size_t, httplib::DataSink& sink) {
      for (size_t i = 0; i < body.size(); i += 7) sink.write(body.data() + i, std::min<size_t>(7, body.size() - i));
      sink.done();
      return true;
    });
  });
  Fixture f;
  auto client = f.Client(server.base_url());
  std::vector<std::string> pieces, thoughts;
  StreamCallbacks cb{[&](std::string_view t) { pieces.emplace_back(t); },
                     [&](std::string_view t) { thoughts.emplace_back(t); }};
  auto r = client->Chat(SimpleRequest(), &cb);
  REQUIRE(r.ok());
  CHECK(seen["stream"] == true);
  CHECK(seen["stream_options"]["include_usage"] == true);
  CHECK(pieces == std::vector<std::string>{"Applying ", "the fix."});
  CHECK(thoughts == std::vector<std::string>{"Think"});
  CHECK(r->text == "Applying the fix.");
  REQUIRE(r->tool_calls.size() == 2);
  CHECK(r->tool_calls[0].name == "write_file");
  CHECK(json::parse(r->tool_calls[0].arguments)["path"] == "/etc/issue");
  CHECK(r->tool_calls[1].id == "c2");
  CHECK(r->finish_reason == FinishReason::kToolCalls);
  CHECK(r->usage.prompt_tokens == 50);
  CHECK(r->usage.completion_tokens == 9);
}

TEST_CASE("temper-lm serve's parse_error on a reply that broke the model's format reaches malformed_reply") {
  const std::string text = "Hey<tool_call|> ok";
  const std::string note = "reply at byte 3: unexpected <tool_call|>";
  for (bool streamed : {false, true}) {
    INFO((streamed ? "streamed" : "whole"));
    LocalServer server([&](const httplib::Request&, httplib::Response& res) {
      if (!streamed) {
        json whole = {{"choices",
                       {{{"index", 0},
                         {"message", {{"role", "assistant"}, {"content", text}}},
                         {"finish_reason", "stop"},
                         {"parse_error", note}}}},
                      {"usage", {{"prompt_tokens", 5}, {"completion_tokens", 6}}}};
        res.set_content(whole.dump(), "application/json");
        return;
      }
      json last = Delta(json::object(), "stop");
      last["choices"][0]["parse_error"] = note;
      res.set_content(Sse(Delta({{"content", text}})) + Sse(last) + "data: [DONE]\n\n", "text/event-stream");
    });
    Fixture f;
    auto client = f.Client(server.base_url());
    StreamCallbacks cb{[](std::string_view) {}, [](std::string_view) {}};
    auto r = client->Chat(SimpleRequest(), streamed ? &cb : nullptr);
    REQUIRE(r.ok());
    CHECK(r->text == text);
    CHECK(r->malformed_reply == note);
    CHECK(r->finish_reason == FinishReason::kStop);
  }
}

TEST_CASE("429 with Retry-After then 500 then success: waits as told, then backs off exponentially") {
  std::atomic<int> calls{0};
  LocalServer server([&](const httplib::Request&, httplib::Response& res) {
    int n = ++calls;
    if (n == 1) {
      res.status = 429;
      res.set_header("Retry-After", "2");
      res.set_content(R"({"error": {"message": "rate limited"}})", "application/json");
    } else if (n == 2) {
      res.status = 500;
      res.set_content("internal error", "text/plain");
    } else if (n == 3) {
      res.status = 503;
    } else {
      res.set_content(kWholeReply, "application/json");
    }
  });
  Fixture f;
  auto client = f.Client(server.base_url());
  auto r = client->Chat(SimpleRequest(), nullptr);
  REQUIRE(r.ok());
  CHECK(r->attempts == 4);
  CHECK(calls == 4);
  // Retry-After wins over the backoff; then 100 ms × 2^(attempt-1) for attempts 2 and 3.
  CHECK(f.sleeps == std::vector<std::chrono::milliseconds>{2000ms, 200ms, 400ms});
  std::string log = f.log.Text();
  CHECK(log.find("HTTP 429") != std::string::npos);
  CHECK(log.find("retrying in 2000 ms") != std::string::npos);
}

TEST_CASE("retries stop at max_retries and the error says how many attempts were made") {
  std::atomic<int> calls{0};
  LocalServer server([&](const httplib::Request&, httplib::Response& res) {
    ++calls;
    res.status = 502;
    res.set_content("bad gateway", "text/plain");
  });
  Fixture f;
  f.endpoint.max_retries = 2;
  auto client = f.Client(server.base_url());
  auto r = client->Chat(SimpleRequest(), nullptr);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kUnavailable);
  CHECK(calls == 3);
  CHECK(r.status().message().find("HTTP 502 on attempt 3 of 3") != std::string::npos);
  CHECK(r.status().message().find("bad gateway") != std::string::npos);
  CHECK(r.status().message().find("endpoint 'vllm'") != std::string::npos);
  CHECK(f.sleeps == std::vector<std::chrono::milliseconds>{100ms, 200ms});
}

TEST_CASE("a Retry-After beyond the cap is clamped, and client errors are not retried") {
  std::atomic<int> calls{0};
  LocalServer server([&](const httplib::Request& req, httplib::Response& res) {
    ++calls;
    if (json::parse(req.body)["max_tokens"] == 1) {
      res.status = 400;
      res.set_content(R"({"error": "max_tokens too small"})", "application/json");
      return;
    }
    res.status = 429;
    res.set_header("Retry-After", "86400");
  });
  Fixture f;
  f.endpoint.max_retries = 1;
  auto client = f.Client(server.base_url());
  auto r = client->Chat(SimpleRequest(), nullptr);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kResourceExhausted);
  CHECK(f.sleeps == std::vector<std::chrono::milliseconds>{5000ms});

  calls = 0;
  ChatRequest bad = SimpleRequest();
  bad.max_tokens = 1;
  auto r2 = client->Chat(bad, nullptr);
  REQUIRE_FALSE(r2.ok());
  CHECK(r2.status().code() == StatusCode::kInvalidArgument);
  CHECK(r2.status().message().find("max_tokens too small") != std::string::npos);
  CHECK(calls == 1);
}

TEST_CASE("a server slower than the timeout gives DeadlineExceeded without retrying") {
  std::atomic<int> calls{0};
  LocalServer server([&](const httplib::Request&, httplib::Response& res) {
    ++calls;
    std::this_thread::sleep_for(1500ms);
    res.set_content(kWholeReply, "application/json");
  });
  Fixture f;
  f.endpoint.timeout = 1s;
  auto client = f.Client(server.base_url());
  auto r = client->Chat(SimpleRequest(), nullptr);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kDeadlineExceeded);
  CHECK(r.status().message().find("timeout of 1 s") != std::string::npos);
  CHECK(calls == 1);
}

TEST_CASE("a stream cut after text was shown fails with DataLoss and is not retried") {
  std::atomic<int> calls{0};
  LocalServer server([&](const httplib::Request&, httplib::Response& res) {
    ++calls;
    res.set_chunked_content_provider("text/event-stream", [](size_t, httplib::DataSink& sink) {
      std::string part = Sse(Delta({{"content", "half an ans"}}));
      sink.write(part.data(), part.size());
      return false;  // drop the connection mid-stream
    });
  });
  Fixture f;
  auto client = f.Client(server.base_url());
  std::string shown;
  StreamCallbacks cb{[&](std::string_view t) { shown += t; }, nullptr};
  auto r = client->Chat(SimpleRequest(), &cb);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kDataLoss);
  CHECK(shown == "half an ans");
  CHECK(calls == 1);
}

TEST_CASE("a stream that ends cleanly but without finish_reason or [DONE] is truncated") {
  std::atomic<int> calls{0};
  LocalServer server([&](const httplib::Request&, httplib::Response& res) {
    int n = ++calls;
    // First reply: a role-only chunk and then nothing; nothing reached the caller, so it is retried.
    std::string body = Sse(Delta({{"role", "assistant"}}));
    if (n > 1) body += Sse(Delta({{"content", "ok"}}, "stop")) + "data: [DONE]\n\n";
    res.set_content(body, "text/event-stream");
  });
  Fixture f;
  auto client = f.Client(server.base_url());
  std::string shown;
  StreamCallbacks cb{[&](std::string_view t) { shown += t; }, nullptr};
  auto r = client->Chat(SimpleRequest(), &cb);
  REQUIRE(r.ok());
  CHECK(r->attempts == 2);
  CHECK(shown == "ok");

  f.endpoint.max_retries = 0;
  calls = 0;
  auto once = f.Client(server.base_url());
  auto r2 = once->Chat(SimpleRequest(), &cb);
  REQUIRE_FALSE(r2.ok());
  CHECK(r2.status().code() == StatusCode::kDataLoss);
  CHECK(r2.status().message().find("truncated") != std::string::npos);
}

TEST_CASE("malformed bodies are errors naming what is wrong") {
  std::string reply;
  std::string type = "application/json";
  LocalServer server([&](const httplib::Request&, httplib::Response& res) { res.set_content(reply, type); });
  Fixture f;
  f.endpoint.max_retries = 0;
  auto client = f.Client(server.base_url());
  struct Case {
    std::string body;
    std::string expect;
  };
  for (const Case& c : std::vector<Case>{
           {"<html>gateway</html>", "is not JSON"},
           {"[1,2]", "is not a JSON object"},
           {R"({"choices": "x"})", "choices is missing or not an array"},
           {R"({"choices": []})", "choices is empty"},
           {R"({"choices": [{"message": {"content": 5}}]})", "choices[0].message.content is not a string"},
           {R"({"choices": [{"message": {"tool_calls": [{"function": {"arguments": "{}"}}]}}]})",
            "choices[0].message.tool_calls[0].function.name is missing"},
           {R"({"choices": [{"message": {"content": "x"}}], "usage": {"prompt_tokens": -3}})",
            "usage.prompt_tokens is not a non-negative integer"}}) {
    reply = c.body;
    auto r = client->Chat(SimpleRequest(), nullptr);
    INFO(c.body);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kDataLoss);
    CHECK(r.status().message().find(c.expect) != std::string::npos);
  }
  // A bad chunk in a stream names the chunk.
  type = "text/event-stream";
  reply = Sse(Delta({{"content", "a"}})) + "data: {not json\n\n";
  StreamCallbacks cb{[](std::string_view) {}, nullptr};
  auto r = client->Chat(SimpleRequest(), &cb);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("stream chunk 2") != std::string::npos);
}

TEST_CASE("the API key is sent as a bearer token and never appears in errors or logs") {
  const std::string key = "sk-temper-test-9f8e7d6c";
  std::string auth_seen;
  std::atomic<int> calls{0};
  LocalServer server([&](const httplib::Request& req, httplib::Response& res) {
    auth_seen = req.get_header_value("Authorization");
    // Some servers echo what they were given; the first replies are retried, the last is final.
    res.status = ++calls < 3 ? 503 : 401;
    res.set_content("invalid key " + key, "text/plain");
  });
  ::setenv("TEMPER_TEST_OPENAI_KEY", key.c_str(), 1);
  Fixture f;
  f.endpoint.api_key_env = "TEMPER_TEST_OPENAI_KEY";
  auto client = f.Client(server.base_url());
  auto r = client->Chat(SimpleRequest(), nullptr);
  REQUIRE_FALSE(r.ok());
  CHECK(auth_seen == "Bearer " + key);
  CHECK(r.status().code() == StatusCode::kUnauthenticated);
  CHECK(r.status().message().find(key) == std::string::npos);
  CHECK(r.status().message().find("invalid key [redacted]") != std::string::npos);
  std::string log = f.log.Text();
  CHECK(log.find("HTTP 503") != std::string::npos);  // the retries were logged ...
  CHECK(log.find(key) == std::string::npos);         // ... without the key

  // From a file, with a trailing newline as editors leave it.
  std::string path = temper::testing::TestTempDir() + "/key-XXXXXX";
  int fd = mkstemp(path.data());
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, "sk-from-file\n", 13) == 13);
  close(fd);
  Fixture g;
  g.endpoint.api_key_file = path;
  calls = 10;
  auto from_file = g.Client(server.base_url());
  (void)from_file->Chat(SimpleRequest(), nullptr);
  CHECK(auth_seen == "Bearer sk-from-file");
  std::remove(path.c_str());
}

TEST_CASE("a missing key variable or key file is a clear error naming it") {
  CapturedLog log;
  OpenAIEndpoint e{.base_url = "http://127.0.0.1:1/v1", .model = "m", .api_key_env = "TEMPER_TEST_UNSET_KEY_VAR"};
  ::unsetenv("TEMPER_TEST_UNSET_KEY_VAR");
  auto c = OpenAIClient::Create("remote", e, log.logger);
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().code() == StatusCode::kFailedPrecondition);
  CHECK(c.status().message().find("TEMPER_TEST_UNSET_KEY_VAR") != std::string::npos);
  CHECK(c.status().message().find("'remote'") != std::string::npos);

  OpenAIEndpoint f{.base_url = "http://127.0.0.1:1/v1", .model = "m", .api_key_file = "/nonexistent/temper.key"};
  auto d = OpenAIClient::Create("remote", f, log.logger);
  REQUIRE_FALSE(d.ok());
  CHECK(d.status().code() == StatusCode::kIOError);
  CHECK(d.status().message().find("/nonexistent/temper.key") != std::string::npos);
}

TEST_CASE("a refused connection is retried, then reported as Unavailable") {
  // Bind a port and close it again, so nothing listens there.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  socklen_t len = sizeof addr;
  REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  const int port = ntohs(addr.sin_port);
  close(fd);
  Fixture f;
  f.endpoint.max_retries = 1;
  auto client = f.Client("http://127.0.0.1:" + std::to_string(port) + "/v1");
  auto r = client->Chat(SimpleRequest(), nullptr);
  REQUIRE_FALSE(r.ok());
  INFO(r.status().ToString());
  CHECK(r.status().code() == StatusCode::kUnavailable);
  CHECK(r.status().message().find("attempt 2 of 2") != std::string::npos);
  CHECK(f.sleeps.size() == 1);
}
