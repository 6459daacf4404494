// LocalServer: a real HTTP server on 127.0.0.1 (cpp-httplib) that plays an OpenAI-compatible
// /v1/chat/completions endpoint for the client tests, on an ephemeral port.
#pragma once

#include <httplib.h>

#include <string>
#include <thread>

namespace temper::testing {

// Accepts from the moment it is constructed (the socket listens before the accept loop runs).
class LocalServer {
 public:
  explicit LocalServer(httplib::Server::Handler handler) {
    server_.Post("/v1/chat/completions", std::move(handler));
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~LocalServer() {
    server_.stop();
    thread_.join();
  }
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace temper::testing
