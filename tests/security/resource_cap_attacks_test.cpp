// Attacks on the host's resources from a rootfs target's sandbox (issue 20, part B): a fork bomb, a
// memory hog and a disk fill, each run as a Worker's command through the real TargetTools over a
// real RootfsTarget with the default caps; and the OOM killer's choice between temperd and its
// children. Each cap must end the command with a named error while the host (this test process)
// stays able to fork and write, and the next command on the target must run.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include <catch2/catch.hpp>

#include "orchestrator/loop/target_tools.h"
#include "platform/process.h"
#include "security/security_b_support.h"
#include "skip.h"
#include "stig/rootfs_fixture.h"

namespace temper {
namespace {

using security::FreeBytes;
using stig::testing::ScopedTarget;
using namespace std::chrono_literals;

constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;
// The defaults of temperd.yaml's sandbox caps (README, "sandbox:").
constexpr std::uint64_t kDefaultDiskCap = 8 * kGiB;

void ExpectNextCommandRuns(TargetTools& tools) {
  auto next = tools.RunCommand("echo alive", 30s);
  REQUIRE(next.ok());
  CHECK(next->exit_status == 0);
  CHECK(next->output == "alive\n");
}

TEST_CASE("a fork bomb in the sandbox hits the pids cap: the host can still fork, the next command runs") {
  ScopedTarget target("fork-bomb");
  TargetTools tools(*target, [] { return false; });
  std::atomic<bool> bombing{true};
  std::atomic<int> host_forks{0}, host_fork_failures{0};
  // The host side: this process keeps starting children while the bomb goes off.
  std::thread host([&] {
    std::this_thread::sleep_for(1s);
    while (bombing) {
      temper::ProcessSpec spec;
      spec.argv = {"/bin/true"};
      spec.timeout = 5s;
      auto r = temper::RunProcess(spec);
      (r.ok() && r->Succeeded() ? host_forks : host_fork_failures)++;
      std::this_thread::sleep_for(100ms);
    }
  });
  auto start = security::Clock::now();
  // The shell must outlive its first fork: the sandbox (its pid namespace) ends with it.
  auto bomb = tools.RunCommand("f(){ f|f& };f; sleep 25", 30s);
  auto took = security::Clock::now() - start;
  std::this_thread::sleep_for(1500ms);  // the host keeps forking a little after the bomb too
  bombing = false;
  host.join();

  CHECK(host_fork_failures == 0);
  CHECK(host_forks > 0);
  CHECK(took < 25s);
  REQUIRE_FALSE(bomb.ok());
  CHECK(bomb.status().code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(bomb.status().message(), Catch::StartsWith("the command hit the sandbox's pids cap of 512"));
  ExpectNextCommandRuns(tools);
}

TEST_CASE("a command that closes its output and runs on is still killed at its timeout") {
  ScopedTarget target("closed-output");
  TargetTools tools(*target, [] { return false; });
  auto start = security::Clock::now();
  auto run = tools.RunCommand("exec >/dev/null 2>&1; sleep 600", 2s);
  CHECK(security::Clock::now() - start < 10s);
  REQUIRE(run.ok());
  CHECK(run->timed_out);
  ExpectNextCommandRuns(tools);
}

TEST_CASE("a memory hog in the sandbox hits the memory cap and ends with a named error") {
  ScopedTarget target("memory-hog");
  TargetTools tools(*target, [] { return false; });
  // Several processes, so that no per-process limit can stand in for the cap on the whole command:
  // each tail holds all it reads (there is no newline), 1 GiB apiece, 3 GiB together. Each input
  // stays open a minute after its last byte, so every tail holds its 1 GiB at once. Without that,
  // under load a tail could finish and be exiting when the others reached the cap; the kernel then
  // waits for the exiting one's memory instead of killing anything (Linux's oom_kill_process() takes
  // a victim that will free its memory without a kill: an "oom" event, no "oom_kill"), and the
  // command ends well. That is the likeliest reading of the two CI runs (2026-11-26 and 27) where
  // this case failed that way; it was not reproduced here.
  auto hog =
      tools.RunCommand("for i in 1 2 3; do (head -c 1G /dev/zero; sleep 60) | tail > /dev/null & done; wait", 120s);
  REQUIRE_FALSE(hog.ok());
  CHECK(hog.status().code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(hog.status().message(), Catch::StartsWith("the command hit the sandbox's memory cap of 2 GiB"));
  ExpectNextCommandRuns(tools);
}

TEST_CASE("fallocate -l 100G in the sandbox hits the writable layer's cap, not the host's disk") {
  ScopedTarget target("disk-100g");
  TargetTools tools(*target, [] { return false; });
  const std::string host_dir = std::filesystem::path(target.dir()).parent_path().string();
  const std::uint64_t host_free_before = FreeBytes(host_dir);
  auto big = tools.RunCommand("fallocate -l 100G /big", 60s);
  REQUIRE_FALSE(big.ok());
  CHECK(big.status().code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(big.status().message(), Catch::Contains("the target's writable layer") && Catch::Contains("(cap 8 GiB)"));
  // More than the cap but less than the host has free: without a cap the host would pay for it.
  auto nine = tools.RunCommand("fallocate -l 9G /nine", 60s);
  const std::uint64_t host_free_after = FreeBytes(host_dir);
  REQUIRE_FALSE(nine.ok());
  CHECK_THAT(nine.status().message(), Catch::Contains("(cap 8 GiB)"));
  INFO("host free before " << host_free_before << ", after " << host_free_after);
  CHECK(host_free_after + kDefaultDiskCap >= host_free_before);
  ExpectNextCommandRuns(tools);
}

TEST_CASE("filling the writable layer to the last block ends with 'full', the target still reverts and runs") {
  ScopedTarget target("disk-fill");
  TargetTools tools(*target, [] { return false; });
  auto base = target->Snapshot();
  REQUIRE(base.ok());
  const std::string host_dir = std::filesystem::path(target.dir()).parent_path().string();
  const std::uint64_t host_free_before = FreeBytes(host_dir);
  // What the sandbox sees as free on "/" is what it may fill; refuse to fill a host disk.
  auto avail = tools.RunCommand("df -B1 --output=avail / | tail -1", 30s);
  REQUIRE(avail.ok());
  const std::uint64_t free_in_target = std::stoull(avail->output);
  INFO("the sandbox sees " << free_in_target << " bytes free");
  REQUIRE(free_in_target <= kDefaultDiskCap);
  auto fill =
      tools.RunCommand(fmt::format("fallocate -l {} /fill; head -c 64M /dev/zero > /more", free_in_target), 120s);
  REQUIRE_FALSE(fill.ok());
  CHECK(fill.status().code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(fill.status().message(), Catch::StartsWith("the target's writable layer is full (cap 8 GiB)"));
  Status write = tools.WriteFile("/etc/after-full", std::string(1 << 20, 'x'));
  CHECK(write.code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(write.message(), Catch::Contains("the target's writable layer is full (cap 8 GiB)"));
  CHECK(FreeBytes(host_dir) + kDefaultDiskCap >= host_free_before);
  ExpectNextCommandRuns(tools);
  // The attempt is reverted and the space comes back for the next one.
  Status reverted = target->Revert(*base);
  INFO(reverted.ToString());
  REQUIRE(reverted.ok());
  REQUIRE(tools.WriteFile("/etc/after-revert", std::string(1 << 20, 'x')).ok());
}

// This process's oom_score_adj.
int OwnOomScoreAdj() {
  std::ifstream in("/proc/self/oom_score_adj");
  int v = 0;
  in >> v;
  return v;
}

// False when the kernel refuses (lowering it takes CAP_SYS_RESOURCE, which some containers lack).
bool SetOwnOomScoreAdj(int v) {
  std::ofstream out("/proc/self/oom_score_adj");
  out << v << std::flush;
  return out.good() && OwnOomScoreAdj() == v;
}

// Each case shields this process as temperd is shielded (-900) where it can; lowering a score
// takes CAP_SYS_RESOURCE, which some containers lack.
TEST_CASE("sandboxed commands are the OOM killer's first choice, and never inherit a shielded daemon's score") {
  const int before = OwnOomScoreAdj();
  SetOwnOomScoreAdj(-900);
  ScopedTarget target("oom-child");
  auto sandboxed = target->Run("cat /proc/self/oom_score_adj", temper::SandboxLimits{});
  SetOwnOomScoreAdj(before);
  REQUIRE(sandboxed.ok());
  CHECK(sandboxed->out == "1000\n");
}

TEST_CASE("a shielded daemon's children on the host start at the default OOM score, not the daemon's") {
  const int before = OwnOomScoreAdj();
  if (!SetOwnOomScoreAdj(-900)) {
    TEMPER_SKIP(
        "this process cannot lower its oom_score_adj (no CAP_SYS_RESOURCE): the reset of a shielded "
        "parent's score in its children cannot be exercised here");
  }
  temper::ProcessSpec spec;
  spec.argv = {"/bin/cat", "/proc/self/oom_score_adj"};
  spec.timeout = 10s;
  auto child = temper::RunProcess(spec);
  SetOwnOomScoreAdj(before);
  REQUIRE(child.ok());
  CHECK(child->out == "0\n");
}

}  // namespace
}  // namespace temper
