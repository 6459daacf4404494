// `promtool check metrics`, Prometheus's own linter of /metrics bodies (Debian's prometheus package),
// as an operator runs it: the body on its standard input. It fails a body whose names break
// Prometheus's conventions (a counter without _total, _total on a gauge, a unit abbreviated or not a
// base unit, HELP missing) as well as one it cannot parse.
//
// A case calls TEMPER_REQUIRE_PROMTOOL() first: without promtool it reports itself skipped.
#pragma once

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

#include "skip.h"

namespace temper::testing {

inline constexpr const char* kPromtool = "/usr/bin/promtool";

struct PromtoolResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together: one line per problem
};

inline PromtoolResult PromtoolCheckMetrics(const std::string& body) {
  // Through a file rather than a pipe of ours: promtool reads all its input before it writes, and a
  // file needs no second thread to feed it. TMPDIR is the test process's own directory (scratch_space.h).
  const std::filesystem::path input =
      std::filesystem::temp_directory_path() / ("metrics-" + std::to_string(getpid()) + ".txt");
  std::ofstream(input, std::ios::binary) << body;
  PromtoolResult r;
  const std::string command = std::string(kPromtool) + " check metrics < '" + input.string() + "' 2>&1";
  if (FILE* out = popen(command.c_str(), "r")) {
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, out)) > 0;) r.output.append(buf, n);
    const int status = pclose(out);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  std::filesystem::remove(input);
  return r;
}

}  // namespace temper::testing

#define TEMPER_REQUIRE_PROMTOOL()                                                                    \
  do {                                                                                               \
    if (!std::filesystem::exists(::temper::testing::kPromtool))                                      \
      TEMPER_SKIP(std::string(::temper::testing::kPromtool) + " is missing (Debian's prometheus package)"); \
  } while (0)
