// Runs a case of this very test binary in a process of its own, as ctest runs each case, for the
// tests of what the shared main does at a process's end (skip_test.cpp, leftovers_test.cpp).
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include <catch2/catch.hpp>

namespace temper::testing {

struct SelfRun {
  int status = -1;  // the exit status, or 128 + the signal
  std::string out;  // stdout and stderr
};

// `spec` is a Catch test spec (case names, commas between them); it must hold no single quote.
inline SelfRun RunSelf(const std::string& spec) {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  FILE* pipe = ::popen(("'" + self + "' '" + spec + "' 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  SelfRun run;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) run.out.append(buf, n);
  const int status = ::pclose(pipe);
  run.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  INFO(spec << " printed:\n" << run.out);
  return run;
}

}  // namespace temper::testing
