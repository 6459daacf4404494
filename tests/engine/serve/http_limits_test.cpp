// The HTTP server's limits over loopback, in process: deadlines for a request's head and body and
// for idle connections, the head and connection limits, keep-alive and pipelining through the
// listener, Expect: 100-continue, chunked bodies, the JSON depth check and the API key.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <httplib.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "engine/http_test_support.h"
#include "engine/serve/http_server.h"
#include "engine/serve/json_depth.h"
#include "engine/serving_fixture.h"

namespace temper::engine::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Served {
  std::unique_ptr<CpuBackend> backend = ServingBackend();
  LetterDetokenizer letters;
  std::unique_ptr<Scheduler> scheduler;
  std::unique_ptr<HttpServer> server;
  explicit Served(HttpServerOptions http = {}) {
    SchedulerOptions options;
    options.detokenizer = &letters;
    scheduler = MakeScheduler(*backend, options);
    http.model_name = "gemma4-tiny";
    auto s = HttpServer::Start(*scheduler, http, QuietLog());
    if (!s.ok()) FAIL(s.status().ToString());
    server = std::move(*s);
  }
};

int Connect(int port) {
  int fd = ConnectLoopback(port);
  REQUIRE(fd >= 0);
  return fd;
}

void Send(int fd, const std::string& bytes) {
  REQUIRE(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size()));
}

// Everything the server sends until it closes the connection or `timeout` passes.
std::string ReadUntilClosed(int fd, std::chrono::milliseconds timeout, bool* closed = nullptr) {
  std::string got;
  auto end = Clock::now() + timeout;
  while (Clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    char buf[4096];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      if (closed) *closed = true;
      return got;
    }
    got.append(buf, static_cast<size_t>(n));
  }
  if (closed) *closed = false;
  return got;
}

std::string Request(const std::string& method, const std::string& path, const std::string& body = "",
                    const std::string& headers = "") {
  return fmt::format(
      "{} {} HTTP/1.1\r\nHost: 127.0.0.1\r\n{}{}\r\n{}", method, path, headers,
      body.empty() ? "" : fmt::format("Content-Type: application/json\r\nContent-Length: {}\r\n", body.size()), body);
}

int Responses(const std::string& stream, const std::string& status) {
  int n = 0;
  for (size_t at = stream.find(status); at != std::string::npos; at = stream.find(status, at + 1)) ++n;
  return n;
}

TEST_CASE("a request head that does not arrive in time gets 408, and the connection closes", "[engine][http]") {
  HttpServerOptions http;
  http.header_timeout = 300ms;
  Served s(http);
  int fd = Connect(s.server->port());
  Send(fd, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n");  // never finished
  Clock::time_point start = Clock::now();
  bool closed = false;
  std::string reply = ReadUntilClosed(fd, 3s, &closed);
  close(fd);
  INFO(reply);
  CHECK(closed);
  CHECK(std::chrono::duration<double>(Clock::now() - start).count() < 2);
  CHECK(reply.rfind("HTTP/1.1 408 Request Timeout\r\n", 0) == 0);
  CHECK_THAT(reply, Catch::Contains("\"message\":\"the request head did not arrive within 300 ms\""));
}

TEST_CASE("a body that does not arrive in time gets 408", "[engine][http]") {
  HttpServerOptions http;
  http.body_timeout = 300ms;
  Served s(http);
  int fd = Connect(s.server->port());
  Send(fd, "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{\"model\":");
  std::string reply = ReadUntilClosed(fd, 3s);
  close(fd);
  CHECK(reply.rfind("HTTP/1.1 408", 0) == 0);
  CHECK_THAT(reply, Catch::Contains("the request body did not arrive within 300 ms"));
}

TEST_CASE("a kept-alive connection idle past its timeout is closed without a reply", "[engine][http]") {
  HttpServerOptions http;
  http.idle_timeout = 300ms;
  Served s(http);
  int fd = Connect(s.server->port());
  Send(fd, Request("GET", "/health"));
  bool closed = false;
  std::string reply = ReadUntilClosed(fd, 2s, &closed);
  close(fd);
  CHECK(closed);
  CHECK(Responses(reply, "HTTP/1.1 200 OK") == 1);
  CHECK(Responses(reply, "HTTP/1.1 408") == 0);
}

TEST_CASE("a request head over the limit gets 431", "[engine][http]") {
  Served s;
  int fd = Connect(s.server->port());
  Send(fd, "GET /health HTTP/1.1\r\nX-Long: " + std::string(80 << 10, 'h'));
  std::string reply = ReadUntilClosed(fd, 3s);
  close(fd);
  CHECK(reply.rfind("HTTP/1.1 431", 0) == 0);
}

TEST_CASE("connections beyond the limit get 503 while the others are served", "[engine][http]") {
  HttpServerOptions http;
  http.max_connections = 2;
  Served s(http);
  int a = Connect(s.server->port());
  int b = Connect(s.server->port());
  std::this_thread::sleep_for(100ms);
  int c = Connect(s.server->port());
  std::string refused = ReadUntilClosed(c, 2s);
  CHECK(refused.rfind("HTTP/1.1 503", 0) == 0);
  Send(a, Request("GET", "/health"));
  CHECK(Responses(ReadUntilClosed(a, 500ms), "HTTP/1.1 200 OK") == 1);
  for (int fd : {a, b, c}) close(fd);
}

TEST_CASE("pipelined requests on one kept-alive connection are answered in order", "[engine][http]") {
  Served s;
  int fd = Connect(s.server->port());
  const std::string body =
      json{{"model", "gemma4-tiny"}, {"prompt", {2, 5}}, {"max_tokens", 2}, {"temperature", 0}}.dump();
  Send(fd, Request("GET", "/health") + Request("POST", "/v1/completions", body) + Request("GET", "/v1/models"));
  std::string replies = ReadUntilClosed(fd, 1500ms);
  close(fd);
  INFO(replies);
  CHECK(Responses(replies, "HTTP/1.1 200 OK") == 3);
  size_t health = replies.find("\"status\":\"ok\"");
  size_t completion = replies.find("\"text_completion\"");
  size_t models = replies.find("\"object\":\"list\"");
  CHECK((health < completion && completion < models && models != std::string::npos));
}

TEST_CASE("Expect: 100-continue is answered once, then the body is read", "[engine][http]") {
  Served s;
  int fd = Connect(s.server->port());
  const std::string body =
      json{{"model", "gemma4-tiny"}, {"prompt", {2, 5}}, {"max_tokens", 2}, {"temperature", 0}}.dump();
  Send(fd, fmt::format(
               "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nExpect: 100-continue\r\nContent-Type: application/json\r\n"
               "Content-Length: {}\r\n\r\n",
               body.size()));
  std::string interim = ReadUntilClosed(fd, 300ms);
  CHECK(interim == "HTTP/1.1 100 Continue\r\n\r\n");
  Send(fd, body);
  std::string reply = ReadUntilClosed(fd, 1s);
  close(fd);
  CHECK(reply.rfind("HTTP/1.1 200 OK", 0) == 0);
  CHECK(Responses(reply, "100 Continue") == 0);
}

TEST_CASE("a chunked request body is read by the worker", "[engine][http]") {
  Served s;
  int fd = Connect(s.server->port());
  const std::string body =
      json{{"model", "gemma4-tiny"}, {"prompt", {2, 5}}, {"max_tokens", 2}, {"temperature", 0}}.dump();
  Send(fd, fmt::format("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\nContent-Type: "
                       "application/json\r\n\r\n"
                       "{:x}\r\n{}\r\n0\r\n\r\n",
                       body.size(), body));
  std::string reply = ReadUntilClosed(fd, 1s);
  close(fd);
  CHECK(reply.rfind("HTTP/1.1 200 OK", 0) == 0);
}

TEST_CASE("JSON nesting is found outside strings only", "[engine][http]") {
  CHECK_FALSE(FindNestingBeyond(R"({"a":[[1]]})", 3));
  CHECK(FindNestingBeyond(R"({"a":[[[1]]]})", 3) == size_t{7});
  CHECK_FALSE(FindNestingBeyond(R"({"a":"[[[[[[\"[[[["})", 1));
  CHECK_FALSE(FindNestingBeyond("]]]]{}", 1));
}

TEST_CASE("a body nested beyond max_json_depth gets 400 json_too_deep, and one at the limit is parsed",
          "[engine][http]") {
  HttpServerOptions http;
  http.max_json_depth = 8;
  Served s(http);
  httplib::Client c = LocalClient(s.server->port());
  CheckOpenAIError(c, "/v1/completions", R"({"model":"gemma4-tiny","prompt":[[[[[[[[1]]]]]]]]})", 400, "json_too_deep",
                   "", "nests JSON deeper than 8 levels");
  CheckOpenAIError(c, "/v1/completions", R"({"model":"gemma4-tiny","prompt":[[[[[[1]]]]]]})", 400, "", "prompt",
                   "must be a non-negative integer token id");
}

TEST_CASE("with an API key: Bearer in any case is accepted, /health needs none, a 401 keeps the connection usable",
          "[engine][http]") {
  HttpServerOptions http;
  http.api_key = "k-123";
  Served s(http);
  httplib::Client c = LocalClient(s.server->port());
  auto ok = c.Get("/v1/models", {{"Authorization", "bearer k-123"}});
  REQUIRE(ok);
  CHECK(ok->status == 200);
  auto shorter = c.Get("/v1/models", {{"Authorization", "Bearer k-12"}});
  REQUIRE(shorter);
  CHECK(shorter->status == 401);
  CHECK(shorter->get_header_value("WWW-Authenticate") == "Bearer");
  auto health = c.Get("/health");
  REQUIRE(health);
  CHECK(health->status == 200);
  // A refused POST whose body was never read: the next request on the same connection still works.
  int fd = Connect(s.server->port());
  Send(fd, Request("POST", "/v1/completions", R"({"model":"gemma4-tiny","prompt":[2],"max_tokens":1})") +
               Request("GET", "/health"));
  std::string replies = ReadUntilClosed(fd, 1s);
  close(fd);
  CHECK(Responses(replies, "HTTP/1.1 401") == 1);
  CHECK(Responses(replies, "HTTP/1.1 200 OK") == 1);
}

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

TEST_CASE("out of descriptors, the listener neither spins nor stops, and serves once they free up", "[engine][http]") {
  Served s;
  rlimit saved{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &saved) == 0);
  size_t open_now = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++open_now;
  rlimit tight = saved;
  tight.rlim_cur = open_now + 24;
  REQUIRE(setrlimit(RLIMIT_NOFILE, &tight) == 0);
  // Each connection costs this process two descriptors (both ends): the server's accepts fail
  // first, with connections still waiting in its backlog.
  std::vector<int> hogs;
  for (int i = 0; i < 64; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) break;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(s.server->port()));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      close(fd);
      break;
    }
    hogs.push_back(fd);
  }
  std::this_thread::sleep_for(300ms);
  const double before = CpuSeconds();
  std::this_thread::sleep_for(1s);
  const double cpu = CpuSeconds() - before;
  for (int fd : hogs) close(fd);
  REQUIRE(setrlimit(RLIMIT_NOFILE, &saved) == 0);
  INFO(hogs.size() << " connections; CPU " << cpu << " s in 1 s");
  CHECK(hogs.size() > 8);
  CHECK(cpu < 0.3);  // a loop spinning on accept burns the whole second
  httplib::Client c = LocalClient(s.server->port());
  c.set_connection_timeout(3, 0);
  auto health = c.Get("/health");
  REQUIRE(health);
  CHECK(health->status == 200);
}

}  // namespace
}  // namespace temper::engine::testing
