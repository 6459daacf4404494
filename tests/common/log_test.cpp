#include "common/log.h"

#include <unistd.h>

#include <string>

#include <catch2/catch.hpp>

namespace temper {
namespace {

// Captures what a Logger writes through a pipe.
std::string Capture(Logger::Style style, LogLevel min, void (*emit)(const Logger&)) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  {
    Logger log(min, style, fds[1]);
    emit(log);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  return out;
}

TEST_CASE("journald style prefixes each line with its syslog priority") {
  std::string out = Capture(Logger::Style::kJournald, LogLevel::kDebug, [](const Logger& l) {
    l.Error("disk {} full", "/var");
    l.Warning("slow");
    l.Info("ready");
    l.Debug("detail");
  });
  CHECK(out == "<3>disk /var full\n<4>slow\n<6>ready\n<7>detail\n");
}

TEST_CASE("lines below the minimum level are dropped") {
  std::string out = Capture(Logger::Style::kPlain, LogLevel::kWarning, [](const Logger& l) {
    l.Info("hidden");
    l.Error("shown");
  });
  CHECK(out.find("hidden") == std::string::npos);
  CHECK(out.find("error   shown\n") != std::string::npos);
}

TEST_CASE("log levels parse by name and unknown names are named in the error") {
  CHECK(*ParseLogLevel("warn") == LogLevel::kWarning);
  auto bad = ParseLogLevel("loud");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("'loud'") != std::string::npos);
}

}  // namespace
}  // namespace temper
