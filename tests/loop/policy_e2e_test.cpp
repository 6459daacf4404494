// Waivers, risk tiers, manual rules and reboot-pending end to end, as an operator meets them: temperd
// with a waiver in temperd.yaml and a rootfs target over the stig suite's shared root, the scripted
// model serving the roles, real OpenSCAP deciding, and every request made through the temper CLI.
// One daemon and one target for the whole story, so the second batch starts from the first one's
// end state, as it would on a host.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>

#include "loop/loop_harness.h"
#include "stig/tree_listing.h"

namespace temper::testing {
namespace {

using scripted::ModelScript;
using scripted::ScriptedModelServer;

// No OVAL check in SSG (OCIL only): a person reviews it.
constexpr const char* kManualRule = "account_temp_expire_date";
// SSG: its Ansible fix says reboot="true" (a locked audit configuration loads new rules at boot);
// fails on the shared root, and its bash fix writes /etc/audit/rules.d/perm_mod.rules.
constexpr const char* kRebootRule = "audit_rules_dac_modification_chmod";
constexpr const char* kRebootRuleFile = "/etc/audit/rules.d/perm_mod.rules";

const nlohmann::json* FindEvent(const std::vector<nlohmann::json>& events, const std::string& type,
                                const std::string& rule = "") {
  for (const nlohmann::json& e : events) {
    if (e["type"] == type && (rule.empty() || e.value("rule_id", "") == kSsgRulePrefix + rule)) return &e;
  }
  return nullptr;
}

TEST_CASE("waived, expired-waiver, manual, held and reboot-pending rules through temperd and the CLI") {
  ModelScript script;  // every rule the loop works on is fixed on its first attempt
  auto server = ScriptedModelServer::Start(script);
  REQUIRE(server.ok());
  LoopDaemon d(**server,
               {.extra_yaml = "waivers:\n  - rule: accounts_tmout\n    reason: kiosk sessions must not time out\n"
                              "    owner: ops@example.com\n"});

  // What accounts_tmout's fix would change: /etc/profile and /etc/profile.d/*.sh.
  const auto profile_d = stig::testing::TreeListing(SharedRoot() + "/etc/profile.d");
  const auto profile = stig::testing::ContentDigest(SharedRoot() + "/etc/profile");

  // Batch 1, no opt-in: accounts_tmout is waived by temperd.yaml; banner_etc_issue_net's waiver on the
  // command line expired in 2020; the reboot rule is disruptive; the manual rule has no check.
  nlohmann::json submitted =
      d.CliJson({"submit", "-t", "lab", "-d", "ssg-ubuntu2004-ds.xml", "-p", "stig", "-r", "accounts_tmout", "-r",
                 "banner_etc_issue_net", "-r", kRebootRule, "-r", kManualRule, "--waive",
                 "banner_etc_issue_net:legal: banner text under review:bob@example.com:2020-01-01", "--json"});
  const std::string first = submitted["id"];
  CHECK(submitted["waivers"].size() == 2);
  temper::v1::Batch batch = d.WaitUntilEnded(first);
  INFO(d.daemon->Log());
  REQUIRE(batch.state() == temper::v1::BATCH_STATE_COMPLETED);
  auto rules = RulesByShortName(batch);

  // Waived: its verdict before is recorded, nothing was tried, and its files are byte for byte as
  // they were.
  const temper::v1::BatchRule& waived = rules["accounts_tmout"];
  CHECK(waived.state() == temper::v1::RULE_STATE_WAIVED);
  CHECK(waived.before_verdict() == "fail");
  CHECK(waived.attempts() == 0);
  CHECK_THAT(waived.detail(), Catch::Contains("ops@example.com") && Catch::Contains("kiosk sessions"));
  CHECK(stig::testing::TreeListing(d.TargetPath("/etc/profile.d")) == profile_d);
  CHECK(stig::testing::ContentDigest(d.TargetPath("/etc/profile")) == profile);
  // The expired waiver did not hold the rule back.
  CHECK(rules["banner_etc_issue_net"].state() == temper::v1::RULE_STATE_FIXED);
  CHECK(rules["banner_etc_issue_net"].after_verdict() == "pass");
  // Disruptive without the opt-in: held, untouched, and the detail says how to opt in.
  CHECK(rules[kRebootRule].state() == temper::v1::RULE_STATE_HELD);
  CHECK(rules[kRebootRule].before_verdict() == "fail");
  CHECK_THAT(rules[kRebootRule].detail(), Catch::Contains("reboot") && Catch::Contains("--allow-disruptive"));
  CHECK_FALSE(std::filesystem::exists(d.TargetPath(kRebootRuleFile)));
  CHECK(rules[kManualRule].state() == temper::v1::RULE_STATE_MANUAL);
  CHECK(rules[kManualRule].before_verdict() == "notchecked");
  CHECK(batch.counts().fixed() == 1);
  CHECK(batch.counts().already_passing() == 0);

  // The Architect was never offered the rules the policy decided, and no role worked on them.
  for (const scripted::RecordedRequest& r : (*server)->requests()) {
    for (const char* name : {"accounts_tmout", kRebootRule, kManualRule}) {
      INFO(r.role << " request " << r.seq << " mentions " << name);
      CHECK(r.rule_id != kSsgRulePrefix + std::string(name));
      if (r.role == "architect") CHECK(r.messages.dump().find(kSsgRulePrefix + std::string(name)) == std::string::npos);
    }
  }

  std::vector<nlohmann::json> events = d.WatchedEvents(first);
  CHECK(FindEvent(events, "rule.waived", "accounts_tmout") != nullptr);
  const nlohmann::json* expired = FindEvent(events, "waiver.expired", "banner_etc_issue_net");
  REQUIRE(expired != nullptr);
  CHECK(expired->at("data")["expires"] == "2020-01-01");
  CHECK(expired->at("data")["owner"] == "bob@example.com");
  CHECK(FindEvent(events, "rule.held", kRebootRule) != nullptr);
  CHECK(FindEvent(events, "rule.manual", kManualRule) != nullptr);

  // The report: waived, held and manual are never pass; the expired waiver is flagged.
  nlohmann::json report = d.ReportJson(first);
  const nlohmann::json& summary = report["summary"];
  CHECK(summary["fixed"] == 1);
  CHECK(summary["already_passing"] == 0);
  CHECK(summary["waived"] == 1);
  CHECK(summary["held"] == 1);
  CHECK(summary["manual"] == 1);
  std::map<std::string, std::string> waiver_status;
  for (const nlohmann::json& w : report["waivers"]) waiver_status[w["name"]] = w["status"];
  CHECK(waiver_status ==
        std::map<std::string, std::string>{{"accounts_tmout", "applied"}, {"banner_etc_issue_net", "expired"}});
  ProcessResult text = d.Cli({"report", first});
  REQUIRE(text.exit_code == 0);
  CHECK_THAT(text.out, Catch::Contains("EXPIRED: remediated as usual") && Catch::Contains("1 waived") &&
                           Catch::Contains("1 held (disruptive)") && Catch::Contains("1 manual"));
  ProcessResult status = d.Cli({"status", first});
  REQUIRE(status.exit_code == 0);
  CHECK_THAT(status.out, Catch::Contains("1 waived, 1 held (disruptive), 1 manual") &&
                             Catch::Contains("EXPIRED: remediated as usual") && Catch::Contains("ops@example.com"));
  // The watch's progress line counts them.
  ProcessResult watch = d.Cli({"watch", first, "--no-follow"});
  REQUIRE(watch.exit_code == 0);
  CHECK_THAT(watch.out, Catch::Contains("fixed 1 · already 0 · failed 0 · escalated 0 · skipped 0 · waived 1 · held 1 "
                                        "· manual 1 · left 0  ✔ completed"));
  // Nothing waits for a reboot in this batch.
  ProcessResult nothing = d.Cli({"rebooted", first});
  CHECK(nothing.exit_code == 1);
  CHECK_THAT(nothing.err, Catch::Contains("has no rule waiting for a reboot"));

  // Batch 2 opts in: the held rule is remediated, and since its fix takes effect at the next boot it
  // ends reboot_pending with the change staged on the target.
  nlohmann::json second_submitted = d.CliJson({"submit", "-t", "lab", "-d", "ssg-ubuntu2004-ds.xml", "-p", "stig", "-r",
                                               kRebootRule, "--allow-disruptive", "--json"});
  const std::string second = second_submitted["id"];
  CHECK(second_submitted["allow_disruptive"] == true);
  batch = d.WaitUntilEnded(second);
  REQUIRE(batch.state() == temper::v1::BATCH_STATE_COMPLETED);
  const temper::v1::BatchRule staged = RulesByShortName(batch)[kRebootRule];
  CHECK(staged.state() == temper::v1::RULE_STATE_REBOOT_PENDING);
  CHECK(staged.after_verdict() == "pass");
  CHECK_THAT(staged.detail(), Catch::Contains("temper rebooted " + second));
  CHECK(std::filesystem::exists(d.TargetPath(kRebootRuleFile)));
  CHECK(batch.counts().fixed() == 0);
  CHECK(batch.counts().reboot_pending() == 1);

  // The operator rebooted the host: the staged rule is verified again and becomes fixed.
  ProcessResult rebooted = d.Cli({"rebooted", second, "--note", "rebooted by the e2e test"});
  INFO(rebooted.out << rebooted.err);
  REQUIRE(rebooted.exit_code == 0);
  CHECK_THAT(rebooted.out,
             Catch::Contains("reboot confirmed") && Catch::Contains("reboot.verified: 1 fixed, 0 escalated"));
  batch = d.GetBatch(second);
  const temper::v1::BatchRule verified = RulesByShortName(batch)[kRebootRule];
  CHECK(verified.state() == temper::v1::RULE_STATE_FIXED);
  CHECK_THAT(verified.detail(), Catch::Contains("verified after the reboot"));
  CHECK(batch.reboot_confirmed_seq() == 0);
  events = d.WatchedEvents(second);
  const nlohmann::json* confirmed = FindEvent(events, "reboot.confirmed");
  REQUIRE(confirmed != nullptr);
  CHECK(confirmed->at("data")["note"] == "rebooted by the e2e test");
  const nlohmann::json* fixed = FindEvent(events, "rule.fixed", kRebootRule);
  REQUIRE(fixed != nullptr);
  CHECK(fixed->at("data")["after_reboot"] == true);
  CHECK(FindEvent(events, "reboot.verified") != nullptr);
  // Once verified there is nothing left to confirm.
  ProcessResult again = d.Cli({"rebooted", second});
  CHECK(again.exit_code == 1);
  CHECK_THAT(again.err, Catch::Contains("has no rule waiting for a reboot"));
}

}  // namespace
}  // namespace temper::testing
