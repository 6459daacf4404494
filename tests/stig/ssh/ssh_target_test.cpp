#include "stig/ssh/ssh_target.h"

#include <filesystem>
#include <fstream>
#include <thread>

#include <catch2/catch.hpp>

#include "stig/health.h"
#include "stig/package_install.h"
#include "stig/scap/content.h"
#include "stig/ssh/ssh_test_support.h"

namespace temper::testing {
namespace {

using stig::SshTarget;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

struct TargetHost {
  std::unique_ptr<NetnsSshHost> host;
  ScopedControlDir control;
  std::unique_ptr<SshTarget> target;

  explicit TargetHost(const std::string& name, const std::string& user = "root") : host(StartHost(name)) {
    stig::SshTargetOptions o;
    o.name = name;
    o.ssh = TestSshOptions(host->Endpoint(user), TestRoot().client_key, AcceptedKnownHosts(*host), control.path());
    o.reconnect_tries = 2;
    o.reconnect_pause = std::chrono::seconds(1);
    auto t = SshTarget::Open(o, QuietSshLog());
    INFO(t.status().ToString());
    REQUIRE(t.ok());
    target = std::move(*t);
  }
  std::string Tree(const std::string& path) const { return host->tree() + path; }
};

const stig::Content& Ubuntu2004Stig() {
  static const Result<stig::Content> content = stig::Content::Load(std::string(stig::kUbuntu2004Datastream), "stig");
  INFO(content.status().ToString());
  REQUIRE(content.ok());
  return *content;
}

TEST_CASE("An SSH target runs, reads and writes as root and journals what the Worker writes", "[ssh][ssh_target]") {
  TEMPER_SKIP_WITHOUT_SSH_HOSTS();
  TargetHost h("target-basics", "admin");  // through sudo
  auto id = h.target->Snapshot();
  REQUIRE(id.ok());
  CHECK_FALSE(h.target->dirty());
  auto r = h.target->Run("id -u; echo oops >&2; exit 3", Limits());
  REQUIRE(r.ok());
  CHECK(r->out == "0\n");
  CHECK(r->err == "oops\n");
  CHECK(r->exit_code == 3);
  CHECK(h.target->dirty());

  REQUIRE(h.target->WriteFile("/etc/issue", "hardened\n", 0644).ok());
  REQUIRE(h.target->WriteFile("/opt/temper-tool.conf", "setting=1\n", 0600).ok());  // outside the roots
  auto read = h.target->ReadFile("/opt/temper-tool.conf", 100);
  REQUIRE(read.ok());
  CHECK(*read == "setting=1\n");
  CHECK(h.target->ReadFile("/opt/temper-tool.conf", 3).status().code() == StatusCode::kOutOfRange);
  CHECK(h.target->WriteFile("/no/such/dir/file", "x", 0644).code() == StatusCode::kNotFound);

  REQUIRE(h.target->Revert(*id).ok());
  CHECK_FALSE(h.target->dirty());
  CHECK_FALSE(std::filesystem::exists(h.Tree("/opt/temper-tool.conf")));
  CHECK(Slurp(h.Tree("/etc/issue")) != "hardened\n");
  // The login user's own keys are journalled too.
  CHECK(h.target->journal().Covers("/home/admin/.ssh/authorized_keys"));
}

TEST_CASE("write_file through a symlink writes and journals where the link leads", "[ssh][ssh_target]") {
  TEMPER_SKIP_WITHOUT_SSH_HOSTS();
  TargetHost h("target-link");
  std::filesystem::create_directories(h.Tree("/opt/app"));
  { std::ofstream(h.Tree("/opt/app/app.conf")) << "setting=0\n"; }
  std::filesystem::create_symlink("/opt/app/app.conf", h.Tree("/tmp/app.conf"));
  auto id = h.target->Snapshot();
  REQUIRE(id.ok());
  REQUIRE(h.target->WriteFile("/tmp/app.conf", "setting=1\n", 0644).ok());
  CHECK(std::filesystem::is_symlink(h.Tree("/tmp/app.conf")));  // the link stays a link
  CHECK(Slurp(h.Tree("/opt/app/app.conf")) == "setting=1\n");
  // /opt/app/app.conf (outside the journal's roots) was tracked, so the revert restores it.
  REQUIRE(h.target->Revert(*id).ok());
  CHECK(Slurp(h.Tree("/opt/app/app.conf")) == "setting=0\n");
  // Commands pay one round trip to resolve the paths they may change; reads and data pass.
  CHECK(h.target->Run("echo x > /tmp/plain && cat /tmp/app.conf", Limits()).ok());
  CHECK(h.target->Run("sed -i s/0/2/ /tmp/app.conf", Limits()).ok());
}

TEST_CASE("An SSH target's history: unsnapshotted paths, each snapshot's changes, overlaps, and dropping the newest",
          "[ssh][ssh_target]") {
  TEMPER_SKIP_WITHOUT_SSH_HOSTS();
  TargetHost h("target-history");
  auto Paths = [](Result<std::vector<std::string>> r) {
    INFO(r.status().ToString());
    REQUIRE(r.ok());
    return *r;
  };
  CHECK(Paths(h.target->UnsnapshottedPaths()).empty());
  REQUIRE(h.target->Run("echo 'PASS_MAX_DAYS 60' >> /etc/login.defs", Limits()).ok());
  CHECK(Paths(h.target->UnsnapshottedPaths()) == std::vector<std::string>{"/etc/login.defs"});
  auto first = h.target->Snapshot();
  REQUIRE(first.ok());
  CHECK(Paths(h.target->UnsnapshottedPaths()).empty());
  REQUIRE(h.target->Run("echo banner > /etc/issue.net; chmod 0600 /etc/motd", Limits()).ok());
  auto second = h.target->Snapshot();
  REQUIRE(second.ok());
  REQUIRE(h.target->Run("echo 'PASS_MIN_DAYS 1' >> /etc/login.defs", Limits()).ok());
  auto third = h.target->Snapshot();
  REQUIRE(third.ok());

  auto held = h.target->Snapshots();
  REQUIRE(held.ok());
  CHECK(*held == std::vector<stig::SnapshotId>{*first, *second, *third});
  CHECK(Paths(h.target->SnapshotChanges(*first)) == std::vector<std::string>{"/etc/login.defs"});
  CHECK(Paths(h.target->SnapshotChanges(*second)) == std::vector<std::string>{"/etc/issue.net", "/etc/motd"});
  CHECK(h.target->SnapshotChanges(0).status().code() == StatusCode::kNotFound);

  // The third rewrote what the first changed; nothing above the second touched its paths.
  auto overlaps = h.target->OverlapsAbove(*first);
  REQUIRE(overlaps.ok());
  REQUIRE(overlaps->size() == 1);
  CHECK((*overlaps)[0].later == *third);
  CHECK((*overlaps)[0].paths == std::vector<std::string>{"/etc/login.defs"});
  auto clear = h.target->OverlapsAbove(*second);
  REQUIRE(clear.ok());
  CHECK(clear->empty());

  // Only the newest snapshot can go alone; the second's changes are in the third's archive too.
  Status refused = h.target->DropSnapshot(*second);
  CHECK(refused.code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(refused.message(), Catch::Contains("revert the whole batch"));
  REQUIRE(h.target->DropSnapshot(*third).ok());
  CHECK(Slurp(h.Tree("/etc/login.defs")).find("PASS_MIN_DAYS 1") == std::string::npos);
  CHECK(Slurp(h.Tree("/etc/issue.net")) == "banner\n");
  held = h.target->Snapshots();
  REQUIRE(held.ok());
  CHECK(*held == std::vector<stig::SnapshotId>{*first, *second});
  // Ids are never reused: the next snapshot is not the dropped one's.
  auto fourth = h.target->Snapshot();
  REQUIRE(fourth.ok());
  CHECK(*fourth > *third);
}

TEST_CASE("Packages install with the host's apt and a revert removes them", "[ssh][ssh_target]") {
  TEMPER_SKIP_WITHOUT_SSH_HOSTS();
  TargetHost h("target-packages");
  CHECK(h.target->CanInstallPackages());
  auto id = h.target->Snapshot();
  REQUIRE(id.ok());
  // vlock is in the host's apt cache; the host has no network, as many managed hosts do not.
  auto installed = stig::InstallPackages(*h.target, {"vlock"}, Limits(300));
  INFO(installed.status().ToString());
  REQUIRE(installed.ok());
  CHECK(std::filesystem::exists(h.Tree("/usr/bin/vlock")));
  auto unknown = stig::InstallPackages(*h.target, {"no-such-package-temper"}, Limits(300));
  CHECK(unknown.status().code() == StatusCode::kNotFound);

  REQUIRE(h.target->Revert(*id).ok());
  CHECK_FALSE(std::filesystem::exists(h.Tree("/usr/bin/vlock")));
  CHECK(Slurp(h.Tree("/var/lib/dpkg/status")).find("Package: vlock\n") == std::string::npos);
}

TEST_CASE("A connection lost after a change is reverted through a fresh connection", "[ssh][ssh_target]") {
  TEMPER_SKIP_WITHOUT_SSH_HOSTS();
  TargetHost h("target-lost");
  auto id = h.target->Snapshot();
  REQUIRE(id.ok());
  const std::string motd = Slurp(h.Tree("/etc/motd"));
  REQUIRE(h.target->Run("echo 'changed by an attempt' >> /etc/motd", Limits()).ok());

  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    h.host->StopSshd();
  });
  auto mid = h.target->Run("sleep 30", Limits());
  killer.join();
  CHECK(mid.status().code() == StatusCode::kAborted);
  CHECK_THAT(mid.status().message(), Catch::Contains("\"connection lost\""));
  // After a change, nothing but a revert may follow.
  auto next = h.target->ReadFile("/etc/motd", 1000);
  CHECK(next.status().code() == StatusCode::kAborted);
  CHECK_THAT(next.status().message(), Catch::Contains("only a revert"));
  CHECK(h.target->Snapshot().status().code() == StatusCode::kAborted);

  REQUIRE(h.host->StartSshd().ok());
  Status reverted = h.target->Revert(*id);
  INFO(reverted.ToString());
  REQUIRE(reverted.ok());
  CHECK_FALSE(h.target->needs_human());
  CHECK(Slurp(h.Tree("/etc/motd")) == motd);
  auto after = h.target->Run("echo fine", Limits());
  REQUIRE(after.ok());
  CHECK(after->out == "fine\n");
}

TEST_CASE("A revert with no way back in marks the host for a human", "[ssh][ssh_target]") {
  TEMPER_SKIP_WITHOUT_SSH_HOSTS();
  TargetHost h("target-human");
  auto id = h.target->Snapshot();
  REQUIRE(id.ok());
  REQUIRE(h.target->Run("echo change >> /etc/motd", Limits()).ok());
  h.host->StopSshd();  // and it does not come back

  Status reverted = h.target->Revert(*id);
  CHECK_FALSE(reverted.ok());
  CHECK_THAT(reverted.message(), Catch::Contains("needs a human"));
  CHECK_THAT(reverted.message(), Catch::Contains("\"connection refused\""));
  REQUIRE(h.target->needs_human());
  // Everything stops until a person has looked.
  REQUIRE(h.host->StartSshd().ok());
  auto run = h.target->Run("true", Limits());
  CHECK(run.status().code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(run.status().message(), Catch::Contains("needs a human"));
  CHECK(h.target->Revert(*id).code() == StatusCode::kFailedPrecondition);
}

TEST_CASE("The lock-out guard refuses, and a fresh login checks what it cannot see", "[ssh][ssh_target]") {
  TEMPER_SKIP_WITHOUT_SSH_HOSTS();
  TargetHost h("target-lockout");
  auto id = h.target->Snapshot();
  REQUIRE(id.ok());
  auto locked = h.target->Run("usermod -L root", Limits());
  CHECK(locked.status().code() == StatusCode::kPermissionDenied);
  CHECK_THAT(locked.status().message(), Catch::Contains("locked out"));
  CHECK(h.target->WriteFile("/root/.ssh/authorized_keys", "", 0600).code() == StatusCode::kPermissionDenied);
  CHECK(h.target->Run("ufw deny 22/tcp", Limits()).status().code() == StatusCode::kPermissionDenied);
  CHECK(h.target->Run("grep -c ssh-ed25519 /root/.ssh/authorized_keys", Limits()).ok());  // reading is fine

  auto healthy = stig::CheckHealth(*h.target, {}, Limits());
  REQUIRE(healthy.ok());
  REQUIRE(healthy->results.size() == 1);
  CHECK(healthy->results[0].name == "fresh-ssh-login");
  CHECK(healthy->results[0].ok);

  // A change the guard cannot read: sshd now refuses root, and it is reloaded. The open connection
  // still works; a fresh login does not.
  REQUIRE(
      h.target->Run("echo 'DenyUsers root' >> /etc/ssh/sshd_config && kill -HUP $(cat /run/sshd.pid)", Limits()).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  auto broken = stig::CheckHealth(*h.target, {}, Limits());
  REQUIRE(broken.ok());
  CHECK(broken->BrokenSince(&*healthy) == std::vector<std::string>{"fresh-ssh-login"});
  CHECK_THAT(broken->results[0].detail, Catch::Contains("\"authentication refused\""));

  // The revert restores the file and makes sshd run it again.
  REQUIRE(h.target->Revert(*id).ok());
  auto again = stig::CheckHealth(*h.target, {}, Limits());
  REQUIRE(again.ok());
  CHECK(again->healthy());
}

TEST_CASE("OpenSCAP on the host gives the local evaluator's verdicts for the same tree",
          "[ssh][ssh_target][remote_oscap]") {
  TEMPER_SKIP_WITHOUT_SSH_HOSTS();
  TargetHost h("target-eval");
  stig::Evaluator evaluator(Ubuntu2004Stig(), {}, QuietSshLog());
  stig::EvaluationRequest request;
  request.rule_ids = {"sshd_disable_root_login",         "sshd_set_idle_timeout",
                      "sshd_disable_empty_passwords",    "accounts_maximum_age_login_defs",
                      "accounts_minimum_age_login_defs", "accounts_password_pam_minlen",
                      "package_aide_installed",          "package_audit_installed",
                      "package_sudo_installed",          "file_permissions_etc_shadow",
                      "file_owner_etc_passwd",           "file_groupowner_etc_group",
                      "sudo_require_authentication",     "no_empty_passwords",
                      "audit_rules_login_events_faillog"};
  auto local = evaluator.Evaluate(h.host->tree(), request);
  INFO(local.status().ToString());
  REQUIRE(local.ok());

  const std::string out = h.host->dir() + "/files/results";
  request.output_dir = out;
  request.write_fix_script = true;
  auto remote = h.target->Evaluate(evaluator, request);
  INFO(remote.status().ToString());
  REQUIRE(remote.ok());
  REQUIRE(remote->verdicts.size() == local->verdicts.size());
  std::map<stig::Verdict, int> kinds;
  for (std::size_t i = 0; i < local->verdicts.size(); ++i) {
    INFO(local->verdicts[i].rule_id);
    CHECK(remote->verdicts[i].rule_id == local->verdicts[i].rule_id);
    CHECK(stig::VerdictName(remote->verdicts[i].verdict) == stig::VerdictName(local->verdicts[i].verdict));
    kinds[local->verdicts[i].verdict]++;
  }
  CHECK(kinds[stig::Verdict::kPass] > 0);  // both kinds, so the comparison means something
  CHECK(kinds[stig::Verdict::kFail] > 0);
  CHECK(std::filesystem::file_size(remote->results_path) > 0);
  CHECK(std::filesystem::file_size(remote->arf_path) > 0);
  CHECK(Slurp(remote->fix_script_path).find("sshd_set_idle_timeout") != std::string::npos);
  // The host keeps the datastream (by digest), not the run.
  CHECK(std::filesystem::is_empty(h.Tree("/var/lib/temper/eval")));
  CHECK_FALSE(std::filesystem::is_empty(h.Tree("/var/lib/temper/content")));

  // A host without oscap is told how to get it.
  REQUIRE(h.target->Run("rm /usr/bin/oscap", Limits()).ok());
  auto none = h.target->Evaluate(evaluator, {.rule_ids = {"sshd_disable_root_login"}});
  CHECK(none.status().code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(none.status().message(), Catch::Contains("apt-get install openscap-scanner"));
  CHECK_THAT(none.status().message(), Catch::Contains("dnf install openscap-scanner"));
}

}  // namespace
}  // namespace temper::testing
