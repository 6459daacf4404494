#include "platform/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <set>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>

#include "platform/unique_fd.h"
#include "scratch_space.h"
#include "skip.h"

namespace temper {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

TEST_CASE("RunProcess captures output, stdin and exit codes", "[stig][process]") {
  ProcessSpec spec;
  spec.argv = {"/bin/sh", "-c", "cat; echo err >&2; exit 3"};
  spec.stdin_data = "hello";
  auto r = RunProcess(spec);
  REQUIRE(r.ok());
  CHECK(r->out == "hello");
  CHECK(r->err == "err\n");
  CHECK(r->exit_code == 3);
  CHECK_FALSE(r->Succeeded());
  CHECK(r->Describe() == "exit 3");
}

TEST_CASE("RunProcess: a child that exits before reading its stdin is stdin_cut_short, not a SIGPIPE",
          "[stig][process]") {
  // This test process keeps SIGPIPE's default action (terminate): a raised SIGPIPE would end it.
  struct sigaction current {};
  REQUIRE(sigaction(SIGPIPE, nullptr, &current) == 0);
  REQUIRE(current.sa_handler == SIG_DFL);
  ProcessSpec spec;
  spec.argv = {"/bin/sh", "-c", "exec 0<&-; echo gone"};
  spec.stdin_data = std::string(4 << 20, 'x');  // far more than a pipe holds
  auto r = RunProcess(spec);
  REQUIRE(r.ok());
  CHECK(r->Succeeded());
  CHECK(r->out == "gone\n");
  CHECK(r->stdin_cut_short);
  sigset_t pending;
  sigpending(&pending);
  CHECK_FALSE(sigismember(&pending, SIGPIPE));  // taken back, not left for a later unblock

  spec.argv = {"/bin/cat"};
  spec.stdin_data = "all of it";
  r = RunProcess(spec);
  REQUIRE(r.ok());
  CHECK(r->out == "all of it");
  CHECK_FALSE(r->stdin_cut_short);
}

TEST_CASE("RunProcess enforces the timeout and output cap", "[stig][process]") {
  ProcessSpec spec;
  spec.argv = {"/bin/sh", "-c", "head -c 100000 /dev/zero; sleep 30"};
  spec.timeout = std::chrono::milliseconds(500);
  spec.max_output_bytes = 1000;
  auto r = RunProcess(spec);
  REQUIRE(r.ok());
  CHECK(r->timed_out);
  CHECK(r->seconds < 10);
  CHECK(r->out.size() == 1000);
  CHECK(r->out_truncated);
}

TEST_CASE("RunProcess holds the timeout and stop_when after a child closes its output", "[stig][process]") {
  ProcessSpec spec;
  spec.argv = {"/bin/sh", "-c", "exec >/dev/null 2>&1; sleep 30"};
  spec.timeout = std::chrono::seconds(1);
  auto timed = RunProcess(spec);
  REQUIRE(timed.ok());
  CHECK(timed->timed_out);
  CHECK(timed->seconds < 5);

  spec.timeout = std::chrono::seconds(60);
  auto start = std::chrono::steady_clock::now();
  int asked = 0;
  spec.stop_when = [&] {
    ++asked;
    return std::chrono::steady_clock::now() - start > std::chrono::milliseconds(300);
  };
  auto stopped = RunProcess(spec);
  REQUIRE(stopped.ok());
  CHECK(stopped->stopped);
  CHECK_FALSE(stopped->timed_out);
  CHECK_FALSE(stopped->Succeeded());
  CHECK(stopped->seconds < 5);
  CHECK_THAT(stopped->Describe(), Catch::StartsWith("stopped after"));

  // A chatty child does not make the runner ask more often than every stop_poll.
  spec.argv = {"/bin/sh", "-c", "yes | head -c 50000000 > /dev/stderr"};
  spec.max_output_bytes = 16;
  asked = 0;
  start = std::chrono::steady_clock::now();
  spec.stop_when = [&] {
    ++asked;
    return false;
  };
  auto chatty = RunProcess(spec);
  REQUIRE(chatty.ok());
  CHECK(chatty->Succeeded());
  CHECK(asked <= 2 + static_cast<int>(chatty->seconds * 1000 / 100) * 2);
}

TEST_CASE("a child gets the OOM score asked for, and never a shielded parent's", "[stig][process]") {
  ProcessSpec spec;
  spec.argv = {"/bin/cat", "/proc/self/oom_score_adj"};
  spec.oom_score_adj = 500;
  auto r = RunProcess(spec);
  REQUIRE(r.ok());
  CHECK(r->out == "500\n");
  spec.oom_score_adj.reset();
  r = RunProcess(spec);
  REQUIRE(r.ok());
  CHECK(r->out == "0\n");
}

TEST_CASE("RunProcess enforces the memory limit", "[stig][process]") {
  ProcessSpec spec;
  // dd allocates its 512 MiB block up front, which a 64 MiB address-space limit refuses.
  spec.argv = {"/bin/dd", "if=/dev/zero", "of=/dev/null", "bs=512M", "count=1"};
  spec.memory_limit_bytes = 64 << 20;
  auto r = RunProcess(spec);
  REQUIRE(r.ok());
  CHECK_FALSE(r->Succeeded());
}

TEST_CASE("RunProcess names a program that cannot start", "[stig][process]") {
  ProcessSpec spec;
  spec.argv = {"/nonexistent/program"};
  auto r = RunProcess(spec);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("/nonexistent/program") != std::string::npos);
  CHECK_FALSE(RunProcess(ProcessSpec{}).ok());
}

TEST_CASE("a child inherits only stdio, not descriptors the daemon opened without O_CLOEXEC", "[stig][process]") {
  // What iostreams do: a descriptor that would otherwise cross fork+exec and pin its mount.
  // Numbered high, so the directory ls opens to list them cannot take its number.
  int opened = ::open("/proc/self/status", O_RDONLY);
  REQUIRE(opened > 2);
  int leaky = ::dup2(opened, 100);
  ::close(opened);
  REQUIRE(leaky == 100);
  ProcessSpec spec;
  spec.argv = {"/bin/sh", "-c", "ls /proc/self/fd"};
  auto r = RunProcess(spec);
  ::close(leaky);
  REQUIRE(r.ok());
  REQUIRE(r->Succeeded());
  std::set<std::string> fds;
  std::istringstream lines(r->out);
  for (std::string fd; std::getline(lines, fd);) fds.insert(fd);
  // 0-2, and the directory ls itself has open to list.
  CHECK(fds.size() == 4);
  CHECK(fds.count(std::to_string(leaky)) == 0);
}

TEST_CASE("RunProcess can start a child in an identity-mapped user namespace", "[stig][process]") {
  if (::geteuid() != 0) TEMPER_SKIP("needs root to map the full id range");
  ProcessSpec spec;
  spec.argv = {"/bin/sh", "-c", "cat /proc/self/uid_map; readlink /proc/self/ns/user"};
  spec.new_user_namespace = true;
  auto r = RunProcess(spec);
  REQUIRE(r.ok());
  REQUIRE(r->Succeeded());
  CHECK(r->out.find("65536") != std::string::npos);
  char own[64] = {};
  REQUIRE(::readlink("/proc/self/ns/user", own, sizeof own - 1) > 0);
  CHECK(r->out.find(own) == std::string::npos);  // a different namespace from ours
}

TEST_CASE("RunProcess passes inherit_fds across exec at their numbers, and no other descriptor", "[stig][process]") {
  int kept[2], other[2];
  REQUIRE(::pipe2(kept, O_CLOEXEC) == 0);
  REQUIRE(::pipe2(other, O_CLOEXEC) == 0);
  REQUIRE(::write(kept[1], "passed", 6) == 6);
  ::close(kept[1]);
  ProcessSpec spec;
  spec.argv = {"/bin/sh", "-c",
               "cat <&" + std::to_string(kept[0]) + "; [ -e /proc/self/fd/" + std::to_string(other[0]) +
                   " ] && echo leaked || echo closed"};
  spec.inherit_fds = {kept[0]};
  auto r = RunProcess(spec);
  // Only the child cleared the close-on-exec flag; this process's descriptor keeps it.
  CHECK((::fcntl(kept[0], F_GETFD) & FD_CLOEXEC) != 0);
  ::close(kept[0]);
  ::close(other[0]);
  ::close(other[1]);
  REQUIRE(r.ok());
  CHECK(r->out == "passedclosed\n");
}

TEST_CASE("RunProcess with reap_orphans: orphans are reaped before it returns, and the program's end is kept",
          "[stig][process]") {
  ProcessSpec spec;
  spec.reap_orphans = true;
  // The shell leaves a child behind; it is the reaper's to reap, not the host init's.
  spec.argv = {"/bin/sh", "-c", "sleep 0.3 >/dev/null 2>&1 & echo $!"};
  auto orphaned = RunProcess(spec);
  REQUIRE(orphaned.ok());
  REQUIRE(orphaned->Succeeded());
  const pid_t orphan = static_cast<pid_t>(std::stol(orphaned->out));
  errno = 0;
  CHECK(::kill(orphan, 0) == -1);  // gone, not a zombie waiting for its reaper
  CHECK(errno == ESRCH);

  spec.argv = {"/bin/sh", "-c", "echo out; echo err >&2; exit 3"};
  auto exited = RunProcess(spec);
  REQUIRE(exited.ok());
  CHECK(exited->exit_code == 3);
  CHECK(exited->out == "out\n");
  CHECK(exited->err == "err\n");

  spec.argv = {"/bin/sh", "-c", "kill -TERM $$"};
  auto killed = RunProcess(spec);
  REQUIRE(killed.ok());
  CHECK(killed->term_signal == SIGTERM);

  spec.argv = {"/nonexistent/program"};
  auto missing = RunProcess(spec);
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.status().message(), Catch::Contains("/nonexistent/program"));

  spec.argv = {"/bin/true"};
  auto started = StartProcess(spec, 0);
  CHECK(started.status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("RunProcess with reap_orphans: the reaper holds no descriptor of this process's other threads",
          "[stig][process]") {
  // Another command's output pipe, open (close-on-exec, as all of ours are) while this command's
  // reaper forks. The reaper never execs: holding the write end, it kept the other command's
  // RunProcess from seeing EOF until this command ended (parallel attempts waited on each other).
  int ends[2];
  REQUIRE(::pipe2(ends, O_CLOEXEC) == 0);
  UniqueFd read_end(ends[0]), write_end(ends[1]);
  testing::ScratchPath scratch("reaper-fds");
  const fs::path dir = scratch.path();
  fs::create_directories(dir);
  std::ofstream(dir / "hold") << "\n";
  ProcessSpec spec;
  spec.reap_orphans = true;
  spec.cwd = dir.string();
  spec.argv = {"/bin/sh", "-c", "touch started; while [ -e hold ]; do sleep 0.05; done"};
  auto running = std::async(std::launch::async, [&spec] { return RunProcess(spec); });
  while (!fs::exists(dir / "started") && running.wait_for(20ms) != std::future_status::ready) {
  }
  write_end.Reset();
  pollfd p{read_end.get(), POLLIN, 0};
  // EOF at once; with a leaked copy, nothing until the command ends (it waits for `hold`).
  const int ready = ::poll(&p, 1, 10000);
  fs::remove(dir / "hold");
  auto ended = running.get();
  REQUIRE(ended.ok());
  CHECK(ended->Succeeded());
  CHECK(ready == 1);
  CHECK((p.revents & POLLHUP) != 0);
}

}  // namespace
}  // namespace temper
