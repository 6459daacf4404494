// The Worker's tools over a real rootfs target: what the model sees of commands, files and scripts.
#include "orchestrator/loop/target_tools.h"

#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <atomic>

#include "stig/rootfs_fixture.h"

namespace temper {
namespace {

using stig::testing::ScopedTarget;

TEST_CASE("target tools run commands, read and write files in the target, and stop once cancelled") {
  ScopedTarget target("tools");
  std::atomic<bool> cancelled{false};
  TargetTools tools(*target, [&] { return cancelled.load(); });

  auto run = tools.RunCommand("echo out; echo err >&2; exit 3", std::chrono::seconds(30));
  REQUIRE(run.ok());
  CHECK(run->exit_status == 3);
  CHECK(run->output == "out\nerr\n");
  CHECK_FALSE(run->timed_out);
  auto killed = tools.RunCommand("kill -9 $$", std::chrono::seconds(30));
  REQUIRE(killed.ok());
  CHECK(killed->exit_status == 128 + 9);
  auto slow = tools.RunCommand("sleep 30", std::chrono::seconds(1));
  REQUIRE(slow.ok());
  CHECK(slow->timed_out);

  // A script the model writes can be run next; plain files are not executable.
  REQUIRE(tools.WriteFile("/root/fix.sh", "#!/bin/sh\necho fixed > /etc/temper-note\n").ok());
  REQUIRE(tools.WriteFile("/etc/issue.net", "Authorized use only\n").ok());
  struct stat st {};
  REQUIRE(::stat((target->root() + "/root/fix.sh").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0755);
  REQUIRE(::stat((target->root() + "/etc/issue.net").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0644);
  REQUIRE(tools.RunCommand("/root/fix.sh", std::chrono::seconds(30))->exit_status == 0);
  CHECK(*tools.ReadFile("/etc/temper-note", 100) == "fixed\n");

  // A file larger than asked for is shown cut, not refused; a missing one is NotFound.
  REQUIRE(tools.WriteFile("/root/big", std::string(10000, 'x')).ok());
  auto head = tools.ReadFile("/root/big", 100);
  REQUIRE(head.ok());
  CHECK(*head == std::string(100, 'x'));
  CHECK(tools.ReadFile("/etc/no-such-file", 100).status().code() == StatusCode::kNotFound);
  CHECK(tools.WriteFile("/no/such/dir/f", "x").code() == StatusCode::kNotFound);

  cancelled = true;
  auto after = tools.RunCommand("touch /root/after-cancel", std::chrono::seconds(30));
  CHECK(after.status().code() == StatusCode::kCancelled);
  CHECK(tools.WriteFile("/root/x", "x").code() == StatusCode::kCancelled);
  CHECK_FALSE(std::filesystem::exists(target->root() + "/root/after-cancel"));
}

}  // namespace
}  // namespace temper
