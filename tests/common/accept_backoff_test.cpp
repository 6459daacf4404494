#include "common/accept_backoff.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace temper {
namespace {

// A logger writing into a temporary file, and what it wrote.
struct CapturedLog {
  std::FILE* file = std::tmpfile();
  Logger log{LogLevel::kInfo, Logger::Style::kPlain, fileno(file)};
  ~CapturedLog() { std::fclose(file); }
  std::string Text() {
    std::string out;
    std::rewind(file);
    for (int c; (c = std::fgetc(file)) != EOF;) out.push_back(static_cast<char>(c));
    return out;
  }
};

TEST_CASE("accept backoff: errors of one connection take the next, an empty backlog waits") {
  CapturedLog captured;
  AcceptBackoff b("test socket", captured.log);
  CHECK(b.OnError(ECONNABORTED) == AcceptBackoff::Action::kNext);
  CHECK(b.OnError(EPROTO) == AcceptBackoff::Action::kNext);
  CHECK(b.OnError(EAGAIN) == AcceptBackoff::Action::kWait);
  CHECK(b.OnError(EINTR) == AcceptBackoff::Action::kWait);
  CHECK(captured.Text().empty());
}

TEST_CASE("accept backoff: out of descriptors pauses, doubling to a second, logged once per spell") {
  CapturedLog captured;
  AcceptBackoff b("test socket", captured.log);
  std::vector<int64_t> pauses;
  for (int i = 0; i < 8; ++i) {
    REQUIRE(b.OnError(i % 2 ? ENFILE : EMFILE) == AcceptBackoff::Action::kPause);
    pauses.push_back(b.pause().count());
  }
  CHECK(pauses == std::vector<int64_t>{50, 100, 200, 400, 800, 1000, 1000, 1000});
  b.OnAccepted();
  b.OnAccepted();
  std::string text = captured.Text();
  CHECK(std::count(text.begin(), text.end(), '\n') == 2);
  CHECK_THAT(text, Catch::Contains("test socket: cannot accept connections (Too many open files)"));
  CHECK_THAT(text, Catch::Contains("test socket: accepting connections again after") && Catch::Contains("(8 pauses)"));
  REQUIRE(b.OnError(ENOBUFS) == AcceptBackoff::Action::kPause);  // a new spell starts short again
  CHECK(b.pause().count() == 50);
}

TEST_CASE("accept backoff: a broken listening socket stops accepting, logged as an error") {
  CapturedLog captured;
  AcceptBackoff b("test socket", captured.log);
  CHECK(b.OnError(EBADF) == AcceptBackoff::Action::kStop);
  CHECK_THAT(captured.Text(), Catch::Contains("no longer accepting connections"));
}

}  // namespace
}  // namespace temper
