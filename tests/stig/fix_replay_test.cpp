// Fixes replayed from one real rootfs target onto another over the same base: a fix captured on A
// (FixSinceSnapshot), through JSON, onto a fresh B leaves B with exactly A's changed paths; again,
// it changes nothing; a file B changed elsewhere is merged, one B changed on the same line is a
// conflict that leaves B untouched; a package is installed, not its files copied.
#include "stig/fix_replay.h"

#include <map>

#include <catch2/catch.hpp>

#include "scratch_space.h"
#include "stig/package_install.h"
#include "stig/rootfs_fixture.h"
#include "stig/test_repository.h"

namespace temper::stig {
namespace {

using testing::ScopedTarget;

SandboxLimits Limits() {
  SandboxLimits l;
  l.timeout = std::chrono::minutes(5);
  return l;
}

std::string Shell(Target& t, const std::string& command) {
  auto r = t.Run("set -e; " + command, Limits());
  REQUIRE(r.ok());
  INFO(command << "\n" << r->err);
  REQUIRE(r->Succeeded());
  return r->out;
}

FixBundle Capture(Target& t) {
  auto b = t.FixSinceSnapshot();
  INFO(b.status().ToString());
  REQUIRE(b.ok());
  // What a replay reads is what was stored: the JSON form.
  auto back = FixBundle::FromJson(b->ToJson());
  INFO(back.status().ToString());
  REQUIRE(back.ok());
  return *back;
}

ReplayResult Replayed(Target& t, const FixBundle& b) {
  auto r = ReplayFix(t, b);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  return *r;
}

std::map<ReplayAction, int> Counts(const ReplayResult& r) {
  std::map<ReplayAction, int> out;
  for (const ReplayStep& s : r.steps) ++out[s.action];
  return out;
}

constexpr const char* kFix =
    "printf 'Authorized use only\\n' > /etc/issue.net; "
    "chmod 0600 /etc/motd; chown 12:34 /etc/motd; "
    "mkdir -m 0750 /etc/fixdir; chown 0:4 /etc/fixdir; printf 'a\\0b' > /etc/fixdir/bin; chmod 4751 /etc/fixdir/bin; "
    "ln -s ../issue.net /etc/fixdir/link; ln -sfn /dev/null /etc/systemd/system/fix-test.service; "
    "rm /etc/host.conf; rm -r /etc/cron.weekly; "
    "sed -i 's/^#DSHELL=.*/DSHELL=\\/bin\\/sh/' /etc/adduser.conf; "
    "rm /etc/hostname; mkdir -m 0700 /etc/hostname";

TEST_CASE("A fix replayed onto a fresh target leaves it with exactly the fix's changes, and once only",
          "[stig][fix_replay][rootfs_target]") {
  ScopedTarget a("replay-a");
  ScopedTarget b("replay-b");
  REQUIRE(a->Snapshot().ok());
  Shell(*a, kFix);
  FixBundle fix = Capture(*a);
  REQUIRE(fix.files.size() > 8);

  REQUIRE(b->Snapshot().ok());
  ReplayResult first = Replayed(*b, fix);
  INFO(first.Summary());
  CHECK(first.ok());
  CHECK(Counts(first)[ReplayAction::kAlreadyThere] == 0);
  CHECK(Counts(first)[ReplayAction::kMerged] == 0);
  // B's changes, captured the same way, are A's: every byte, owner, mode, link and deletion.
  FixBundle on_b = Capture(*b);
  CHECK(on_b == fix);
  CHECK(Shell(*b, "stat -c '%a %u:%g' /etc/fixdir/bin /etc/motd /etc/fixdir") == "4751 0:0\n600 12:34\n750 0:4\n");
  CHECK(Shell(*b, "readlink /etc/fixdir/link; cat /etc/fixdir/link") == "../issue.net\nAuthorized use only\n");

  // Again: nothing to do.
  ReplayResult second = Replayed(*b, fix);
  INFO(second.Summary());
  CHECK(second.ok());
  CHECK(Counts(second)[ReplayAction::kAlreadyThere] == static_cast<int>(fix.files.size()));
  CHECK(second.steps.size() == fix.files.size());
  CHECK(Capture(*b) == fix);
}

TEST_CASE("A replay merges a file that drifted elsewhere, and refuses one changed on the same line",
          "[stig][fix_replay][merge]") {
  ScopedTarget a("replay-drift-a");
  REQUIRE(a->Snapshot().ok());
  Shell(*a,
        "printf 'Authorized use only\\n' > /etc/issue.net; sed -i 's/^#DSHELL=.*/DSHELL=\\/bin\\/sh/' "
        "/etc/adduser.conf");
  FixBundle fix = Capture(*a);
  REQUIRE(fix.files.size() == 2);

  SECTION("drifted elsewhere: merged") {
    ScopedTarget b("replay-drift-b");
    Shell(*b, "echo 'LOCAL=1' >> /etc/adduser.conf");
    REQUIRE(b->Snapshot().ok());
    ReplayResult r = Replayed(*b, fix);
    INFO(r.Summary());
    CHECK(r.ok());
    CHECK(Counts(r)[ReplayAction::kMerged] == 1);
    CHECK(Counts(r)[ReplayAction::kWritten] == 1);
    std::string merged = Shell(*b, "cat /etc/adduser.conf");
    CHECK(merged.find("\nDSHELL=/bin/sh\n") != std::string::npos);
    CHECK(merged.ends_with("LOCAL=1\n"));
  }
  SECTION("the same line changed otherwise: a conflict, and nothing written") {
    ScopedTarget b("replay-conflict-b");
    Shell(*b, "sed -i 's/^#DSHELL=.*/DSHELL=\\/bin\\/zsh/' /etc/adduser.conf");
    REQUIRE(b->Snapshot().ok());
    ReplayResult r = Replayed(*b, fix);
    REQUIRE_FALSE(r.ok());
    REQUIRE(r.conflicts.size() == 1);
    CHECK(r.conflicts[0].path == "/etc/adduser.conf");
    CHECK(r.conflicts[0].why.find("drifted") != std::string::npos);
    CHECK(r.Summary().find("/etc/adduser.conf") != std::string::npos);
    CHECK(r.steps.empty());
    // /etc/issue.net, which alone would have been written, was not.
    auto unsnapshotted = b->UnsnapshottedPaths();
    REQUIRE(unsnapshotted.ok());
    CHECK(unsnapshotted->empty());
  }
}

TEST_CASE("A replayed fix installs its package from the target's own apt instead of copying its files",
          "[stig][fix_replay][package_install]") {
  testing::TestRepository repo;
  ::temper::testing::ScratchPath cache_dir("package-cache-replay");
  PackageCacheOptions options{.dir = cache_dir.path(), .sources = {repo.Source()}};
  ScopedTarget a("replay-pkg-a", options);
  ScopedTarget b("replay-pkg-b", options);
  REQUIRE(a->Snapshot().ok());
  auto installed = InstallPackages(*a, {"temper-test-dep"}, Limits());
  INFO(installed.status().ToString());
  REQUIRE(installed.ok());
  Shell(*a, "printf 'changed\\n' > /usr/share/temper-test/dep");
  FixBundle fix = Capture(*a);
  REQUIRE(fix.files.size() == 1);  // the changed file of the package; the rest comes with it

  REQUIRE(b->Snapshot().ok());
  ReplayResult r = Replayed(*b, fix);
  INFO(r.Summary());
  CHECK(r.ok());
  CHECK(Counts(r)[ReplayAction::kPackages] == 1);
  CHECK(Counts(r)[ReplayAction::kWritten] == 1);
  CHECK(Shell(*b, "dpkg-query -W -f '${Package} ${Version}\\n' temper-test-ok temper-test-dep") ==
        "temper-test-dep 1.0\ntemper-test-ok 1.0\n");
  CHECK(Shell(*b, "cat /usr/share/temper-test/dep /usr/share/temper-test/ok") == "changed\nok\n");
  FixBundle on_b = Capture(*b);
  CHECK(on_b.packages == fix.packages);
  CHECK(on_b.files == fix.files);

  ReplayResult again = Replayed(*b, fix);
  CHECK(Counts(again)[ReplayAction::kPackages] == 0);
  CHECK(Counts(again)[ReplayAction::kAlreadyThere] == 1);
}

}  // namespace
}  // namespace temper::stig
