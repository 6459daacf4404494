// What the HTTP serving tests share: a client for the server under test, a raw connection to it, the
// `data:` payloads of a server-sent-events body (with its framing checked), and the check of an
// OpenAI-style error reply.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include <httplib.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

namespace temper::engine::testing {

inline httplib::Client LocalClient(int port) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(60, 0);
  return c;
}

// A TCP connection to 127.0.0.1:`port`, for requests no client library would send; -1 when it fails.
inline int ConnectLoopback(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) return fd;
  if (fd >= 0) close(fd);
  return -1;
}

// Splits a server-sent-events body into its `data:` payloads, checking the framing.
inline std::vector<std::string> SseData(const std::string& sse) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < sse.size()) {
    const size_t end = sse.find("\n\n", pos);
    REQUIRE(end != std::string::npos);  // every event ends with a blank line
    const std::string event = sse.substr(pos, end - pos);
    REQUIRE(event.rfind("data: ", 0) == 0);
    REQUIRE(event.find('\n') == std::string::npos);  // one line per event
    out.push_back(event.substr(6));
    pos = end + 2;
  }
  return out;
}

// POSTs `body` to `path` and checks the reply is an OpenAI error with this status, code and param
// (empty: null) whose message contains `text`.
inline void CheckOpenAIError(httplib::Client& c, const std::string& path, const std::string& body, int status,
                             const std::string& code, const std::string& param, const std::string& text) {
  using nlohmann::json;
  auto res = c.Post(path, body, "application/json");
  REQUIRE(res);
  INFO(body << " -> " << res->body);
  CHECK(res->status == status);
  const json e = json::parse(res->body, nullptr, false);
  REQUIRE(e.is_object());
  REQUIRE(e.contains("error"));
  CHECK(e["error"]["type"].is_string());
  CHECK_THAT(e["error"]["message"].get<std::string>(), Catch::Contains(text));
  CHECK(e["error"]["code"] == (code.empty() ? json(nullptr) : json(code)));
  CHECK(e["error"]["param"] == (param.empty() ? json(nullptr) : json(param)));
}

}  // namespace temper::engine::testing
