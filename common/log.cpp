#include "common/log.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>

namespace temper {

Result<LogLevel> ParseLogLevel(std::string_view name) {
  if (name == "debug") return LogLevel::kDebug;
  if (name == "info") return LogLevel::kInfo;
  if (name == "warning" || name == "warn") return LogLevel::kWarning;
  if (name == "error") return LogLevel::kError;
  return Status::InvalidArgument(fmt::format("unknown log level '{}' (expected debug, info, warning or error)", name));
}

std::string_view LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
  }
  return "unknown";
}

namespace {

// sd-daemon(3) priorities: LOG_ERR 3, LOG_WARNING 4, LOG_INFO 6, LOG_DEBUG 7.
int SyslogPriority(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return 7;
    case LogLevel::kInfo:
      return 6;
    case LogLevel::kWarning:
      return 4;
    case LogLevel::kError:
      return 3;
  }
  return 6;
}

}  // namespace

Logger::Logger(LogLevel min_level, Style style, int fd)
    : min_level_(min_level),
      journald_(style == Style::kJournald || (style == Style::kAuto && std::getenv("JOURNAL_STREAM") != nullptr)),
      fd_(fd) {}

void Logger::Write(LogLevel level, std::string_view message) const {
  if (!Enabled(level)) return;
  std::string line;
  if (journald_) {
    // journald adds its own timestamp.
    line = fmt::format("<{}>{}\n", SyslogPriority(level), message);
  } else {
    auto now = std::chrono::system_clock::now();
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
    std::time_t secs = static_cast<std::time_t>(ms / 1000);
    std::tm tm{};
    gmtime_r(&secs, &tm);
    line = fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z {:<7} {}\n", tm.tm_year + 1900, tm.tm_mon + 1,
                       tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms % 1000, LogLevelName(level), message);
  }
  // One write per line keeps lines whole across threads; a short write to stderr is not retried.
  ssize_t ignored = ::write(fd_, line.data(), line.size());
  (void)ignored;
}

}  // namespace temper
