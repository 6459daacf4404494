// TEMPER_DCHECK as a debug build has it, whatever this build is: NDEBUG is dropped before the
// header (dcheck_release_test.cpp checks the release form).
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include <catch2/catch.hpp>

#undef NDEBUG
#include "common/dcheck.h"

namespace temper {
namespace {

void Holds(int x) { TEMPER_DCHECK(x > 0, "x is positive"); }

TEST_CASE("a debug TEMPER_DCHECK that holds does nothing") { Holds(1); }

TEST_CASE("a debug TEMPER_DCHECK that fails names the place, the condition and the invariant, then aborts") {
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const struct rlimit no_core = {0, 0};  // the abort is the expected outcome: no core file left behind
    ::setrlimit(RLIMIT_CORE, &no_core);
    ::dup2(pipe_fds[1], STDERR_FILENO);
    Holds(0);
    ::_exit(0);  // not reached when the check works
  }
  ::close(pipe_fds[1]);
  std::string err;
  char buf[512];
  for (ssize_t n; (n = ::read(pipe_fds[0], buf, sizeof buf)) > 0;) err.append(buf, static_cast<size_t>(n));
  ::close(pipe_fds[0]);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGABRT);
  CHECK_THAT(err, Catch::Contains("dcheck_test.cpp:"));
  CHECK_THAT(err, Catch::Contains("Holds"));
  CHECK_THAT(err, Catch::Contains("TEMPER_DCHECK(x > 0) failed: x is positive"));
}

}  // namespace
}  // namespace temper
