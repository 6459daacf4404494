// Attacks on `temper-lm serve` (issue 20, part D): slow clients, a huge body, deeply nested JSON,
// requests without the API key, and clients that hang up while the engine generates for them.
// Every case runs the real binary on the tiny fixture and talks to it over a real TCP socket.
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <regex>
#include <thread>

#include <fmt/format.h>
#include <httplib.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "security/lm_serve_process.h"

namespace temper::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string Post(const std::string& path, const std::string& body, const std::string& extra_headers = "") {
  return fmt::format(
      "POST {} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{}Content-Length: {}\r\n\r\n{}", path,
      extra_headers, body.size(), body);
}

json Completion(int max_tokens, bool stream = false, const std::string& model = "gemma4-tiny") {
  return {{"model", model},
          {"prompt", {2, 17, 33, 5}},
          {"max_tokens", max_tokens},
          {"temperature", 0},
          {"stream", stream}};
}

// One Prometheus sample of /metrics (temper_engine_<name>), -1 when absent.
double Metric(int port, const std::string& name) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(5, 0);
  auto res = c.Get("/metrics");
  if (!res || res->status != 200) return -1;
  std::smatch m;
  std::regex line("\ntemper_engine_" + name + " ([-0-9.e+]+)");
  return std::regex_search(res->body, m, line) ? std::stod(m[1]) : -1;
}

// Waits up to `timeout` for `pred(metric)`; the last value read.
template <typename Pred>
double WaitMetric(int port, const std::string& name, std::chrono::milliseconds timeout, Pred pred) {
  double v = Metric(port, name);
  for (auto end = Clock::now() + timeout; !pred(v) && Clock::now() < end; v = Metric(port, name)) {
    std::this_thread::sleep_for(50ms);
  }
  return v;
}

// A model of the fixture's layout but wider, with random weights: decoding takes milliseconds per
// token, so a long generation is still running when the client hangs up. Returns the config's path
// (the served model is named after its stem, "slow").
std::string SlowModelConfig(const TempDir& dir) {
  std::ifstream in(std::string(TEMPER_TEST_DATA_DIR) + "/gemma4-tiny/config.json");
  json config = json::parse(in);
  config["hidden_size"] = 512;
  config["intermediate_size"] = 2048;
  config["num_attention_heads"] = 8;
  config["head_dim"] = 64;
  config["global_head_dim"] = 128;
  return dir.Write("slow.json", config.dump());
}

TEST_CASE("slowloris: 48 clients trickling their headers do not stop a normal client from being served") {
  TempDir dir;
  LmServeProcess lm(dir);
  REQUIRE(lm.Start().ok());
  std::vector<int> slow;
  for (int i = 0; i < 48; ++i) {
    int fd = ConnectLoopback(lm.port());
    REQUIRE(fd >= 0);
    REQUIRE(SendAll(fd, "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"));
    slow.push_back(fd);
  }
  // One header byte a second on each: always inside a 5 s per-read timeout, never a whole request.
  std::atomic<bool> stop{false};
  std::thread trickle([&] {
    while (!stop.load()) {
      for (int fd : slow) SendAll(fd, "X");
      for (int i = 0; i < 10 && !stop.load(); ++i) std::this_thread::sleep_for(100ms);
    }
  });
  std::this_thread::sleep_for(1s);

  httplib::Client c("127.0.0.1", lm.port());
  c.set_connection_timeout(5, 0);
  c.set_read_timeout(5, 0);  // the normal client's own timeout
  Clock::time_point start = Clock::now();
  auto health = c.Get("/health");
  auto completion = c.Post("/v1/completions", Completion(4).dump(), "application/json");
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  stop = true;
  trickle.join();
  for (int fd : slow) close(fd);
  INFO("served in " << seconds << " s");
  REQUIRE(health);
  CHECK(health->status == 200);
  REQUIRE(completion);
  CHECK(completion->status == 200);
  CHECK(seconds < 5);
  CHECK(lm.Alive());
}

TEST_CASE("huge body: a declared 1 GiB body gets 413 at once, without the server waiting to read it") {
  TempDir dir;
  LmServeProcess lm(dir);
  REQUIRE(lm.Start().ok());
  int fd = ConnectLoopback(lm.port());
  REQUIRE(fd >= 0);
  REQUIRE(SendAll(fd,
                  "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  "Content-Length: 1073741824\r\n\r\n{\"model\":"));
  Clock::time_point start = Clock::now();
  std::string reply = ReadResponse(fd, 3s);
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  close(fd);
  INFO(reply.substr(0, 500) << "\nafter " << seconds << " s");
  CHECK(StatusOf(reply) == 413);
  CHECK(seconds < 2);
  json error = json::parse(BodyOf(reply), nullptr, false);
  REQUIRE(error.is_object());
  CHECK_THAT(error["error"]["message"].get<std::string>(), Catch::Contains("1073741824") && Catch::Contains("at most"));
  CHECK(lm.Alive());
}

TEST_CASE("huge body: a 9 MiB body over the 8 MiB limit gets 413 naming the limit") {
  TempDir dir;
  LmServeProcess lm(dir);
  REQUIRE(lm.Start().ok());
  json body = Completion(4);
  body["user"] = std::string(9 << 20, 'u');
  int fd = ConnectLoopback(lm.port());
  REQUIRE(fd >= 0);
  SendAll(fd, Post("/v1/completions", body.dump()));  // the server may hang up before taking it all
  std::string reply = ReadResponse(fd, 10s);
  close(fd);
  INFO(reply.substr(0, 500));
  CHECK(StatusOf(reply) == 413);
  json error = json::parse(BodyOf(reply), nullptr, false);
  REQUIRE(error.is_object());
  CHECK_THAT(error["error"]["message"].get<std::string>(), Catch::Contains("8388608"));
  CHECK(lm.Alive());
}

TEST_CASE("deep JSON: a body nested 100000 levels gets 400 naming the depth limit") {
  TempDir dir;
  LmServeProcess lm(dir);
  REQUIRE(lm.Start().ok());
  const int depth = 100000;
  std::string body = "{\"model\":\"gemma4-tiny\",\"prompt\":" + std::string(depth, '[') + std::string(depth, ']') + "}";
  httplib::Client c("127.0.0.1", lm.port());
  c.set_read_timeout(10, 0);
  auto res = c.Post("/v1/completions", body, "application/json");
  REQUIRE(res);
  INFO(res->body.substr(0, 500));
  CHECK(res->status == 400);
  json error = json::parse(res->body, nullptr, false);
  REQUIRE(error.is_object());
  CHECK_THAT(error["error"]["message"].get<std::string>(), Catch::Contains("nest") && Catch::Contains("64"));
  CHECK(lm.Alive());
}

TEST_CASE("API key: requests without the key or with a wrong one get 401, and no key is ever logged") {
  TempDir dir;
  const std::string key = "sk-temper-right-4f1c9a";
  const std::string wrong = "sk-temper-wrong-77d2e0";
  LmServeProcess lm(dir, {"--api-key", key});
  Status started = lm.Start();
  INFO(started.message());
  REQUIRE(started.ok());
  httplib::Client c("127.0.0.1", lm.port());
  c.set_read_timeout(10, 0);
  auto check_401 = [](const httplib::Result& res) {
    REQUIRE(res);
    INFO(res->body);
    CHECK(res->status == 401);
    json error = json::parse(res->body, nullptr, false);
    REQUIRE(error.is_object());
    CHECK(error["error"]["code"] == "invalid_api_key");
  };
  check_401(c.Get("/v1/models"));
  check_401(c.Post("/v1/completions", Completion(2).dump(), "application/json"));
  check_401(c.Get("/v1/models", {{"Authorization", "Bearer " + wrong}}));
  check_401(c.Get("/metrics", {{"Authorization", "Bearer " + wrong}}));
  check_401(
      c.Post("/v1/completions", {{"Authorization", "Bearer " + wrong}}, Completion(2).dump(), "application/json"));
  check_401(c.Get("/v1/models", {{"Authorization", "Bearer " + key + "x"}}));
  check_401(c.Get("/v1/models", {{"Authorization", key}}));

  auto health = c.Get("/health");  // for load balancers: no key needed, nothing to learn
  REQUIRE(health);
  CHECK(health->status == 200);
  auto models = c.Get("/v1/models", {{"Authorization", "Bearer " + key}});
  REQUIRE(models);
  CHECK(models->status == 200);
  auto completion =
      c.Post("/v1/completions", {{"Authorization", "Bearer " + key}}, Completion(2).dump(), "application/json");
  REQUIRE(completion);
  CHECK(completion->status == 200);

  CHECK(lm.Stop() == 0);
  std::string log = lm.Log();
  INFO(log);
  CHECK(log.find(key) == std::string::npos);
  CHECK(log.find(wrong) == std::string::npos);
}

// Starts a long generation on a fresh connection, waits until the engine decodes it, then hangs up.
void HangUpMidGeneration(const LmServeProcess& lm, bool stream) {
  int fd = ConnectLoopback(lm.port());
  REQUIRE(fd >= 0);
  REQUIRE(SendAll(fd, Post("/v1/completions", Completion(4000, stream, "slow").dump())));
  double generated = WaitMetric(lm.port(), "generated_tokens_total", 30s, [](double v) { return v >= 8; });
  REQUIRE(generated >= 8);
  if (stream) {
    REQUIRE(ReadUntil(fd, "data: ", 5s).find("data: ") != std::string::npos);
  }
  close(fd);
}

// After the hang-up, the engine must stop decoding that request within a couple of seconds.
void CheckEngineStopped(const LmServeProcess& lm) {
  double running = WaitMetric(lm.port(), "requests_running", 3s, [](double v) { return v == 0; });
  CHECK(running == 0);
  double tokens = Metric(lm.port(), "generated_tokens_total");
  std::this_thread::sleep_for(1s);
  CHECK(Metric(lm.port(), "generated_tokens_total") == tokens);
  CHECK(tokens < 4000);
}

TEST_CASE("client disconnect: a non-streaming client that hangs up stops the engine generating for it") {
  TempDir dir;
  LmServeProcess lm(dir, {"--synthetic", SlowModelConfig(dir)});
  Status started = lm.Start();
  INFO(started.message());
  REQUIRE(started.ok());
  HangUpMidGeneration(lm, /*stream=*/false);
  CheckEngineStopped(lm);
  CHECK(lm.Alive());
}

TEST_CASE("client disconnect: a streaming client that hangs up stops the engine generating for it") {
  TempDir dir;
  LmServeProcess lm(dir, {"--synthetic", SlowModelConfig(dir)});
  Status started = lm.Start();
  INFO(started.message());
  REQUIRE(started.ok());
  HangUpMidGeneration(lm, /*stream=*/true);
  CheckEngineStopped(lm);
  CHECK(lm.Alive());
}

}  // namespace
}  // namespace temper::testing
