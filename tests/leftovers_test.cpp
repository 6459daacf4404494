// What a test process leaves behind (leftovers.h, scratch_space.h): found, removed with its mounts,
// and failing the process that left it; and the sweep and check ctest runs around every suite.
#include "leftovers.h"

#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "scratch_space.h"
#include "self_run.h"
#include "skip.h"

namespace temper::testing {
namespace {

namespace fs = std::filesystem;
using Catch::Contains;

bool MountedAtOrBelow(const std::string& dir) { return !FindLeftovers(dir).mounts.empty(); }

void MountTmpfs(const std::string& at) {
  fs::create_directories(at);
  REQUIRE(::mount("tmpfs", at.c_str(), "tmpfs", 0, "size=1m") == 0);
}

// The directories of the process whose leftovers `out` names (the path holds its pid).
std::vector<std::string> ProcessDirsNamedIn(const std::string& out) {
  std::smatch m;
  REQUIRE(std::regex_search(out, m, std::regex(TestTempRoot() + "/([0-9]+)/")));
  return {TestScratchRoot() + "/" + m[1].str(), TestTempRoot() + "/" + m[1].str()};
}

TEST_CASE("leftovers probe: forgets a file", "[.leftovers_probe]") {
  std::ofstream(TestTempDir() + "/forgotten") << "x";
}

TEST_CASE("leftovers probe: forgets a mount", "[.leftovers_probe]") {
  MountTmpfs(TestScratchDir() + "/target/merged");
  std::ofstream(TestScratchDir() + "/target/merged/file") << "x";
  std::ofstream(TestTempDir() + "/marker") << "x";  // names the process's directories in the report
}

TEST_CASE("leftovers probe: cleans up", "[.leftovers_probe]") {
  const std::string dir = TestScratchDir() + "/tree";
  fs::create_directories(dir + "/a");
  std::ofstream(dir + "/a/file") << "x";
  fs::remove_all(dir);
}

TEST_CASE("a file a test process leaves fails it, named, and is removed", "[leftovers]") {
  const SelfRun run = RunSelf("leftovers probe: forgets a file");
  INFO(run.out);
  CHECK(run.status == 1);
  CHECK_THAT(run.out, Contains("left behind by this test process (now removed): ") && Contains("/forgotten"));
  for (const std::string& dir : ProcessDirsNamedIn(run.out)) CHECK_FALSE(fs::exists(dir));
}

TEST_CASE("a mount a test process leaves fails it, and is detached before its tree is removed", "[leftovers]") {
  if (::geteuid() != 0) TEMPER_SKIP("mounting needs root");
  const SelfRun run = RunSelf("leftovers probe: forgets a mount");
  INFO(run.out);
  CHECK(run.status == 1);
  CHECK_THAT(run.out, Contains("mount " + TestScratchRoot() + "/") && Contains("/target/merged; "));
  for (const std::string& dir : ProcessDirsNamedIn(run.out)) {
    CHECK_FALSE(MountedAtOrBelow(dir));
    CHECK_FALSE(fs::exists(dir));
  }
}

TEST_CASE("a test process that cleans up passes and takes its directories with it", "[leftovers]") {
  const SelfRun run = RunSelf("leftovers probe: cleans up");
  INFO(run.out);
  CHECK(run.status == 0);
  CHECK_THAT(run.out, !Contains("left behind"));
}

TEST_CASE("RemoveWithMounts detaches nested mounts deepest first, then removes the tree", "[leftovers]") {
  if (::geteuid() != 0) TEMPER_SKIP("mounting needs root");
  const std::string dir = TestTempDir() + "/nested";
  MountTmpfs(dir + "/outer");
  MountTmpfs(dir + "/outer/inner");
  std::ofstream(dir + "/outer/inner/file") << "x";
  std::ofstream(dir + "/beside") << "x";
  const Leftovers found = FindLeftovers(dir);
  CHECK(found.mounts == std::vector<std::string>{dir + "/outer/inner", dir + "/outer"});
  CHECK(found.entries == std::vector<std::string>{dir + "/beside", dir + "/outer"});  // not into mounts
  CHECK(found.ToString() ==
        "mount " + dir + "/outer/inner; mount " + dir + "/outer; " + dir + "/beside; " + dir + "/outer");
  REQUIRE(RemoveWithMounts(dir).ok());
  CHECK_FALSE(MountedAtOrBelow(dir));
  CHECK_FALSE(fs::exists(dir));
  CHECK(RemoveWithMounts(dir).ok());  // nothing there: nothing to do
  CHECK(FindLeftovers(dir).empty());
}

TEST_CASE("DeadProcessDirs names the directories of processes that ended, and of none", "[leftovers]") {
  const std::string root = TestTempDir() + "/root";
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  REQUIRE(child > 0);
  REQUIRE(::waitpid(child, nullptr, 0) == child);  // reaped: its pid runs nothing now
  for (const std::string& name : {std::to_string(::getpid()), std::to_string(child), std::string("stray")}) {
    fs::create_directories(root + "/" + name);
  }
  CHECK(DeadProcessDirs(root) == std::vector<std::string>{root + "/" + std::to_string(child), root + "/stray"});
  CHECK(DeadProcessDirs(root + "/missing").empty());
  fs::remove_all(root);
}

// The dead processes' directories in both roots, each removed; what each held.
std::vector<std::string> SweepDeadProcessDirs() {
  std::vector<std::string> swept;
  for (const std::string& root : {TestScratchRoot(), TestTempRoot()}) {
    for (const std::string& dir : DeadProcessDirs(root)) {
      const Leftovers left = FindLeftovers(dir);
      swept.push_back(dir + (left.empty() ? " (empty)" : ": " + left.ToString()));
      const Status removed = RemoveWithMounts(dir);
      INFO(removed.ToString());
      CHECK(removed.ok());
    }
  }
  return swept;
}

// Hidden: ctest runs them around every suite (tests/CMakeLists.txt).
TEST_CASE("Remove what test processes of an earlier run left", "[.leftovers_sweep]") {
  for (const std::string& swept : SweepDeadProcessDirs()) WARN("removed what a dead test process left: " << swept);
}

TEST_CASE("Nothing was left behind by a test process", "[.leftovers_check]") {
  for (const std::string& swept : SweepDeadProcessDirs()) {
    FAIL_CHECK("a test process died and left (now removed): " << swept);
  }
}

}  // namespace
}  // namespace temper::testing
