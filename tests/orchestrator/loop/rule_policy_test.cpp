#include "orchestrator/loop/rule_policy.h"

#include <catch2/catch.hpp>

namespace temper {
namespace {

using stig::Verdict;

const std::string kPrefix = "xccdf_org.ssgproject.content_rule_";
constexpr TimeMs kNow = 1801353600000;  // 2027-01-31T00:00:00Z

stig::RuleInfo Rule(const std::string& name, stig::Decidability decidability = stig::Decidability::kRootfs) {
  stig::RuleInfo r;
  r.id = kPrefix + name;
  r.classification.decidability = decidability;
  return r;
}

BatchOptions WithWaiver(const std::string& name, std::optional<TimeMs> expires) {
  BatchOptions o;
  o.waivers.push_back({kPrefix + name, "kiosk sessions must not time out", "alice@example.com", expires});
  return o;
}

TEST_CASE("a waiver in force keeps the rule out of remediation whatever its verdict") {
  for (Verdict v : {Verdict::kFail, Verdict::kPass, Verdict::kNotChecked}) {
    PolicyDecision d = DecideRule(Rule("accounts_tmout"), v, WithWaiver("accounts_tmout", kNow + 1), kNow);
    REQUIRE(d.state == RuleState::kWaived);
    CHECK(d.detail == "waived by alice@example.com: kiosk sessions must not time out (until 2027-01-31 00:00:00Z)");
    REQUIRE(d.events.size() == 1);
    CHECK(d.events[0].type == EventType::kRuleWaived);
    CHECK(d.events[0].data["owner"] == "alice@example.com");
    CHECK(d.events[0].data["before_verdict"] == std::string(stig::VerdictName(v)));
  }
  // Waived before anything else is asked: a manual, disruptive rule is still just waived.
  PolicyDecision manual = DecideRule(Rule("package_telnet_removed", stig::Decidability::kManual), Verdict::kFail,
                                     WithWaiver("package_telnet_removed", std::nullopt), kNow);
  CHECK(manual.state == RuleState::kWaived);
  CHECK(manual.detail == "waived by alice@example.com: kiosk sessions must not time out");
  // Another rule's waiver does nothing.
  CHECK_FALSE(DecideRule(Rule("banner_etc_issue_net"), Verdict::kFail, WithWaiver("accounts_tmout", std::nullopt), kNow)
                  .state.has_value());
}

TEST_CASE("a live-host check OpenSCAP cannot decide on a root file system is skipped as such, not an error") {
  stig::RuleInfo service = Rule("service_auditd_enabled", stig::Decidability::kLiveHost);
  service.classification.live_test_types = {"systemdunitproperty_test"};
  PolicyDecision d = DecideRule(service, Verdict::kUnknown, {}, kNow, /*target_is_live=*/false);
  REQUIRE(d.state == RuleState::kSkipped);
  CHECK(d.detail ==
        "needs a live host: its check reads the running system (systemdunitproperty_test), which a root file "
        "system does not have (OpenSCAP: unknown); run it against an SSH host");
  CHECK(DecideRule(service, Verdict::kError, {}, kNow, false).state == RuleState::kSkipped);
  // On a live host the same verdict stays the run's error; a decided verdict is the verdict's.
  CHECK_FALSE(DecideRule(service, Verdict::kUnknown, {}, kNow, true).state.has_value());
  CHECK_FALSE(DecideRule(service, Verdict::kFail, {}, kNow, false).state.has_value());
  // A static check that OpenSCAP could not decide is an error wherever it runs.
  CHECK_FALSE(DecideRule(Rule("accounts_tmout"), Verdict::kUnknown, {}, kNow, false).state.has_value());
}

TEST_CASE("an expired waiver is flagged and the rule is remediated as if it had none") {
  PolicyDecision d = DecideRule(Rule("accounts_tmout"), Verdict::kFail, WithWaiver("accounts_tmout", kNow), kNow);
  CHECK_FALSE(d.state.has_value());
  REQUIRE(d.events.size() == 1);
  CHECK(d.events[0].type == EventType::kWaiverExpired);
  CHECK(d.events[0].data["expires"] == "2027-01-31");
  CHECK(d.events[0].data["detail"] ==
        "the waiver by alice@example.com expired on 2027-01-31: the rule is remediated "
        "as usual");
  // Expired on a disruptive rule without the opt-in: flagged, then held like any disruptive rule.
  PolicyDecision held =
      DecideRule(Rule("package_telnet_removed"), Verdict::kFail, WithWaiver("package_telnet_removed", kNow - 1), kNow);
  CHECK(held.state == RuleState::kHeld);
  REQUIRE(held.events.size() == 2);
  CHECK(held.events[0].type == EventType::kWaiverExpired);
  CHECK(held.events[1].type == EventType::kRuleHeld);
}

TEST_CASE("a rule with no automated check is manual, never pass") {
  PolicyDecision d =
      DecideRule(Rule("installed_os_is_vendor_supported", stig::Decidability::kManual), Verdict::kNotChecked, {}, kNow);
  REQUIRE(d.state == RuleState::kManual);
  CHECK_THAT(d.detail, Catch::Contains("no automated check") && Catch::Contains("notchecked"));
  REQUIRE(d.events.size() == 1);
  CHECK(d.events[0].type == EventType::kRuleManual);
}

TEST_CASE("a failing disruptive rule is held unless the batch allows disruptive changes") {
  stig::RuleInfo reboot = Rule("kernel_module_cramfs_disabled");
  reboot.fix_metadata = {.declared = true,
                         .system = "urn:xccdf:fix:script:sh",
                         .reboot = true,
                         .disruption = "medium",
                         .complexity = "low",
                         .strategy = "disable"};
  PolicyDecision d = DecideRule(reboot, Verdict::kFail, {}, kNow);
  REQUIRE(d.state == RuleState::kHeld);
  CHECK(d.detail ==
        "held, not changed: disruptive (its fix takes effect only after a reboot (SCAP Security Guide: "
        "reboot=true); its fix takes a kernel module (a driver) away). To remediate it, submit it again "
        "allowing disruptive changes: temper submit --allow-disruptive (or allow_disruptive: true in the "
        "batch file)");
  REQUIRE(d.events.size() == 1);
  CHECK(d.events[0].type == EventType::kRuleHeld);
  CHECK(d.events[0].data["reasons"] == nlohmann::json({"reboot", "kernel_module"}));

  BatchOptions allowed;
  allowed.allow_disruptive = true;
  PolicyDecision opted_in = DecideRule(reboot, Verdict::kFail, allowed, kNow);
  CHECK_FALSE(opted_in.state.has_value());
  CHECK(opted_in.events.empty());
  // Passing already (or not applicable): nothing to hold, the verdict decides.
  CHECK_FALSE(DecideRule(reboot, Verdict::kPass, {}, kNow).state.has_value());
  CHECK_FALSE(DecideRule(Rule("mount_option_dev_shm_noexec"), Verdict::kNotApplicable, {}, kNow).state.has_value());
  // Not disruptive: remediated without the opt-in.
  CHECK_FALSE(DecideRule(Rule("accounts_tmout"), Verdict::kFail, {}, kNow).state.has_value());
}

TEST_CASE("a kept fix that needs a reboot is reboot_pending, others fixed") {
  stig::RuleInfo rule = Rule("kernel_module_cramfs_disabled");
  CHECK(KeptFixState(rule) == RuleState::kFixed);
  rule.fix_metadata.reboot = true;
  CHECK(KeptFixState(rule) == RuleState::kRebootPending);
}

}  // namespace
}  // namespace temper
