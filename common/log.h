// Logger: leveled log lines to stderr, one write(2) per line so concurrent threads never interleave.
//
// Under systemd (JOURNAL_STREAM set, or forced with Style::kJournald) each line starts with the
// sd-daemon priority prefix ("<3>" for errors) so journald records the level; elsewhere lines carry
// a timestamp and the level name. There is no global logger: the daemon builds one and hands it by
// reference to the components that log. Thread-safe.
#pragma once

#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "common/status.h"

namespace temper {

enum class LogLevel { kDebug = 0, kInfo, kWarning, kError };

// Parses "debug", "info", "warning" (or "warn") and "error".
Result<LogLevel> ParseLogLevel(std::string_view name);
std::string_view LogLevelName(LogLevel level);

class Logger {
 public:
  enum class Style { kAuto, kPlain, kJournald };

  // Writes to `fd` (stderr by default). kAuto picks kJournald when JOURNAL_STREAM is set.
  explicit Logger(LogLevel min_level = LogLevel::kInfo, Style style = Style::kAuto, int fd = 2);
  Logger(const Logger&) = delete;
  Logger& operator=(const Logger&) = delete;

  bool Enabled(LogLevel level) const { return level >= min_level_; }
  void Write(LogLevel level, std::string_view message) const;

  template <typename... Args>
  void Debug(fmt::format_string<Args...> f, Args&&... args) const {
    Emit(LogLevel::kDebug, f, std::forward<Args>(args)...);
  }
  template <typename... Args>
  void Info(fmt::format_string<Args...> f, Args&&... args) const {
    Emit(LogLevel::kInfo, f, std::forward<Args>(args)...);
  }
  template <typename... Args>
  void Warning(fmt::format_string<Args...> f, Args&&... args) const {
    Emit(LogLevel::kWarning, f, std::forward<Args>(args)...);
  }
  template <typename... Args>
  void Error(fmt::format_string<Args...> f, Args&&... args) const {
    Emit(LogLevel::kError, f, std::forward<Args>(args)...);
  }

 private:
  template <typename... Args>
  void Emit(LogLevel level, fmt::format_string<Args...> f, Args&&... args) const {
    if (Enabled(level)) Write(level, fmt::format(f, std::forward<Args>(args)...));
  }

  const LogLevel min_level_;
  const bool journald_;
  const int fd_;
};

}  // namespace temper
