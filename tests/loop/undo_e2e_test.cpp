// Undo, plan-only, fixpoint and idempotence as users meet them: temperd with a rootfs target and the
// scripted model server, batches submitted and reverted with the temper CLI, real OpenSCAP deciding,
// and the target's tree compared byte for byte (owners, modes, xattrs, content hashes) with
// tests/stig/tree_listing.h.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "loop/loop_harness.h"
#include "stig/tree_listing.h"

namespace temper::testing {
namespace {

using scripted::ModelScript;
using scripted::ScriptedModelServer;
using Listing = std::map<std::string, std::string>;

// Every batch of these cases allows two attempts a rule.
constexpr uint32_t kMaxAttempts = 2;

// Submits through `temper submit`, waits, and REQUIREs the batch completed.
// Serial: the revert cases rely on fixes landing in batch order, which attempts at once (temperd's
// default) do not keep.
temper::v1::Batch Run(const LoopDaemon& lab, const std::vector<std::string>& rules, bool plan_only = false) {
  temper::v1::Batch b = lab.WaitUntilEnded(lab.SubmitWithCli(
      {.rules = rules, .max_attempts = kMaxAttempts, .plan_only = plan_only, .parallel_attempts = 1}));
  INFO(lab.daemon->Log());
  REQUIRE(b.state() == temper::v1::BATCH_STATE_COMPLETED);
  return b;
}

std::vector<std::string> EventTypes(const LoopDaemon& lab, const std::string& id) {
  std::vector<std::string> types;
  for (const nlohmann::json& e : lab.WatchedEvents(id)) types.push_back(e["type"].get<std::string>());
  return types;
}

// How many rules of the batch's CKLB checklist (`temper export`) have each status.
std::map<std::string, int> CklbStatuses(const LoopDaemon& lab, const std::string& id) {
  const std::string file = lab.dir / ("batch-" + id + ".cklb");
  ProcessResult r = lab.Cli({"export", id, "--format", "cklb", "-o", file});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  std::map<std::string, int> out;
  const nlohmann::json cklb = nlohmann::json::parse(ReadFileOrEmpty(file));
  for (const auto& stig : cklb["stigs"]) {
    for (const auto& rule : stig["rules"]) ++out[rule["status"].get<std::string>()];
  }
  return out;
}

// The target "lab" as temperd sees it now.
Listing Tree(const LoopDaemon& lab) { return stig::testing::TreeListing(lab.TargetPath("")); }

// The target's snapshot layers, by id (on its disk image, mounted while temperd runs).
std::set<std::string> Layers(const LoopDaemon& lab) {
  std::set<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(lab.dir / "lab/state/disk/layers")) {
    out.insert(e.path().filename().string());
  }
  return out;
}

// Path by path, so that a failure names what differs.
void CheckSameTree(const Listing& want, const Listing& got) {
  for (const auto& [path, desc] : want) {
    INFO(path);
    auto it = got.find(path);
    REQUIRE(it != got.end());
    CHECK(it->second == desc);
  }
  for (const auto& [path, desc] : got) {
    INFO(path);
    CHECK(want.count(path) == 1);
  }
}

// The paths whose listing differs between two trees (present in either).
std::set<std::string> Diff(const Listing& a, const Listing& b) {
  std::set<std::string> out;
  for (const auto& [path, desc] : a) {
    auto it = b.find(path);
    if (it == b.end() || it->second != desc) out.insert(path);
  }
  for (const auto& [path, desc] : b) {
    if (!a.count(path)) out.insert(path);
  }
  return out;
}

TEST_CASE(
    "plan-only leaves the root byte-identical, a second run changes nothing, revert RULE takes out that "
    "rule's fix only, and revert BATCH restores the exact tree") {
  auto server = ScriptedModelServer::Start(ModelScript{});
  REQUIRE(server.ok());
  LoopDaemon lab(**server);
  const Listing base = stig::testing::TreeListing(SharedRoot());
  const std::vector<std::string> rules = {"accounts_tmout", "banner_etc_issue_net", "no_duplicate_uids"};

  // Plan only: the loop fixes what it can, reports it, and reverts everything.
  temper::v1::Batch plan = Run(lab, rules, /*plan_only=*/true);
  CHECK(plan.plan_only());
  CHECK(RulesByShortName(plan)["accounts_tmout"].state() == temper::v1::RULE_STATE_FIXED);
  CHECK(RulesByShortName(plan)["banner_etc_issue_net"].state() == temper::v1::RULE_STATE_FIXED);
  CHECK(RulesByShortName(plan)["no_duplicate_uids"].state() == temper::v1::RULE_STATE_ALREADY_PASSING);
  nlohmann::json plan_report = lab.ReportJson(plan.id());
  CHECK(plan_report["plan_only"] == true);
  CHECK(plan_report["summary"]["fixed"] == 2);
  size_t kept = 0;
  for (const auto& r : plan_report["rules"]) {
    for (const auto& a : r["history"]) kept += a["outcome"] == "kept" ? 1 : 0;
  }
  CHECK(kept == 2);
  CheckSameTree(base, Tree(lab));
  CHECK(Layers(lab).empty());
  auto plan_events = EventTypes(lab, plan.id());
  CHECK(std::count(plan_events.begin(), plan_events.end(), "batch.plan_reverted") == 1);
  // Its checklist states the target as it is (what it was before), not what the plan reached.
  CHECK(CklbStatuses(lab, plan.id()) == std::map<std::string, int>{{"open", 2}, {"not_a_finding", 1}});
  ProcessResult refused = lab.Cli({"revert", plan.id()});
  CHECK(refused.exit_code == 1);
  CHECK_THAT(refused.err, Catch::Contains("plan-only"));

  // Killed after a kept fix, the plan resumes at the next start and still leaves nothing behind.
  std::string killed = lab.SubmitWithCli({.rules = rules, .max_attempts = kMaxAttempts, .plan_only = true});
  lab.WaitForEvent(killed, "rule.fixed");
  CHECK(lab.daemon->Stop(SIGKILL) == 128 + SIGKILL);
  REQUIRE(lab.daemon->Start().ok());
  temper::v1::Batch resumed = lab.WaitUntilEnded(killed);
  CHECK(resumed.state() == temper::v1::BATCH_STATE_COMPLETED);
  CHECK(resumed.counts().fixed() == 2);
  auto resumed_events = EventTypes(lab, killed);
  CHECK(std::count(resumed_events.begin(), resumed_events.end(), "batch.resumed") == 1);
  CHECK(std::count(resumed_events.begin(), resumed_events.end(), "batch.plan_reverted") == 1);
  CheckSameTree(base, Tree(lab));
  CHECK(Layers(lab).empty());

  // For real: both fixes stay.
  temper::v1::Batch real = Run(lab, rules);
  CHECK(real.counts().fixed() == 2);
  CHECK(real.has_start_snapshot());
  CHECK(lab.TargetHas("/etc/profile.d/tmout.sh"));
  const Listing fixed = Tree(lab);
  const std::set<std::string> layers = Layers(lab);
  CHECK(layers.size() == 2);  // one per kept fix: nothing changed before the batch started
  CHECK(CklbStatuses(lab, real.id()) == std::map<std::string, int>{{"not_a_finding", 3}});

  // The same batch again on the now compliant target: no attempt, no layer, not a byte changed.
  temper::v1::Batch again = Run(lab, rules);
  CHECK(again.counts().already_passing() == 3);
  nlohmann::json again_report = lab.ReportJson(again.id());
  CHECK(again_report["summary"]["attempts"] == 0);
  CHECK(again_report["fixpoint"].size() == 1);
  CHECK(Layers(lab) == layers);
  CheckSameTree(fixed, Tree(lab));

  // One rule's fix out of the middle: exactly its paths go back to the base, the rest stays.
  ProcessResult rule = lab.Cli({"revert", real.id(), "accounts_tmout"});
  INFO(rule.err);
  REQUIRE(rule.exit_code == 0);
  CHECK_THAT(rule.out, Catch::Contains("reverted rule accounts_tmout"));
  const Listing after_rule = Tree(lab);
  std::set<std::string> changed_back = Diff(fixed, after_rule);
  CHECK(changed_back.count("etc/profile.d/tmout.sh") == 1);
  for (const std::string& path : changed_back) {
    INFO(path);
    CHECK(base.count(path) == after_rule.count(path));  // back to the base's: present or absent
    if (base.count(path)) CHECK(base.at(path) == after_rule.at(path));
  }
  CHECK(after_rule.at("etc/issue.net") == fixed.at("etc/issue.net"));
  CHECK(after_rule.at("etc/issue.net") != base.at("etc/issue.net"));
  const temper::v1::Batch stored = lab.GetBatch(real.id());
  CHECK(RulesByShortName(stored)["accounts_tmout"].state() == temper::v1::RULE_STATE_REVERTED);
  CHECK(RulesByShortName(stored)["accounts_tmout"].after_verdict() == "fail");
  CHECK(RulesByShortName(stored)["banner_etc_issue_net"].state() == temper::v1::RULE_STATE_FIXED);
  ProcessResult twice = lab.Cli({"revert", real.id(), "accounts_tmout"});
  CHECK(twice.exit_code == 1);
  CHECK_THAT(twice.err, Catch::Contains("already reverted"));

  // The whole batch (the idempotent run after it kept nothing, so nothing is in the way).
  ProcessResult whole = lab.Cli({"revert", real.id(), "--json"});
  INFO(whole.err);
  REQUIRE(whole.exit_code == 0);
  nlohmann::json response = nlohmann::json::parse(whole.out);
  CHECK(response["reverted_rules"].size() == 1);  // banner; accounts_tmout was already out
  CheckSameTree(base, Tree(lab));
  CHECK(Layers(lab).empty());
  nlohmann::json reverted_report = lab.ReportJson(real.id());
  CHECK(reverted_report["summary"]["reverted"] == 2);
  CHECK_FALSE(reverted_report["reverted_at"].is_null());
  auto events = EventTypes(lab, real.id());
  for (const char* t : {"rule.revert_started", "rule.reverted", "batch.revert_started", "batch.reverted"}) {
    CHECK(std::count(events.begin(), events.end(), t) == 1);
  }
  ProcessResult again_whole = lab.Cli({"revert", real.id()});
  CHECK(again_whole.exit_code == 1);
  CHECK_THAT(again_whole.err, Catch::Contains("already reverted"));
}

TEST_CASE(
    "revert goes in reverse order: a rule whose file a later fix changed, and a batch under a later "
    "batch's fixes, are refused with what is in the way, and no revert while a batch runs") {
  auto server = ScriptedModelServer::Start(ModelScript{});
  REQUIRE(server.ok());
  LoopDaemon lab(**server);
  const Listing base = stig::testing::TreeListing(SharedRoot());

  // Both rules edit /etc/login.defs, in batch order.
  temper::v1::Batch both = Run(lab, {"accounts_minimum_age_login_defs", "accounts_maximum_age_login_defs"});
  REQUIRE(both.counts().fixed() == 2);
  ProcessResult first = lab.Cli({"revert", both.id(), "accounts_minimum_age_login_defs"});
  CHECK(first.exit_code == 1);
  CHECK_THAT(first.err, Catch::Contains("cannot be reverted alone") &&
                            Catch::Contains("rule accounts_maximum_age_login_defs of batch " + both.id()) &&
                            Catch::Contains("/etc/login.defs") &&
                            Catch::Contains("temper revert " + both.id() + " accounts_maximum_age_login_defs"));
  REQUIRE(lab.Cli({"revert", both.id(), "accounts_maximum_age_login_defs"}).exit_code == 0);
  REQUIRE(lab.Cli({"revert", both.id(), "accounts_minimum_age_login_defs"}).exit_code == 0);
  CheckSameTree(base, Tree(lab));

  // A batch with a later batch's fix on top is refused; newest first works.
  temper::v1::Batch lower = Run(lab, {"accounts_tmout"});
  temper::v1::Batch upper = Run(lab, {"banner_etc_issue_net"});
  REQUIRE(lower.counts().fixed() == 1);
  REQUIRE(upper.counts().fixed() == 1);
  ProcessResult under = lab.Cli({"revert", lower.id()});
  CHECK(under.exit_code == 1);
  CHECK_THAT(under.err, Catch::Contains("later changes on target lab lie on top of it") &&
                            Catch::Contains("rule banner_etc_issue_net of batch " + upper.id()) &&
                            Catch::Contains("revert batch " + upper.id() + " first"));

  // While a batch runs on the target, nothing is reverted there.
  std::string running = lab.SubmitWithCli({.rules = {"accounts_umask_etc_login_defs"}, .max_attempts = kMaxAttempts});
  lab.WaitForEvent(running, "batch.started");
  ProcessResult busy = lab.Cli({"revert", upper.id()});
  CHECK(busy.exit_code == 1);
  CHECK_THAT(busy.err, Catch::Contains("batch " + running + " is running on target lab"));
  CHECK(lab.WaitUntilEnded(running).counts().fixed() == 1);

  REQUIRE(lab.Cli({"revert", running}).exit_code == 0);
  REQUIRE(lab.Cli({"revert", upper.id()}).exit_code == 0);
  REQUIRE(lab.Cli({"revert", lower.id()}).exit_code == 0);
  CheckSameTree(base, Tree(lab));
}

// What a fix that installs a package does to a rule gated on that package (oscap#1880, #8487): the
// scripted Worker's first attempt at accounts_tmout also registers gdm3 in dpkg's status, so the
// gdm rule that was not applicable now applies, and fails. Verification cannot see it (the rule
// was not passing), the fixpoint's rescan does.
constexpr const char* kInstallGdm =
    "printf '\\nPackage: gdm3\\nStatus: install ok installed\\nPriority: optional\\nSection: gnome\\n"
    "Installed-Size: 1\\nMaintainer: temper tests <tests@example.org>\\nArchitecture: amd64\\nVersion: 43.0-3\\n"
    "Description: stand-in entry of the fixpoint test\\n' >> /var/lib/dpkg/status";

TEST_CASE(
    "fixpoint: a fix that makes a not-applicable rule apply is caught by the rescan, re-queued and fixed in "
    "a second pass, and with a bound of one pass it is escalated instead") {
  ModelScript script;
  // Attempts 1 and 2: the Worker numbers its attempt after those it is shown, and the second batch
  // below shows it the first batch's.
  script.rules["accounts_tmout"].regress_first = 2;
  script.regress_command = kInstallGdm;
  auto server = ScriptedModelServer::Start(script);
  REQUIRE(server.ok());
  LoopDaemon lab(**server);
  const std::vector<std::string> rules = {"accounts_tmout", "dconf_gnome_login_banner_text"};

  temper::v1::Batch b = Run(lab, rules);
  auto states = RulesByShortName(b);
  CHECK(states["accounts_tmout"].state() == temper::v1::RULE_STATE_FIXED);
  const temper::v1::BatchRule& gated = states["dconf_gnome_login_banner_text"];
  CHECK(gated.before_verdict() == "notapplicable");
  CHECK(gated.state() == temper::v1::RULE_STATE_FIXED);
  CHECK(gated.after_verdict() == "pass");
  CHECK(gated.attempts() == 1);

  nlohmann::json report = lab.ReportJson(b.id());
  REQUIRE(report["fixpoint"].size() == 2);
  const nlohmann::json& pass1 = report["fixpoint"][0];
  const std::string gated_id = std::string(kSsgRulePrefix) + "dconf_gnome_login_banner_text";
  CHECK(pass1["final"] == false);
  CHECK(pass1["attempts"] == 1);
  CHECK(pass1["fixed"] == 1);
  CHECK(pass1["failing"] == 1);
  CHECK(pass1["flipped"] == nlohmann::json::array({gated_id}));
  CHECK(pass1["requeued"] == nlohmann::json::array({gated_id}));
  const nlohmann::json& pass2 = report["fixpoint"][1];
  CHECK(pass2["final"] == true);
  CHECK(pass2["attempts"] == 1);
  CHECK(pass2["fixed"] == 1);
  CHECK(pass2["passing"] == 2);
  CHECK(pass2["flipped"].empty());
  auto events = EventTypes(lab, b.id());
  CHECK(std::count(events.begin(), events.end(), "fixpoint.pass") == 2);
  CHECK(std::count(events.begin(), events.end(), "rule.requeued") == 1);
  ProcessResult text = lab.Cli({"report", b.id()});
  CHECK_THAT(text.out,
             Catch::Contains("fixpoint    2 passes: #1 1 attempt (1 kept)") && Catch::Contains("re-queued 1"));

  // Back to the base, then the same batch with a bound of one pass: the flip is escalated.
  ProcessResult reverted = lab.Cli({"revert", b.id()});
  INFO(reverted.err);
  REQUIRE(reverted.exit_code == 0);
  CHECK_FALSE(lab.TargetHas("/etc/profile.d/tmout.sh"));
  REQUIRE(lab.daemon->Stop() == 0);
  {
    std::ofstream config(lab.daemon->config_path(), std::ios::app);
    config << "loop:\n  fixpoint_passes: 1\n";
  }
  REQUIRE(lab.daemon->Start().ok());
  temper::v1::Batch bounded = Run(lab, rules);
  const temper::v1::BatchRule escalated = RulesByShortName(bounded)["dconf_gnome_login_banner_text"];
  CHECK(escalated.state() == temper::v1::RULE_STATE_ESCALATED);
  CHECK(escalated.attempts() == 0);
  CHECK_THAT(escalated.detail(), Catch::Contains("still flipping after 1 fixpoint pass (the bound)") &&
                                     Catch::Contains("notapplicable before, fail at the rescan"));
  nlohmann::json bounded_report = lab.ReportJson(bounded.id());
  REQUIRE(bounded_report["fixpoint"].size() == 1);
  CHECK(bounded_report["fixpoint"][0]["escalated"] == nlohmann::json::array({gated_id}));
  CHECK(bounded_report["fixpoint"][0]["final"] == true);
}

}  // namespace
}  // namespace temper::testing
