// Record a real exchange (OpenAI client against a local server) and replay it: same answers, in the
// same order, without the server; a request never recorded is an error that names it.
#include "roles/replay_client.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>

#include "roles/client_factory.h"
#include "roles/local_server.h"
#include "scratch_space.h"

using namespace temper;
using nlohmann::json;
using temper::testing::LocalServer;

namespace {

struct TempFile {
  std::string path;
  TempFile() {
    std::string tmpl = temper::testing::TestTempDir() + "/replay-XXXXXX";
    int fd = mkstemp(tmpl.data());
    REQUIRE(fd >= 0);
    close(fd);
    std::remove(tmpl.c_str());  // recording creates it
    path = tmpl;
  }
  ~TempFile() { std::remove(path.c_str()); }
};

ChatRequest Request(const std::string& role, const std::string& user) {
  ChatRequest r;
  r.role_name = role;
  r.messages = {{ChatRole::kSystem, "You are the " + role + "."}, {ChatRole::kUser, user}};
  r.max_tokens = 64;
  return r;
}

}  // namespace

TEST_CASE("the request hash is canonical: equal requests agree, any difference changes it") {
  ChatRequest a = Request("worker", "fix it");
  ChatRequest b = Request("worker", "fix it");
  CHECK(RequestHash(a) == RequestHash(b));
  CHECK(RequestHash(a).size() == 16);
  b.sampling.temperature = 0.5;
  CHECK(RequestHash(a) != RequestHash(b));
  ChatRequest c = Request("reflector", "fix it");
  c.messages[0].content = a.messages[0].content;
  CHECK(RequestHash(a) != RequestHash(c));  // the role is part of the key
}

TEST_CASE("record through a real endpoint, then replay deterministically without it") {
  std::atomic<int> calls{0};
  TempFile tape;
  {
    LocalServer server([&](const httplib::Request& req, httplib::Response& res) {
      int n = ++calls;
      json body = json::parse(req.body);
      std::string user = body["messages"][1]["content"];
      json reply = {{"model", "gemma"},
                    {"choices",
                     {{{"finish_reason", n == 2 ? "tool_calls" : "stop"},
                       {"message", {{"content", "answer " + std::to_string(n) + " to " + user}}}}}},
                    {"usage", {{"prompt_tokens", 10 * n}, {"completion_tokens", n}}}};
      if (n == 2) {
        json call = {{"id", "c"}, {"type", "function"}, {"function", {{"name", "finish"}, {"arguments", "{}"}}}};
        reply["choices"][0]["message"]["tool_calls"] = json::array({call});
      }
      res.set_content(reply.dump(), "application/json");
    });
    Logger logger(LogLevel::kError);
    EndpointConfig remote{"remote", OpenAIEndpoint{.base_url = server.base_url(), .model = "gemma"}};
    auto recorder = MakeModelClient(remote, logger, tape.path);
    REQUIRE(recorder.ok());
    CHECK((*recorder)->endpoint_name() == "remote");
    for (const char* u : {"one", "two", "one"}) REQUIRE((*recorder)->Chat(Request("worker", u), nullptr).ok());
  }
  CHECK(calls == 3);

  Logger logger(LogLevel::kError);
  EndpointConfig tape_ep{"tape", ReplayEndpoint{tape.path}};
  for (int round = 0; round < 2; ++round) {  // two fresh replays give the same answers
    auto replay = MakeModelClient(tape_ep, logger);
    REQUIRE(replay.ok());
    auto a = (*replay)->Chat(Request("worker", "one"), nullptr);
    std::string streamed;
    StreamCallbacks cb{[&](std::string_view t) { streamed += t; }, nullptr};
    auto b = (*replay)->Chat(Request("worker", "two"), &cb);
    auto c = (*replay)->Chat(Request("worker", "one"), nullptr);
    auto d = (*replay)->Chat(Request("worker", "one"), nullptr);  // past the recording: the last again
    REQUIRE((a.ok() && b.ok() && c.ok() && d.ok()));
    CHECK(a->text == "answer 1 to one");
    CHECK(b->text == "answer 2 to two");
    CHECK(streamed == "answer 2 to two");
    REQUIRE(b->tool_calls.size() == 1);
    CHECK(b->tool_calls[0].name == "finish");
    CHECK(b->finish_reason == FinishReason::kToolCalls);
    CHECK(b->usage.prompt_tokens == 20);
    CHECK(c->text == "answer 3 to one");
    CHECK(d->text == "answer 3 to one");
  }
  CHECK(calls == 3);  // replay never touched the server
}

TEST_CASE("a request that was never recorded is an error naming it") {
  TempFile tape;
  std::ofstream(tape.path) << "";
  auto replay = ReplayClient::Open("tape", tape.path);
  REQUIRE(replay.ok());
  ChatRequest r =
      Request("architect", "Pick the next rule among xccdf_org.ssgproject.content_rule_sshd_disable_root_login");
  auto got = (*replay)->Chat(r, nullptr);
  REQUIRE_FALSE(got.ok());
  CHECK(got.status().code() == StatusCode::kNotFound);
  const std::string m = got.status().message();
  CHECK_THAT(m, Catch::Contains("architect request"));
  CHECK_THAT(m, Catch::Contains("hash " + RequestHash(r)));
  CHECK_THAT(m, Catch::Contains("first: \"You are the architect.\""));
  CHECK_THAT(m, Catch::Contains("last: \"Pick the next rule"));
  CHECK_THAT(m, Catch::Contains(tape.path));
}

TEST_CASE("malformed transcripts are errors with file and line, and missing files too") {
  TempFile tape;
  std::ofstream(tape.path)
      << "\n{\"request\": {}, \"response\": {\"text\": \"ok\"}}\n{\"request\": {}, \"response\": {\"text\": 5}}\n";
  auto bad = ReplayClient::Open("tape", tape.path);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == StatusCode::kDataLoss);
  CHECK_THAT(bad.status().message(), Catch::Contains(tape.path + ":3: recorded response: text is not a string"));
  std::ofstream(tape.path) << "not json\n";
  auto worse = ReplayClient::Open("tape", tape.path);
  REQUIRE_FALSE(worse.ok());
  CHECK_THAT(worse.status().message(), Catch::Contains(":1: not a JSON object"));
  auto none = ReplayClient::Open("tape", "/nonexistent/tape.jsonl");
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().code() == StatusCode::kNotFound);
}

TEST_CASE("the factory refuses what it cannot build, with a reason") {
  Logger logger(LogLevel::kError);
  auto inprocess = MakeModelClient({"local", InprocessEndpoint{.model_dir = "/nonexistent/m"}}, logger);
  REQUIRE_FALSE(inprocess.ok());
  CHECK(inprocess.status().code() == StatusCode::kNotFound);
  CHECK_THAT(inprocess.status().message(), Catch::Contains("'local'") && Catch::Contains("/nonexistent/m"));
  auto loop = MakeModelClient({"tape", ReplayEndpoint{"/tmp/x.jsonl"}}, logger, "/tmp/x.jsonl");
  REQUIRE_FALSE(loop.ok());
  CHECK_THAT(loop.status().message(), Catch::Contains("cannot record into the transcript"));
}
