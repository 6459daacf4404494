// Command cgroups on this host's real cgroup file systems (platform/cgroup.h): a child joins before it
// runs, the caps hold and are reported, removal kills what is left, and a tree whose owner died is
// removed by the next owner.
#include "platform/cgroup.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <catch2/catch.hpp>

#include "platform/process.h"

namespace temper {
namespace {

using namespace std::chrono_literals;

ProcessResult RunIn(CommandCgroup& cg, const std::string& script) {
  ProcessSpec spec;
  spec.argv = {"/bin/sh", "-c", script};
  spec.timeout = 60s;
  spec.join_cgroup_fds = cg.join_fds();
  auto r = RunProcess(spec);
  REQUIRE(r.ok());
  return *r;
}

bool Alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  return line.substr(line.rfind(')') + 2, 1) != "Z";
}

TEST_CASE("a command joins its own cgroup before it runs and leaves nothing behind", "[stig][cgroup]") {
  auto tree = CgroupTree::Open();
  INFO(tree.status().ToString());
  REQUIRE(tree.ok());
  INFO((*tree)->Describe());
  auto cg = (*tree)->NewCommand(SandboxCaps{});
  REQUIRE(cg.ok());
  // Every hierarchy the tree uses names the command's cgroup for the child.
  ProcessResult r = RunIn(**cg, "cat /proc/self/cgroup");
  REQUIRE(r.Succeeded());
  std::size_t named = 0;
  for (std::size_t at = r.out.find("/cmd-0\n"); at != std::string::npos; at = r.out.find("/cmd-0\n", at + 1)) ++named;
  CHECK(named >= 1);
  CHECK_FALSE((*cg)->CapHit().has_value());
  // A process left running in it is killed by Remove.
  ProcessResult bg = RunIn(**cg, "setsid sleep 300 > /dev/null 2>&1 < /dev/null & echo $!; sleep 0.5");
  REQUIRE(bg.Succeeded());
  const pid_t left = static_cast<pid_t>(std::stol(bg.out));
  CHECK(Alive(left));
  REQUIRE((*cg)->Remove().ok());
  for (int i = 0; i < 100 && Alive(left); ++i) std::this_thread::sleep_for(10ms);
  CHECK_FALSE(Alive(left));
}

TEST_CASE("the pids and memory caps hold and each is reported as the one hit", "[stig][cgroup]") {
  auto tree = CgroupTree::Open();
  REQUIRE(tree.ok());
  SandboxCaps pids;
  pids.pids = 16;
  auto forks = (*tree)->NewCommand(pids);
  REQUIRE(forks.ok());
  ProcessResult r = RunIn(**forks, "for i in $(seq 40); do sleep 5 & done 2>/dev/null; true");
  CHECK((*forks)->CapHit() == CapKind::kPids);

  SandboxCaps memory;
  memory.memory_bytes = 64 << 20;
  auto hog = (*tree)->NewCommand(memory);
  REQUIRE(hog.ok());
  r = RunIn(**hog, "head -c 256M /dev/zero | tail > /dev/null");
  CHECK_FALSE(r.Succeeded());
  CHECK((*hog)->CapHit() == CapKind::kMemory);
}

TEST_CASE("a tree whose owner died is removed, with what still runs in it, by the next owner", "[stig][cgroup]") {
  int ready[2];
  REQUIRE(::pipe2(ready, O_CLOEXEC) == 0);  // at EOF the owner is gone; the sleeper keeps no end
  pid_t owner = ::fork();
  REQUIRE(owner >= 0);
  if (owner == 0) {
    // The owner: a tree, a command cgroup with a sleeper in it, then it dies (as temperd under kill -9).
    ::close(ready[0]);
    auto tree = CgroupTree::Open();
    if (!tree.ok()) ::_exit(1);
    auto cg = (*tree)->NewCommand(SandboxCaps{});
    if (!cg.ok()) ::_exit(2);
    pid_t sleeper = ::fork();
    if (sleeper == 0) {
      for (int fd : (*cg)->join_fds()) (void)!::write(fd, "0", 1);
      int null = ::open("/dev/null", O_RDWR);
      ::dup2(null, 0);
      ::dup2(null, 1);
      ::dup2(null, 2);
      ::setsid();
      ::execl("/bin/sleep", "sleep", "300", nullptr);
      ::_exit(127);
    }
    std::string report = std::to_string(sleeper) + "\n" + (*tree)->Describe() + "\n";
    (void)!::write(ready[1], report.data(), report.size());
    ::_exit(0);  // no destructors: the tree stays as a killed daemon leaves it
  }
  ::close(ready[1]);
  std::string report;
  char buf[4096];
  for (ssize_t n; (n = ::read(ready[0], buf, sizeof buf)) > 0;) report.append(buf, static_cast<std::size_t>(n));
  ::close(ready[0]);
  int status = 0;
  ::waitpid(owner, &status, 0);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  std::istringstream lines(report);
  std::string sleeper_line, where;
  std::getline(lines, sleeper_line);
  std::getline(lines, where);
  const pid_t sleeper = static_cast<pid_t>(std::stol(sleeper_line));
  // "cgroup vN (...) at DIR, DIR": the tree's directories.
  std::vector<std::string> dirs;
  std::istringstream at(where.substr(where.find(" at ") + 4));
  for (std::string d; std::getline(at, d, ',');) dirs.push_back(d.substr(d.find_first_not_of(' ')));
  REQUIRE_FALSE(dirs.empty());
  for (const std::string& d : dirs) CHECK(std::filesystem::exists(d));
  const bool was_alive = Alive(sleeper);

  auto next = CgroupTree::Open();
  for (int i = 0; i < 100 && Alive(sleeper); ++i) std::this_thread::sleep_for(10ms);
  const bool survived = Alive(sleeper);
  if (survived) ::kill(sleeper, SIGKILL);  // whatever the outcome, the test leaves no process
  REQUIRE(next.ok());
  CHECK(was_alive);
  CHECK_FALSE(survived);
  for (const std::string& d : dirs) CHECK_FALSE(std::filesystem::exists(d));
}

}  // namespace
}  // namespace temper
