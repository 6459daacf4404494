// Test harness: a real `temper-lm serve` process on the tiny Gemma 4 fixture, listening on a free
// loopback port, plus the raw-socket client the attacks need (httplib's client is too polite to
// send half a request or to hang up mid-reply).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/http_test_support.h"
#include "orchestrator/temp_dir.h"

namespace temper::testing {

using engine::testing::ConnectLoopback;

class LmServeProcess {
 public:
  // `flags` are added to `temper-lm serve --port 0 --model <tiny fixture>` (without that --model
  // when they hold --synthetic or a --model of their own); the log goes to a file in `dir`.
  LmServeProcess(const TempDir& dir, std::vector<std::string> flags = {});
  ~LmServeProcess();
  LmServeProcess(const LmServeProcess&) = delete;
  LmServeProcess& operator=(const LmServeProcess&) = delete;

  // Starts it and waits (up to 60 s) for its "serving ... on http://HOST:PORT" line. The Status
  // carries the log when it exits or never says so.
  Status Start();
  // SIGTERM, then waits; the exit status, or 128 + signal.
  int Stop();
  bool Alive();

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string Log() const;

 private:
  const TempDir& dir_;
  std::vector<std::string> flags_;
  std::string log_path_;
  pid_t pid_ = -1;
  int port_ = 0;
};

// Sends all of `bytes` (false when the peer is gone).
bool SendAll(int fd, const std::string& bytes);
// Reads until the peer closes, a whole HTTP response (head + Content-Length body) has arrived, or
// `timeout` passes; returns what arrived.
std::string ReadResponse(int fd, std::chrono::milliseconds timeout);
// Reads until what arrived contains `needle`, the peer closes, or `timeout` passes.
std::string ReadUntil(int fd, const std::string& needle, std::chrono::milliseconds timeout);
// The status code of a raw HTTP response ("HTTP/1.1 413 ..." -> 413), 0 when there is none.
int StatusOf(const std::string& response);
// The body of a raw HTTP response (after the blank line).
std::string BodyOf(const std::string& response);

}  // namespace temper::testing
