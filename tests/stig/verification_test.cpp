#include "stig/verification.h"

#include <catch2/catch.hpp>

#include "rootfs_fixture.h"

namespace temper::stig {
namespace {

using testing::QuietLog;
using testing::ScopedTarget;
using testing::Ubuntu2004Stig;

Status ApplyFix(Target& t, const std::string& rule) {
  const RuleInfo* info = *Ubuntu2004Stig().Rule(rule);
  TEMPER_RETURN_IF_ERROR(t.WriteFile("/tmp/fix.sh", info->fix_bash, 0700));
  TEMPER_ASSIGN_OR_RETURN(ProcessResult r, t.Run("bash /tmp/fix.sh && rm /tmp/fix.sh", SandboxLimits{}));
  if (!r.Succeeded()) return Status::Internal("fix for " + rule + " failed: " + r.err);
  return Status::OK();
}

TEST_CASE("The fresh root is healthy", "[stig][health]") {
  ScopedTarget t("health-fresh");
  auto h = CheckHealth(*t, DefaultHealthChecks(), SandboxLimits{});
  REQUIRE(h.ok());
  for (const auto& r : h->results) {
    INFO(r.name << ": " << r.detail);
    CHECK(r.ok);
  }
  // The four checks in the target, and the rootfs target's own: room left on its disk image.
  REQUIRE(h->results.size() == 5);
  CHECK(h->results.back().name == "writable-layer-room");
}

TEST_CASE("A change that passes its rule but breaks sshd -t is rejected", "[stig][verification][health]") {
  ScopedTarget t("verify-health");
  Evaluator ev(Ubuntu2004Stig(), {}, QuietLog());
  auto before = CheckHealth(*t, DefaultHealthChecks(), SandboxLimits{});
  REQUIRE(before.ok());
  // The rule's own line is right, and a bogus keyword beside it makes sshd refuse its config.
  REQUIRE(ApplyFix(*t, "sshd_disable_root_login").ok());
  REQUIRE(t->Run("echo 'PermitRootLogin no' >> /etc/ssh/sshd_config; echo 'NoSuchKeyword yes' >> /etc/ssh/sshd_config",
                 SandboxLimits{})
              ->Succeeded());
  VerificationRequest req;
  req.rule_ids = {"sshd_disable_root_login"};
  req.health_before = &*before;
  auto v = Verify(*t, ev, req);
  REQUIRE(v.ok());
  CHECK(v->rules_pass());                                              // OpenSCAP is satisfied...
  CHECK(v->broken_health == std::vector<std::string>{"sshd-config"});  // ...sshd is not
  CHECK_FALSE(v->accepted());
  CHECK(v->Summary().find("health broken: sshd-config") != std::string::npos);
}

TEST_CASE("A change that breaks a previously passing rule is a regression", "[stig][verification]") {
  ScopedTarget t("verify-regression");
  Evaluator ev(Ubuntu2004Stig(), {}, QuietLog());
  REQUIRE(ApplyFix(*t, "sshd_disable_root_login").ok());
  VerificationRequest first;
  first.rule_ids = {"sshd_disable_root_login"};
  auto ok = Verify(*t, ev, first);
  REQUIRE(ok.ok());
  INFO(ok->Summary());
  CHECK(ok->accepted());

  // The next "fix" for a different rule rewrites sshd_config and re-enables root login.
  REQUIRE(ApplyFix(*t, "sshd_disable_empty_passwords").ok());
  REQUIRE(
      t->Run("sed -i 's/^PermitRootLogin no/PermitRootLogin yes/' /etc/ssh/sshd_config", SandboxLimits{})->Succeeded());
  VerificationRequest second;
  second.rule_ids = {"sshd_disable_empty_passwords"};
  second.previously_passing = {"sshd_disable_root_login", "package_sudo_installed"};
  auto v = Verify(*t, ev, second);
  REQUIRE(v.ok());
  CHECK(v->rules_pass());
  REQUIRE(v->regressions.size() == 1);
  CHECK(v->regressions[0].rule_id == std::string(kRulePrefix) + "sshd_disable_root_login");
  CHECK(v->regressions[0].verdict == Verdict::kFail);
  CHECK_FALSE(v->accepted());
  CHECK(v->Summary().find("regressions: ") != std::string::npos);
}

TEST_CASE("The regression set is cut to the rules whose checks read what a change touched", "[stig][verification]") {
  ScopedTarget t("verify-cut");
  Evaluator ev(Ubuntu2004Stig(), {}, QuietLog());
  REQUIRE(ApplyFix(*t, "sshd_disable_root_login").ok());
  REQUIRE(t->Snapshot().ok());  // the known-good state

  // A change to sshd_config that breaks root login, and one to a file no passing rule reads.
  REQUIRE(t->Run("sed -i 's/^PermitRootLogin no/PermitRootLogin yes/' /etc/ssh/sshd_config; echo hi > /etc/motd.temper",
                 SandboxLimits{})
              ->Succeeded());
  Result<ChangeSet> changes = t->ChangesSinceSnapshot();
  REQUIRE(changes.ok());
  std::vector<std::string> paths;
  for (const FileChange& f : changes->files) paths.push_back(f.path);
  REQUIRE(t->ChangesAreFilesOnly());

  VerificationRequest req;
  req.previously_passing = {"sshd_disable_root_login", "package_sudo_installed"};
  req.changed_paths = paths;
  SECTION("cut: the sshd rule is checked, the package rule (dpkg's database) is not") {
    auto v = Verify(*t, ev, req);
    REQUIRE(v.ok());
    CHECK(v->regression_checked == 1);
    CHECK(v->regression_skipped == 1);
    REQUIRE(v->regressions.size() == 1);
    CHECK(v->regressions[0].rule_id == std::string(kRulePrefix) + "sshd_disable_root_login");
    CHECK_FALSE(v->evaluation.VerdictOf(std::string(kRulePrefix) + "package_sudo_installed").ok());
  }
  SECTION("cross-checked: both evaluated, and the cut missed nothing") {
    req.cross_check = true;
    auto v = Verify(*t, ev, req);
    REQUIRE(v.ok());
    CHECK(v->regression_checked == 2);
    CHECK(v->regression_skipped == 1);
    CHECK(v->regressions.size() == 1);
    CHECK(v->filter_misses.empty());
  }
  SECTION("a change beneath /var/lib/dpkg re-checks every rule: packages decide which rules apply") {
    req.changed_paths->push_back("/var/lib/dpkg/status");
    auto v = Verify(*t, ev, req);
    REQUIRE(v.ok());
    CHECK(v->regression_checked == 2);
    CHECK(v->regression_skipped == 0);
  }
  SECTION("a cut that would miss a regression is reported by the cross-check") {
    // Told (wrongly) that only /etc/motd.temper changed, the cut skips the broken sshd rule...
    req.changed_paths = std::vector<std::string>{"/etc/motd.temper"};
    req.cross_check = true;
    auto v = Verify(*t, ev, req);
    REQUIRE(v.ok());
    CHECK(v->regression_skipped == 2);
    // ...and the cross-check, which judges by every rule, catches it and names the miss.
    REQUIRE(v->filter_misses.size() == 1);
    CHECK(v->filter_misses[0].rule_id == std::string(kRulePrefix) + "sshd_disable_root_login");
    CHECK_FALSE(v->accepted());
  }
}

}  // namespace
}  // namespace temper::stig
