// A fix captured on a rootfs target replayed onto a real SSH host (netns sshd over the same base):
// the host gets the fix's exact files through the SSH target's own operations, a second replay
// changes nothing, and the undo journal reverts the replay like any attempt's change.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>

#include <catch2/catch.hpp>

#include "stig/fix_replay.h"
#include "stig/rootfs_fixture.h"
#include "stig/ssh/ssh_target.h"
#include "stig/ssh/ssh_test_support.h"

namespace temper::testing {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST_CASE("A fix replayed onto an SSH host lands exactly, once, and the undo journal reverts it",
          "[ssh][ssh_target][fix_replay]") {
  TEMPER_SKIP_WITHOUT_SSH_HOSTS();
  stig::testing::ScopedTarget twin("replay-twin");
  REQUIRE(twin->Snapshot().ok());
  auto made = twin->Run(
      "set -e; printf 'Authorized use only\\n' > /etc/issue.net; chmod 0600 /etc/motd; "
      "mkdir -m 0750 /etc/fixdir; printf 'x=1\\n' > /etc/fixdir/conf; chown 0:4 /etc/fixdir/conf; "
      "ln -s ../issue.net /etc/fixdir/link; rm /etc/host.conf",
      Limits());
  REQUIRE(made.ok());
  REQUIRE(made->Succeeded());
  auto captured = twin->FixSinceSnapshot();
  REQUIRE(captured.ok());
  auto fix = stig::FixBundle::FromJson(captured->ToJson());
  REQUIRE(fix.ok());

  std::unique_ptr<NetnsSshHost> host = StartHost("fix-replay");
  ScopedControlDir control;
  stig::SshTargetOptions o;
  o.name = "fix-replay";
  o.ssh = TestSshOptions(host->Endpoint("root"), TestRoot().client_key, AcceptedKnownHosts(*host), control.path());
  auto opened = stig::SshTarget::Open(o, QuietSshLog());
  INFO(opened.status().ToString());
  REQUIRE(opened.ok());
  stig::SshTarget& target = **opened;
  const std::string issue_before = Slurp(host->tree() + "/etc/issue.net");
  auto id = target.Snapshot();
  REQUIRE(id.ok());

  auto first = stig::ReplayFix(target, *fix);
  INFO(first.status().ToString());
  REQUIRE(first.ok());
  INFO(first->Summary());
  CHECK(first->ok());
  CHECK(Slurp(host->tree() + "/etc/issue.net") == "Authorized use only\n");
  CHECK(Slurp(host->tree() + "/etc/fixdir/conf") == "x=1\n");
  struct stat st;
  REQUIRE(::stat((host->tree() + "/etc/fixdir/conf").c_str(), &st) == 0);
  CHECK(st.st_gid == 4);
  REQUIRE(::stat((host->tree() + "/etc/motd").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
  CHECK(std::filesystem::read_symlink(host->tree() + "/etc/fixdir/link") == "../issue.net");
  CHECK_FALSE(std::filesystem::exists(host->tree() + "/etc/host.conf"));

  auto second = stig::ReplayFix(target, *fix);
  REQUIRE(second.ok());
  for (const stig::ReplayStep& step : second->steps) CHECK(step.action == stig::ReplayAction::kAlreadyThere);

  REQUIRE(target.Revert(*id).ok());
  CHECK(Slurp(host->tree() + "/etc/issue.net") == issue_before);
  CHECK_FALSE(std::filesystem::exists(host->tree() + "/etc/fixdir"));
  CHECK(std::filesystem::exists(host->tree() + "/etc/host.conf"));
}

}  // namespace
}  // namespace temper::testing
