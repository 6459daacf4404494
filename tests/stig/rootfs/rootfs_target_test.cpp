#include "stig/rootfs/rootfs_target.h"

#include <sys/xattr.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>

#include "scratch_space.h"
#include "stig/rootfs_fixture.h"
#include "stig/tree_listing.h"

namespace temper::stig {
namespace {

using testing::ScopedTarget;

SandboxLimits QuickLimits() {
  SandboxLimits l;
  l.timeout = std::chrono::seconds(60);
  return l;
}

// Every way out we could think of must fail, and the host must be unchanged afterwards.
TEST_CASE("The sandbox confines commands to the target", "[stig][rootfs_target][sandbox]") {
  ScopedTarget t("escape");
  std::string marker = fmt::format("/tmp/temper-escape-{}", ::getpid());
  std::filesystem::remove(marker);

  SECTION("host paths are not reachable") {
    // /tmp inside is the target's own /tmp; the host's is not mounted at all.
    auto r = t->Run("touch " + marker + " && ls /work /home/.. >/dev/null 2>&1; ls -d /work", QuickLimits());
    REQUIRE(r.ok());
    CHECK_FALSE(std::filesystem::exists(marker));
    CHECK(std::filesystem::exists(t->root() + marker));  // it landed inside the target
    CHECK(r->exit_code != 0);                            // no /work inside
  }
  SECTION("/proc/sys is read-only and cannot be remounted") {
    std::ifstream before_f("/proc/sys/kernel/panic");
    std::string before;
    before_f >> before;
    auto r = t->Run(
        "echo 77 > /proc/sys/kernel/panic; a=$?; mount -o remount,rw /proc/sys; b=$?; "
        "echo 77 > /proc/sys/kernel/panic; c=$?; echo $a $b $c",
        QuickLimits());
    REQUIRE(r.ok());
    int write1 = 0, remount = 0, write2 = 0;
    std::istringstream(r->out) >> write1 >> remount >> write2;
    CHECK(write1 != 0);
    CHECK(remount != 0);
    CHECK(write2 != 0);
    std::ifstream after_f("/proc/sys/kernel/panic");
    std::string after;
    after_f >> after;
    CHECK(after == before);
  }
  SECTION("the network is unreachable") {
    auto r = t->Run(
        "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '; "
        "bash -c 'echo > /dev/tcp/127.0.0.1/22' 2>/dev/null && echo LOOPBACK; "
        "bash -c 'echo > /dev/tcp/1.1.1.1/53' 2>/dev/null && echo INTERNET; "
        "cd /tmp && apt-get download -o Acquire::Retries=0 hello >/dev/null 2>&1 && echo APT",
        QuickLimits());
    REQUIRE(r.ok());
    CHECK(r->out == "lo\n");  // only a loopback, and nothing connects anywhere
  }
  SECTION("privileged operations fail") {
    auto r = t->Run(
        "mknod /tmp/mem c 1 1 2>/dev/null && echo MKNOD; mount -t tmpfs x /mnt 2>/dev/null && echo MOUNT; "
        "hostname evil 2>/dev/null; cat /proc/sys/kernel/hostname",
        QuickLimits());
    REQUIRE(r.ok());
    CHECK(r->out.find("MKNOD") == std::string::npos);
    CHECK(r->out.find("MOUNT") == std::string::npos);
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    CHECK(std::string(host) != "evil");
  }
  SECTION("limits on time, memory and output hold") {
    SandboxLimits l = QuickLimits();
    l.timeout = std::chrono::milliseconds(1500);
    auto slow = t->Run("sleep 60 & sleep 60", l);
    REQUIRE(slow.ok());
    CHECK(slow->timed_out);
    l.timeout = std::chrono::seconds(30);
    l.memory_limit_bytes = 256 << 20;
    auto big = t->Run("dd if=/dev/zero of=/dev/null bs=1G count=1", l);
    REQUIRE(big.ok());
    CHECK_FALSE(big->Succeeded());
    l.max_output_bytes = 4096;
    auto loud = t->Run("head -c 1000000 /dev/zero", l);
    REQUIRE(loud.ok());
    CHECK(loud->out.size() == 4096);
    CHECK(loud->out_truncated);
  }
  std::filesystem::remove(marker);
}

TEST_CASE("ReadFile and WriteFile stay inside the target", "[stig][rootfs_target]") {
  ScopedTarget t("files");
  REQUIRE(t->WriteFile("/etc/temper-test.conf", "a = 1\n", 0640).ok());
  auto back = t->ReadFile("/etc/temper-test.conf", 1000);
  REQUIRE(back.ok());
  CHECK(*back == "a = 1\n");
  auto mode = t->Run("stat -c %a:%u /etc/temper-test.conf", QuickLimits());
  REQUIRE(mode.ok());
  CHECK(mode->out == "640:0\n");

  // An absolute symlink resolves inside the target, never to the host's file.
  const ::temper::testing::ScratchPath host("host-secret");  // a file of the host's, outside the target
  const std::string& host_file = host.path();
  { std::ofstream(host_file) << "host secret\n"; }
  REQUIRE(t->Run("ln -sf " + host_file + " /etc/escape-link; ln -sf ../../../../.." + host_file + " /etc/escape-rel",
                 QuickLimits())
              ->Succeeded());
  CHECK(t->ReadFile("/etc/escape-link", 1000).status().code() == StatusCode::kNotFound);
  CHECK(t->ReadFile("/etc/escape-rel", 1000).status().code() == StatusCode::kNotFound);
  // Writing through a link whose target is missing (in the target) creates nothing, anywhere.
  Status through = t->WriteFile("/etc/escape-link", "inside\n", 0644);
  CHECK(through.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(through.message(), Catch::StartsWith("/etc/escape-link is a symlink to " + host_file));
  std::ifstream hf(host_file);
  std::string host_content;
  std::getline(hf, host_content);
  CHECK(host_content == "host secret");
  CHECK(t->ReadFile(host_file, 100).status().code() == StatusCode::kNotFound);

  CHECK(t->ReadFile("/nonexistent/file", 10).status().code() == StatusCode::kNotFound);
  CHECK(t->ReadFile("/etc/temper-test.conf", 2).status().code() == StatusCode::kOutOfRange);
  CHECK(t->ReadFile("relative/path", 10).status().code() == StatusCode::kInvalidArgument);
  CHECK(t->WriteFile("/no/such/dir/file", "x", 0644).code() == StatusCode::kNotFound);
}

TEST_CASE("Revert restores the exact tree: contents, owners, modes, xattrs, links", "[stig][rootfs_target][snapshot]") {
  ScopedTarget t("revert");
  auto before = testing::TreeListing(t->root());
  REQUIRE(before.size() > 1000);
  auto snap = t->Snapshot();
  REQUIRE(snap.ok());
  CHECK(*snap == 1);

  auto r = t->Run(
      "set -e; echo changed >> /etc/ssh/sshd_config; chmod 600 /etc/passwd; chown 42:42 /etc/hostname; "
      "rm /etc/issue; rm -r /etc/cron.daily; ln -sf /nonexistent /etc/localtime; ln /etc/group /etc/group-hardlink; "
      "mkdir -p /opt/new/dir; echo x > /opt/new/dir/file; mv /etc/motd /etc/motd.moved; "
      "touch -d 2001-01-01 /etc/shells",
      QuickLimits());
  REQUIRE(r.ok());
  INFO(r->err);
  REQUIRE(r->Succeeded());
  REQUIRE(::lsetxattr((t->root() + "/etc/fstab").c_str(), "user.temper", "v", 1, 0) == 0);
  REQUIRE(t->WriteFile("/etc/sudoers.d/temper", "Defaults !lecture\n", 0440).ok());
  auto changed = testing::TreeListing(t->root());
  CHECK(changed != before);
  auto paths = t->snapshots().ChangedPaths();
  REQUIRE(paths.ok());
  CHECK(std::find(paths->begin(), paths->end(), "/etc/ssh/sshd_config") != paths->end());

  REQUIRE(t->Revert(*snap).ok());
  auto after = testing::TreeListing(t->root());
  // Compare path by path so a failure names what differs.
  for (const auto& [path, desc] : before) {
    auto it = after.find(path);
    INFO(path);
    REQUIRE(it != after.end());
    CHECK(it->second == desc);
  }
  CHECK(after.size() == before.size());
}

TEST_CASE("Snapshots nest and survive reopening", "[stig][rootfs_target][snapshot]") {
  ScopedTarget t("nest");
  auto s1 = t->Snapshot();
  REQUIRE(s1.ok());
  REQUIRE(t->WriteFile("/etc/a", "A", 0644).ok());
  auto s2 = t->Snapshot();
  REQUIRE(s2.ok());
  CHECK(*s2 == *s1 + 1);
  REQUIRE(t->WriteFile("/etc/b", "B", 0644).ok());

  // A second owner of the same directory is refused rather than unmounting the first one's tree.
  auto second = RootfsTarget::Open("nest2", t.dir(), testing::SharedRoot());
  CHECK(second.status().code() == StatusCode::kUnavailable);
  CHECK(t->ReadFile("/etc/a", 10).ok());

  t.Reopen();
  CHECK(t->snapshots().depth() == *s2);
  CHECK(t->ReadFile("/etc/b", 10).ok());  // unsnapshotted changes persist across a reopen

  REQUIRE(t->Revert(*s2).ok());
  CHECK(t->ReadFile("/etc/a", 10).ok());
  CHECK(t->ReadFile("/etc/b", 10).status().code() == StatusCode::kNotFound);
  REQUIRE(t->Revert(*s1).ok());
  CHECK(t->ReadFile("/etc/a", 10).status().code() == StatusCode::kNotFound);
  CHECK(t->snapshots().depth() == *s1);
  CHECK(t->Revert(*s1 + 5).code() == StatusCode::kOutOfRange);
  REQUIRE(t->Revert(0).ok());
  CHECK(t->snapshots().depth() == 0);
}

TEST_CASE("Evaluating leaves the target as it was, though OpenSCAP rebuilds apt's cache as it reads",
          "[stig][rootfs_target][snapshot]") {
  ScopedTarget t("eval-trace");
  Evaluator ev(testing::Ubuntu2004Stig(), {}, testing::QuietLog());
  // A rule gated on the login package: its dpkginfo probe opens apt's cache, which the rootfs
  // ships stale, and rebuilds it in the tree it reads.
  const std::string rule = "xccdf_org.ssgproject.content_rule_accounts_minimum_age_login_defs";
  auto eval = t->Evaluate(ev, {.rule_ids = {rule}});
  REQUIRE(eval.ok());
  CHECK(*eval->VerdictOf(rule) == Verdict::kFail);
  auto changed = t->snapshots().ChangedPaths();
  REQUIRE(changed.ok());
  CHECK(changed->empty());
}

TEST_CASE("A fork runs commands, evaluates and is committed through the Target interface",
          "[stig][rootfs_target][fork]") {
  ScopedTarget t("fork");
  Evaluator ev(testing::Ubuntu2004Stig(), {}, testing::QuietLog());
  const std::string rule = "xccdf_org.ssgproject.content_rule_accounts_minimum_age_login_defs";
  REQUIRE(t->Snapshot().ok());
  Result<std::unique_ptr<Target>> made = t->Fork();
  INFO(made.status().ToString());
  REQUIRE(made.ok());
  Target& fork = **made;
  CHECK(fork.name() == "fork/fork-1");

  auto ran =
      fork.Run("sed -i 's/^PASS_MIN_DAYS.*/PASS_MIN_DAYS 1/' /etc/login.defs && grep ^PASS_MIN_DAYS /etc/login.defs",
               QuickLimits());
  REQUIRE(ran.ok());
  CHECK(ran->out == "PASS_MIN_DAYS 1\n");
  // The fork's verdict sees its change; the target's does not.
  auto in_fork = fork.Evaluate(ev, {.rule_ids = {rule}});
  REQUIRE(in_fork.ok());
  CHECK(*in_fork->VerdictOf(rule) == Verdict::kPass);
  auto in_target = t->Evaluate(ev, {.rule_ids = {rule}});
  REQUIRE(in_target.ok());
  CHECK(*in_target->VerdictOf(rule) == Verdict::kFail);
  auto changes = fork.ChangesSinceSnapshot();
  REQUIRE(changes.ok());
  REQUIRE(changes->files.size() == 1);
  CHECK(changes->files[0].path == "/etc/login.defs");
  CHECK(*fork.UnsnapshottedPaths() == std::vector<std::string>{"/etc", "/etc/login.defs"});

  // A fork is committed or dropped whole: it takes no snapshots of its own.
  CHECK(fork.Snapshot().status().code() == StatusCode::kFailedPrecondition);
  CHECK(fork.Revert(0).code() == StatusCode::kFailedPrecondition);
  CHECK(fork.Fork().status().code() == StatusCode::kFailedPrecondition);

  auto committed = t->CommitFork(fork);
  INFO(committed.status().ToString());
  REQUIRE(committed.ok());
  CHECK(*committed == 2);
  auto after = t->Evaluate(ev, {.rule_ids = {rule}});
  REQUIRE(after.ok());
  CHECK(*after->VerdictOf(rule) == Verdict::kPass);
  CHECK(t->CommitFork(fork).status().code() == StatusCode::kInvalidArgument);  // spent
  CHECK(t->CommitFork(*t).status().code() == StatusCode::kInvalidArgument);    // not a fork
  made->reset();
  REQUIRE(t->Revert(1).ok());
  auto reverted = t->Evaluate(ev, {.rule_ids = {rule}});
  REQUIRE(reverted.ok());
  CHECK(*reverted->VerdictOf(rule) == Verdict::kFail);
}

}  // namespace
}  // namespace temper::stig
