// Attacks on `temper-lm serve` (issue 20, part D): slow clients, a huge body, deeply nested JSON,
// requests without the API key, and clients that hang up while the engine generates for them.
// Issue 46 (finding 8): a web page the operator opens driving the server, through DNS rebinding (a
// foreign Host) or a cross-origin "simple" POST (text/plain, form types), and a server without a
// key listening beyond loopback.
// Every case runs the real binary on the tiny fixture and talks to it over a real TCP socket.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <regex>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
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

// One request on a fresh connection, its head exactly `headers` (Host and Content-Type among
// them, as a browser or a forged client sends them); the raw reply.
std::string Exchange(int port, const std::string& method, const std::string& path,
                     const std::vector<std::string>& headers, const std::string& body = "") {
  std::string request = fmt::format("{} {} HTTP/1.1\r\n", method, path);
  for (const std::string& h : headers) request += h + "\r\n";
  if (!body.empty() || method == "POST") request += fmt::format("Content-Length: {}\r\n", body.size());
  request += "Connection: close\r\n\r\n" + body;
  int fd = ConnectLoopback(port);
  if (fd < 0) return "";
  SendAll(fd, request);
  std::string reply = ReadResponse(fd, 30s);
  close(fd);
  return reply;
}

// The reply's OpenAI-style error code, "" when the body is not such an error.
std::string ErrorCode(const std::string& reply) {
  json error = json::parse(BodyOf(reply), nullptr, false);
  if (!error.is_object() || !error.contains("error") || !error["error"]["code"].is_string()) return "";
  return error["error"]["code"];
}

std::string ErrorMessage(const std::string& reply) {
  json error = json::parse(BodyOf(reply), nullptr, false);
  if (!error.is_object() || !error.contains("error") || !error["error"]["message"].is_string()) return "";
  return error["error"]["message"];
}

// Whether the reply's head carries any Access-Control-* header (what would let a page read it).
bool HasCorsHeader(const std::string& reply) {
  std::string head = reply.substr(0, reply.find("\r\n\r\n"));
  std::transform(head.begin(), head.end(), head.begin(), [](unsigned char c) { return std::tolower(c); });
  return head.find("\r\naccess-control-") != std::string::npos;
}

TEST_CASE("DNS rebinding: requests naming another Host get 421 naming it and run nothing, keyed or not") {
  TempDir dir;
  const std::string key = "sk-temper-rebind-51e0";
  LmServeProcess open_lm(dir, {});
  Status started = open_lm.Start();
  INFO(started.message());
  REQUIRE(started.ok());
  const int port = open_lm.port();
  const std::string evil = fmt::format("Host: evil.example:{}", port);
  const std::string body = Completion(4).dump();

  // The page at evil.example, its name now resolving to 127.0.0.1, is same-origin with the server
  // in the browser's eyes: it may send JSON and read the reply. Only the Host gives it away.
  for (const std::string& host : {evil, std::string("Host: evil.example"), std::string("Host: 127.0.0.1.evil.example"),
                                  std::string("Host: localhost.evil.example:") + std::to_string(port),
                                  std::string("Host: [::1]"), std::string("Host: 127.0.0.2"), std::string("Host:")}) {
    std::string reply = Exchange(port, "POST", "/v1/completions", {host, "Content-Type: application/json"}, body);
    INFO(host << "\n" << reply);
    CHECK(StatusOf(reply) == 421);
    CHECK(ErrorCode(reply) == "host_not_allowed");
  }
  for (const char* path : {"/v1/models", "/metrics", "/openapi.json", "/health"}) {
    std::string reply = Exchange(port, "GET", path, {evil});
    INFO(path << "\n" << reply);
    CHECK(StatusOf(reply) == 421);
    CHECK_THAT(ErrorMessage(reply),
               Catch::Contains("evil.example:" + std::to_string(port)) && Catch::Contains("--allowed-host"));
  }
  CHECK(Metric(port, "generated_tokens_total") == 0);

  // The server's own names, with or without the port, still work.
  for (const std::string& host : {fmt::format("Host: 127.0.0.1:{}", port), std::string("Host: 127.0.0.1"),
                                  fmt::format("Host: localhost:{}", port), std::string("Host: LocalHost")}) {
    std::string reply = Exchange(port, "POST", "/v1/completions", {host, "Content-Type: application/json"}, body);
    INFO(host << "\n" << reply.substr(0, 500));
    CHECK(StatusOf(reply) == 200);
  }
  CHECK(open_lm.Stop() == 0);

  // A key does not make a foreign Host acceptable: the key's holder reaches the server by its names.
  TempDir keyed_dir;  // its own log: the first server's "serving" line must not be read as this one's
  LmServeProcess keyed_lm(keyed_dir, {"--api-key", key});
  started = keyed_lm.Start();
  INFO(started.message());
  REQUIRE(started.ok());
  std::string reply = Exchange(keyed_lm.port(), "POST", "/v1/completions",
                               {fmt::format("Host: evil.example:{}", keyed_lm.port()), "Content-Type: application/json",
                                "Authorization: Bearer " + key},
                               body);
  INFO(reply);
  CHECK(StatusOf(reply) == 421);
  CHECK(Metric(keyed_lm.port(), "generated_tokens_total") == -1);  // /metrics needs the key: nothing read
  CHECK(keyed_lm.Alive());
}

TEST_CASE(
    "all interfaces with a key: a foreign name gets 421 unless --allowed-host lists it, IP literals are answered") {
  TempDir dir;
  const std::string key = "sk-temper-wildcard-9c3d";
  LmServeProcess lm(dir, {"--host", "0.0.0.0", "--api-key", key, "--allowed-host", "llm.internal"});
  Status started = lm.Start();
  INFO(started.message());
  REQUIRE(started.ok());
  const int port = lm.port();
  const std::string auth = "Authorization: Bearer " + key;
  auto post = [&](const std::string& host) {
    return Exchange(port, "POST", "/v1/completions", {host, "Content-Type: application/json", auth},
                    Completion(2).dump());
  };
  std::string refused = post(fmt::format("Host: evil.example:{}", port));
  INFO(refused);
  CHECK(StatusOf(refused) == 421);
  CHECK_THAT(ErrorMessage(refused), Catch::Contains("evil.example"));
  CHECK(StatusOf(post("Host: llm.internal.evil.example")) == 421);
  // Remote clients reach a server on all interfaces through addresses it cannot list, and no
  // rebinding page can name an IP literal (its origin is a name): those are answered.
  for (const std::string& host : {fmt::format("Host: llm.internal:{}", port), std::string("Host: LLM.internal"),
                                  fmt::format("Host: 192.0.2.7:{}", port), fmt::format("Host: [2001:db8::7]:{}", port),
                                  fmt::format("Host: localhost:{}", port), fmt::format("Host: 127.0.0.1:{}", port)}) {
    std::string reply = post(host);
    INFO(host << "\n" << reply.substr(0, 500));
    CHECK(StatusOf(reply) == 200);
  }
  CHECK(lm.Alive());
}

TEST_CASE("CORS simple requests: text/plain, form and multipart POSTs and one without a type get 415 and run nothing") {
  TempDir dir;
  LmServeProcess lm(dir,
                    {"--tokenizer", std::string(TEMPER_TEST_DATA_DIR) + "/tokenizer/gemma4-chat-tiny-tokenizer.json"});
  Status started = lm.Start();
  INFO(started.message());
  REQUIRE(started.ok());
  const int port = lm.port();
  const std::string host = fmt::format("Host: 127.0.0.1:{}", port);
  const std::string completion = Completion(4).dump();
  const std::string chat =
      json{{"model", "gemma4-tiny"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 4}}.dump();
  // What a page's <form> or fetch(..., {mode: "no-cors"}) sends without asking the server first,
  // with a JSON body all the same, plus a client that names no type.
  const std::vector<std::vector<std::string>> refused_heads = {
      {host, "Content-Type: text/plain"},
      {host, "Content-Type: text/plain;charset=UTF-8", "Origin: http://evil.example"},
      {host, "Content-Type: application/x-www-form-urlencoded"},
      {host, "Content-Type: multipart/form-data; boundary=xyz"},
      {host, "Content-Type: application/jsonp"},
      {host}};
  for (const std::vector<std::string>& head : refused_heads) {
    for (const auto& [path, body] :
         {std::pair{"/v1/completions", completion}, std::pair{"/v1/chat/completions", chat}}) {
      std::string reply = Exchange(port, "POST", path, head, body);
      INFO(fmt::format("{} {}\n{}", path, fmt::join(head, " | "), reply));
      CHECK(StatusOf(reply) == 415);
      CHECK(ErrorCode(reply) == "unsupported_media_type");
      CHECK_THAT(ErrorMessage(reply), Catch::Contains("application/json"));
    }
  }
  CHECK(Metric(port, "generated_tokens_total") == 0);

  std::string reply =
      Exchange(port, "POST", "/v1/completions", {host, "Content-Type: Application/JSON; charset=utf-8"}, completion);
  INFO(reply.substr(0, 500));
  CHECK(StatusOf(reply) == 200);
  CHECK(Metric(port, "generated_tokens_total") > 0);
  CHECK(lm.Alive());
}

TEST_CASE("CORS: no reply carries an Access-Control header, so no page may read one, and no preflight is approved") {
  TempDir dir;
  LmServeProcess lm(dir);
  Status started = lm.Start();
  INFO(started.message());
  REQUIRE(started.ok());
  const int port = lm.port();
  const std::string host = fmt::format("Host: 127.0.0.1:{}", port);
  const std::string origin = "Origin: http://evil.example";
  std::vector<std::string> replies = {
      Exchange(port, "GET", "/v1/models", {host, origin}), Exchange(port, "GET", "/health", {host, origin}),
      Exchange(port, "POST", "/v1/completions", {host, origin, "Content-Type: application/json"}, Completion(2).dump()),
      Exchange(port, "POST", "/v1/completions", {host, origin, "Content-Type: text/plain"}, Completion(2).dump()),
      Exchange(port, "GET", "/v1/models", {"Host: evil.example", origin})};
  for (const std::string& reply : replies) {
    INFO(reply.substr(0, 500));
    CHECK(StatusOf(reply) != 0);
    CHECK_FALSE(HasCorsHeader(reply));
  }
  // The preflight a page's JSON POST needs first: refused, and without any Access-Control-Allow-*.
  std::string preflight = Exchange(port, "OPTIONS", "/v1/completions",
                                   {host, origin, "Access-Control-Request-Method: POST",
                                    "Access-Control-Request-Headers: content-type, authorization"});
  INFO(preflight);
  CHECK(StatusOf(preflight) >= 400);
  CHECK_FALSE(HasCorsHeader(preflight));
  CHECK(Metric(port, "generated_tokens_total") > 0);  // the one JSON POST from our own Host ran
}

TEST_CASE("no API key: a non-loopback --host is refused at start naming --api-key-file, and loopback says it once") {
  for (const char* host : {"0.0.0.0", "::", "192.0.2.7", "llm.internal"}) {
    TempDir dir;
    LmServeProcess lm(dir, {"--host", host});
    Status started = lm.Start();
    INFO(host << ": " << started.message());
    CHECK_FALSE(started.ok());
    CHECK_THAT(lm.Log(), Catch::Contains(fmt::format("--host {}", host)) && Catch::Contains("--api-key-file") &&
                             Catch::Contains("loopback only"));
    CHECK_FALSE(lm.Alive());
  }
  TempDir dir;
  LmServeProcess lm(dir, {"--host", "127.0.0.1"});
  Status started = lm.Start();
  INFO(started.message());
  REQUIRE(started.ok());
  const std::string log = lm.Log();
  INFO(log);
  const std::string notice = "no API key: listening on loopback only";
  const size_t first = log.find(notice);
  CHECK(first != std::string::npos);
  CHECK(log.find(notice, first + 1) == std::string::npos);
  CHECK(lm.Alive());
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
