// The loop as users run it: temperd with a rootfs target and models.yaml pointing at the scripted
// model server, batches submitted over the real socket, real OpenSCAP deciding every attempt.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "loop/loop_harness.h"
#include "orchestrator/config/parallel_attempts.h"
#include "scripted_model/scripted_answers.h"

namespace temper::testing {
namespace {

using scripted::ModelScript;
using scripted::ScriptedModelServer;

// The batch completed, and every rule of it ends fixed and passing.
void CheckCompletedWithEveryRuleFixed(const temper::v1::Batch& batch) {
  REQUIRE(batch.state() == temper::v1::BATCH_STATE_COMPLETED);
  for (const auto& [name, rule] : RulesByShortName(batch)) {
    INFO(name);
    CHECK(rule.state() == temper::v1::RULE_STATE_FIXED);
    CHECK(rule.after_verdict() == "pass");
  }
}

void CheckJournalIsOrdered(const std::vector<temper::v1::JournalEvent>& events) {
  std::set<uint64_t> seen;
  for (size_t i = 0; i < events.size(); ++i) {
    CHECK(seen.insert(events[i].seq()).second);
    if (i > 0) CHECK(events[i].seq() > events[i - 1].seq());
  }
}

// Kills temperd at the first event of each type in turn, from where the last resumed run began,
// and starts it again.
void KillAndResumeAt(LoopDaemon& loop, const std::string& id, const std::vector<std::string>& kill_points) {
  uint64_t after = 0;
  for (const std::string& kill_at : kill_points) {
    after = loop.WaitForEvent(id, kill_at, after);
    CHECK(loop.daemon->Stop(SIGKILL) == 128 + SIGKILL);
    Status restarted = loop.daemon->Start();
    INFO(restarted.ToString());
    REQUIRE(restarted.ok());
    // The next kill point counts from the resumed run, not from events the killed run got to.
    after = loop.WaitForEvent(id, "batch.resumed", after);
  }
}

// Every attempt the journal shows evaluated is in the report once, none that was not, and each
// rule's attempt numbers are distinct.
void CheckAttemptsRecordedOnce(const LoopDaemon& loop, const std::string& id,
                               const std::vector<temper::v1::JournalEvent>& events) {
  size_t evaluated = 0;
  for (const auto& e : events) evaluated += e.type() == "attempt.kept" || e.type() == "attempt.reverted";
  temper::v1::BatchReport report = loop.Report(id);
  CHECK(static_cast<size_t>(report.attempts_size()) == evaluated);
  std::set<std::pair<std::string, uint32_t>> numbers;
  for (const auto& a : report.attempts()) CHECK(numbers.insert({a.rule_id(), a.number()}).second);
}

TEST_CASE(
    "a batch fixes rules, reverts a wrong fix and retries with the lesson, catches a regression, "
    "escalates what it cannot fix and skips what the Architect skips") {
  ModelScript script;
  script.rules["banner_etc_issue_net"].wrong_first = 1;
  script.rules["accounts_umask_etc_login_defs"].regress_first = 1;
  script.rules["accounts_maximum_age_login_defs"].skip = true;
  auto server = ScriptedModelServer::Start(script);
  REQUIRE(server.ok());
  LoopDaemon loop(**server);

  std::string id =
      loop.Submit({.rules = {"accounts_tmout", "banner_etc_issue_net", "accounts_umask_etc_login_defs",
                             "is_fips_mode_enabled", "accounts_maximum_age_login_defs", "no_duplicate_uids"},
                   .max_attempts = 3,
                   .allow_disruptive = true});  // FIPS mode is disruptive (stig/scap/rule_risk.h)
  temper::v1::Batch batch = loop.WaitUntilEnded(id);
  INFO(loop.daemon->Log());
  REQUIRE(batch.state() == temper::v1::BATCH_STATE_COMPLETED);
  auto rules = RulesByShortName(batch);

  // Fixed at once.
  CHECK(rules["accounts_tmout"].state() == temper::v1::RULE_STATE_FIXED);
  CHECK(rules["accounts_tmout"].attempts() == 1);
  CHECK(rules["accounts_tmout"].before_verdict() == "fail");
  CHECK(rules["accounts_tmout"].after_verdict() == "pass");
  // Passing before the batch: nothing to do.
  CHECK(rules["no_duplicate_uids"].state() == temper::v1::RULE_STATE_ALREADY_PASSING);
  CHECK(rules["no_duplicate_uids"].attempts() == 0);
  // A wrong first attempt, reverted; the second, shown the Reflector's lesson, fixes it.
  CHECK(rules["banner_etc_issue_net"].state() == temper::v1::RULE_STATE_FIXED);
  CHECK(rules["banner_etc_issue_net"].attempts() == 2);
  CHECK_FALSE(loop.TargetHas(scripted::WrongNotePath(std::string(kSsgRulePrefix) + "banner_etc_issue_net")));
  // A fix that broke the login shell: caught by the health checks, reverted, then fixed cleanly.
  CHECK(rules["accounts_umask_etc_login_defs"].state() == temper::v1::RULE_STATE_FIXED);
  CHECK(rules["accounts_umask_etc_login_defs"].attempts() == 2);
  CHECK_FALSE(loop.TargetHas("/etc/profile.d/zz-temper-regress-accounts_umask_etc_login_defs.sh"));
  // SSG has no fix: the Worker cannot change the verdict, and the Architect escalates.
  CHECK(rules["is_fips_mode_enabled"].state() == temper::v1::RULE_STATE_ESCALATED);
  CHECK_FALSE(rules["is_fips_mode_enabled"].detail().empty());
  CHECK(rules["accounts_maximum_age_login_defs"].state() == temper::v1::RULE_STATE_SKIPPED);

  // What the roles were shown: the lesson of attempt 1 reaches the Worker's second attempt.
  std::string marker = scripted::LessonMarker(std::string(kSsgRulePrefix) + "banner_etc_issue_net", 1);
  bool lesson_reached_worker = false;
  for (const auto& r : (*server)->requests()) {
    if (r.role == "worker" && r.attempt == 2 && r.rule_id == std::string(kSsgRulePrefix) + "banner_etc_issue_net" &&
        r.messages.dump().find(marker) != std::string::npos) {
      lesson_reached_worker = true;
    }
  }
  CHECK(lesson_reached_worker);

  // The report: every attempt with its outcome, lessons, and OpenSCAP's results file.
  temper::v1::BatchReport report = loop.Report(id);
  std::map<std::string, std::vector<std::string>> outcomes;
  for (const auto& a : report.attempts()) outcomes[ShortRuleName(a.rule_id())].push_back(a.outcome());
  CHECK(outcomes["banner_etc_issue_net"] == std::vector<std::string>{"reverted", "kept"});
  CHECK(outcomes["accounts_umask_etc_login_defs"] == std::vector<std::string>{"unhealthy", "kept"});
  CHECK(report.lessons_size() >= 2);
  REQUIRE_FALSE(report.results_dir().empty());
  CHECK(std::filesystem::exists(report.results_dir() + "/results.xml"));
  CHECK(std::filesystem::exists(report.results_dir() + "/arf.xml"));

  // The same report through the CLI, as people read it.
  ProcessResult cli = loop.Cli({"report", id, "--format", "json", "--results-to", loop.dir / "results"});
  REQUIRE(cli.exit_code == 0);
  nlohmann::json summary = nlohmann::json::parse(cli.out)["summary"];
  CHECK(summary["fixed"] == 3);
  CHECK(summary["failed_before"] == 5);
  CHECK(std::filesystem::exists(loop.dir / "results/results.xml"));

  // The journal: ordered, and every step is there.
  auto events = loop.JournalEvents(id);
  CheckJournalIsOrdered(events);
  std::multiset<std::string> types;
  for (const auto& e : events) types.insert(e.type());
  for (const char* t : {"batch.started", "evaluation.before", "architect.pick", "architect.skip", "rule.started",
                        "attempt.started", "worker.model_call", "worker.tool_call", "attempt.kept", "attempt.reverted",
                        "reflector.lesson", "rule.fixed", "rule.escalated", "batch.completed"}) {
    CHECK(types.count(t) > 0);
  }
  CHECK(types.count("rule.fixed") == 3);

  // The fixes ran as the rules' reference fixes by name: the journal names each (rule, content,
  // the script's sha256), and the report's commands of each kept attempt say which one ran.
  std::set<std::string> fixed_by_reference;
  for (const auto& e : events) {
    if (e.type() != "worker.tool_call") continue;
    const nlohmann::json data = nlohmann::json::parse(e.data_json());
    if (data.value("tool", "") != "apply_reference_fix") continue;
    INFO(e.data_json());
    CHECK(data["reference_fix"]["rule"] == e.rule_id());
    CHECK_THAT(data["reference_fix"]["source"].get<std::string>(),
               Catch::StartsWith("ssg-ubuntu2004-ds.xml, benchmark xccdf_org.ssgproject.content_benchmark_"));
    CHECK(data["reference_fix"]["sha256"].get<std::string>().size() == 64);
    fixed_by_reference.insert(ShortRuleName(e.rule_id()));
  }
  CHECK(fixed_by_reference ==
        std::set<std::string>{"accounts_tmout", "banner_etc_issue_net", "accounts_umask_etc_login_defs"});
  for (const auto& a : report.attempts()) {
    if (a.outcome() != "kept") continue;
    INFO(a.rule_id());
    bool named = false;
    for (const std::string& c : a.commands()) {
      named = named || c.starts_with("reference fix " + a.rule_id() + " from ssg-ubuntu2004-ds.xml");
    }
    CHECK(named);
  }

  // The report's usage per role is the journal's model calls, summed.
  std::map<std::string, std::pair<uint64_t, uint64_t>> journalled;  // role -> calls, prompt tokens
  for (const auto& e : events) {
    if (e.role().empty() || (e.usage().prompt_tokens() == 0 && e.usage().completion_tokens() == 0)) continue;
    ++journalled[e.role()].first;
    journalled[e.role()].second += e.usage().prompt_tokens();
  }
  std::map<std::string, std::pair<uint64_t, uint64_t>> reported;
  for (const temper::v1::RoleUsage& r : report.role_usage())
    reported[r.role()] = {r.calls(), r.usage().prompt_tokens()};
  CHECK(reported == journalled);
  CHECK(reported.count("architect") == 1);
  CHECK(reported.count("worker") == 1);
  CHECK(reported.count("reflector") == 1);
}

TEST_CASE(
    "kill -9 at several points of a batch: each restart reverts the target and the batch completes "
    "with no attempt or event lost or duplicated") {
  ModelScript script;
  script.rules["banner_etc_issue_net"].wrong_first = 1;
  script.rules["accounts_tmout"].wrong_first = 1;
  auto server = ScriptedModelServer::Start(script);
  REQUIRE(server.ok());
  LoopDaemon loop(**server);
  std::string id = loop.Submit(
      {.rules = {"banner_etc_issue_net", "accounts_tmout", "accounts_umask_etc_login_defs"}, .max_attempts = 4});

  // Before the first evaluation, after a pick, mid-Worker (a tool has run on the target), right
  // after a revert, and right after a kept fix.
  const std::vector<std::string> kill_points = {"batch.started", "architect.pick", "worker.tool_call",
                                                "attempt.reverted", "rule.fixed"};
  KillAndResumeAt(loop, id, kill_points);
  temper::v1::Batch batch = loop.WaitUntilEnded(id);
  INFO(loop.daemon->Log());
  CheckCompletedWithEveryRuleFixed(batch);

  auto events = loop.JournalEvents(id);
  CheckJournalIsOrdered(events);
  size_t resumed = 0;
  for (const auto& e : events) resumed += e.type() == "batch.resumed";
  CHECK(resumed == kill_points.size());
  CheckAttemptsRecordedOnce(loop, id, events);
  // The wrong attempts' traces were reverted away.
  CHECK_FALSE(loop.TargetHas(scripted::WrongNotePath(std::string(kSsgRulePrefix) + "banner_etc_issue_net")));
  CHECK_FALSE(loop.TargetHas(scripted::WrongNotePath(std::string(kSsgRulePrefix) + "accounts_tmout")));
}

// loop.parallel_attempts: the rules of a batch on forks at once, a slot each, so they start from
// the same snapshot. The two login.defs rules edit one file at once (different lines); banner and
// tmout, scripted here, both also append to one shared file: each later commit merges line by line.
constexpr const char* kParallelYaml = "loop:\n  parallel_attempts: 4\n";
const std::vector<std::string> kParallelRules = {"banner_etc_issue_net", "accounts_tmout",
                                                 "accounts_umask_etc_login_defs", "accounts_maximum_age_login_defs"};
constexpr const char* kSharedFile = "/etc/temper-shared.conf";

// Each rule's span in the journal: its first attempt.started to its last attempt's end.
std::map<std::string, std::pair<uint64_t, uint64_t>> AttemptSpans(const std::vector<temper::v1::JournalEvent>& events) {
  std::map<std::string, std::pair<uint64_t, uint64_t>> spans;
  for (const auto& e : events) {
    if (e.type().rfind("attempt.", 0) != 0) continue;
    const std::string rule = e.rule_id().substr(e.rule_id().find("_rule_") + 6);
    if (e.type() == "attempt.started" && !spans.count(rule)) spans[rule] = {e.seq(), e.seq()};
    if (e.type() == "attempt.kept" || e.type() == "attempt.reverted" || e.type() == "attempt.conflict") {
      spans[rule].second = e.seq();
    }
  }
  return spans;
}

bool Overlap(std::pair<uint64_t, uint64_t> a, std::pair<uint64_t, uint64_t> b) {
  return a.first < b.second && b.first < a.second;
}

TEST_CASE("parallel attempts: rules on forks at once, commits to one file merged, every fix on the target") {
  ModelScript script;
  script.regress_command = std::string("echo shared >> ") + kSharedFile;  // harmless: both are kept
  script.rules["banner_etc_issue_net"].regress_first = 1;
  script.rules["accounts_tmout"].regress_first = 1;
  script.rules["accounts_umask_etc_login_defs"].wrong_first = 1;
  auto server = ScriptedModelServer::Start(script);
  REQUIRE(server.ok());
  LoopDaemon loop(**server, {.extra_yaml = kParallelYaml});
  std::string id = loop.Submit({.rules = kParallelRules, .max_attempts = 3});
  temper::v1::Batch batch = loop.WaitUntilEnded(id);
  INFO(loop.daemon->Log());
  CheckCompletedWithEveryRuleFixed(batch);
  auto events = loop.JournalEvents(id);
  CheckJournalIsOrdered(events);
  const auto spans = AttemptSpans(events);
  REQUIRE(spans.size() == 4);
  // All four ran at once, the two that edit /etc/login.defs too.
  CHECK(Overlap(spans.at("banner_etc_issue_net"), spans.at("accounts_tmout")));
  CHECK(Overlap(spans.at("accounts_umask_etc_login_defs"), spans.at("accounts_maximum_age_login_defs")));
  std::set<std::string> forks;
  for (const auto& e : events) {
    const nlohmann::json data = nlohmann::json::parse(e.data_json());
    if (e.type() == "attempt.started") {
      REQUIRE(data.contains("fork"));
      CHECK(forks.insert(data["fork"].get<std::string>()).second);  // a fresh fork per attempt
    }
  }
  // Both added the same line there: merged, it is there once (and both login.defs fixes are in:
  // every rule passes at the end).
  std::ifstream shared(loop.TargetPath(kSharedFile));
  std::string text((std::istreambuf_iterator<char>(shared)), std::istreambuf_iterator<char>());
  CHECK(text == "shared\n");
  CHECK(loop.TargetHas("/etc/profile.d/tmout.sh"));
  CHECK_FALSE(loop.TargetHas(scripted::WrongNotePath(std::string(kSsgRulePrefix) + "accounts_umask_etc_login_defs")));
  CheckAttemptsRecordedOnce(loop, id, events);
}

// Two forks rewrite the same lines of /etc/motd differently: the one committed second cannot be
// merged, so its attempt is made again on a fresh fork (uncounted) and then lands.
TEST_CASE("parallel attempts: a commit that cannot be merged is made again on a fresh fork") {
  ModelScript script;
  script.regress_command = "echo \"motd of $(date +%s%N)\" > /etc/motd";  // a line of its own per fork
  script.rules["banner_etc_issue_net"].regress_first = 1;
  script.rules["accounts_tmout"].regress_first = 1;
  auto server = ScriptedModelServer::Start(script);
  REQUIRE(server.ok());
  LoopDaemon loop(**server, {.extra_yaml = kParallelYaml});
  std::string id = loop.Submit({.rules = {"banner_etc_issue_net", "accounts_tmout"}, .max_attempts = 2});
  temper::v1::Batch batch = loop.WaitUntilEnded(id);
  INFO(loop.daemon->Log());
  CheckCompletedWithEveryRuleFixed(batch);
  auto events = loop.JournalEvents(id);
  CheckJournalIsOrdered(events);
  size_t clashes = 0;
  for (const auto& e : events) {
    if (e.type() != "attempt.conflict") continue;
    const nlohmann::json data = nlohmann::json::parse(e.data_json());
    CHECK_THAT(data["detail"].get<std::string>(), Catch::Contains("cannot be merged: /etc/motd"));
    ++clashes;
  }
  CHECK(clashes >= 1);
  for (const auto& [name, rule] : RulesByShortName(batch)) CHECK(rule.attempts() == 1);  // remakes do not count
  CheckAttemptsRecordedOnce(loop, id, events);
}

// The batch asks for its attempts at once (temper submit --parallel-attempts), whatever temperd's
// loop.parallel_attempts would choose.
TEST_CASE("parallel attempts: kill -9 with forks in flight loses no kept fix, and the batch completes") {
  ModelScript script;
  script.rules["banner_etc_issue_net"].wrong_first = 1;
  script.rules["accounts_tmout"].wrong_first = 1;
  auto server = ScriptedModelServer::Start(script);
  REQUIRE(server.ok());
  LoopDaemon loop(**server);
  std::string id = loop.SubmitWithCli({.rules = kParallelRules, .max_attempts = 4, .parallel_attempts = 4});
  CHECK(loop.ReportJson(id)["parallel_attempts"] == 4);
  // Forks being worked on, right after a rejected fork, right after a commit.
  KillAndResumeAt(loop, id, {"worker.tool_call", "attempt.reverted", "rule.fixed"});
  temper::v1::Batch batch = loop.WaitUntilEnded(id);
  INFO(loop.daemon->Log());
  REQUIRE(batch.state() == temper::v1::BATCH_STATE_COMPLETED);
  for (const auto& [name, rule] : RulesByShortName(batch)) {
    INFO(name);
    CHECK(rule.state() == temper::v1::RULE_STATE_FIXED);
  }
  auto events = loop.JournalEvents(id);
  CheckJournalIsOrdered(events);
  CheckAttemptsRecordedOnce(loop, id, events);
  CHECK(loop.TargetHas("/etc/profile.d/tmout.sh"));
  CHECK_FALSE(loop.TargetHas(scripted::WrongNotePath(std::string(kSsgRulePrefix) + "accounts_tmout")));
}

TEST_CASE("a model endpoint that stays down fails the batch with its error, the next batch runs") {
  ModelScript script;
  script.faults.fail_first = 3;  // the first pick and both of the client's retries
  script.faults.fail_status = 500;
  auto server = ScriptedModelServer::Start(script);
  REQUIRE(server.ok());
  LoopDaemon loop(**server);
  std::string first = loop.Submit({.rules = {"accounts_tmout"}, .max_attempts = 2});
  temper::v1::Batch failed = loop.WaitUntilEnded(first);
  INFO(loop.daemon->Log());
  CHECK(failed.state() == temper::v1::BATCH_STATE_FAILED);
  CHECK_THAT(failed.error(), Catch::Contains("architect") && Catch::Contains("500"));
  CHECK(RulesByShortName(failed)["accounts_tmout"].state() == temper::v1::RULE_STATE_PENDING);
  // The endpoint is back: the next batch on the target runs normally.
  std::string second = loop.Submit({.rules = {"accounts_tmout"}, .max_attempts = 2});
  CHECK(loop.WaitUntilEnded(second).counts().fixed() == 1);
}

TEST_CASE("batches on two targets run at the same time, each on its own target") {
  ModelScript script;
  script.rules["banner_etc_issue_net"].wrong_first = 1;
  auto server = ScriptedModelServer::Start(script);
  REQUIRE(server.ok());
  LoopDaemon loop(**server, {.more_targets = {"lab2"}});
  std::string first =
      loop.Submit({.rules = {"banner_etc_issue_net", "accounts_tmout"}, .max_attempts = 3, .target = "lab"});
  std::string second =
      loop.Submit({.rules = {"banner_etc_issue_net", "accounts_tmout"}, .max_attempts = 3, .target = "lab2"});
  temper::v1::Batch a = loop.WaitUntilEnded(first), b = loop.WaitUntilEnded(second);
  INFO(loop.daemon->Log());
  REQUIRE(a.state() == temper::v1::BATCH_STATE_COMPLETED);
  REQUIRE(b.state() == temper::v1::BATCH_STATE_COMPLETED);
  CHECK(a.counts().fixed() == 2);
  CHECK(b.counts().fixed() == 2);
  // Overlapping in time: each batch started before the other completed.
  auto time_of = [&](const std::string& batch, const std::string& type) {
    for (const auto& e : loop.JournalEvents(batch)) {
      if (e.type() == type) return e.seq();
    }
    return uint64_t{0};
  };
  CHECK(time_of(first, "batch.started") < time_of(second, "batch.completed"));
  CHECK(time_of(second, "batch.started") < time_of(first, "batch.completed"));
  // Each target holds its own fixes, and no trace of a wrong attempt.
  for (const char* t : {"lab", "lab2"}) {
    CHECK(loop.TargetHas("/etc/profile.d/tmout.sh", t));
    CHECK_FALSE(loop.TargetHas(scripted::WrongNotePath(std::string(kSsgRulePrefix) + "banner_etc_issue_net"), t));
  }
}

// Serial and auto give every rule the same outcome: a package rule, audit syscall rules of which
// four share SSG's one combined chown line (three chmod's, two the deletion line), an audit path
// watch and file rules, run once serially on "lab" and once at auto on "lab2", a fresh target over
// the same root.
// auto on a machine that would give 1 (one CPU) is replaced by an explicit 4, so that the second
// batch always runs attempts at once.
const std::vector<std::string> kSerialVsAutoRules = {
    "package_aide_installed",
    "audit_rules_dac_modification_chown",
    "audit_rules_dac_modification_fchown",
    "audit_rules_dac_modification_fchownat",
    "audit_rules_dac_modification_lchown",
    "audit_rules_dac_modification_chmod",
    "audit_rules_dac_modification_fchmod",
    "audit_rules_dac_modification_fchmodat",
    "audit_rules_file_deletion_events_unlink",
    "audit_rules_file_deletion_events_rename",
    "audit_rules_privileged_commands_sudo",
    "banner_etc_issue_net",
    "accounts_tmout",
    "accounts_umask_etc_login_defs",
    "accounts_maximum_age_login_defs",
    "file_permissions_etc_shadow",
};

// The batch.started event's data.
nlohmann::json StartedData(const std::vector<temper::v1::JournalEvent>& events) {
  for (const auto& e : events) {
    if (e.type() == "batch.started") return nlohmann::json::parse(e.data_json());
  }
  FAIL("no batch.started event");
  return {};
}

TEST_CASE("serial and auto parallel attempts give every rule of a batch the same outcome") {
  ModelScript script;
  script.rules["banner_etc_issue_net"].wrong_first = 1;
  script.rules["accounts_tmout"].regress_first = 1;
  auto server = ScriptedModelServer::Start(script);
  REQUIRE(server.ok());
  LoopDaemon loop(**server, {.more_targets = {"lab2"}});
  const uint32_t at_once = CpusAvailable().count >= 2 ? 0 : 4;  // 0: temperd's auto
  // The two batches run at the same time, each on its own target.
  const std::string serial =
      loop.Submit({.rules = kSerialVsAutoRules,
                   .max_attempts = 3,
                   .target = "lab",
                   .allow_disruptive = true,  // the audit rules take effect after a reboot: held otherwise
                   .parallel_attempts = 1});
  const std::string parallel = loop.Submit({.rules = kSerialVsAutoRules,
                                            .max_attempts = 3,
                                            .target = "lab2",
                                            .allow_disruptive = true,
                                            .parallel_attempts = at_once});
  const temper::v1::Batch one = loop.WaitUntilEnded(serial);
  const temper::v1::Batch many = loop.WaitUntilEnded(parallel);
  INFO(loop.daemon->Log());
  REQUIRE(one.state() == temper::v1::BATCH_STATE_COMPLETED);
  REQUIRE(many.state() == temper::v1::BATCH_STATE_COMPLETED);

  const auto serial_events = loop.JournalEvents(serial);
  const auto parallel_events = loop.JournalEvents(parallel);
  CHECK(StartedData(serial_events)["parallel_attempts"] == 1);
  const nlohmann::json started = StartedData(parallel_events);
  INFO(started.dump());
  CHECK(started["parallel_attempts"].get<uint32_t>() >= 2);
  if (at_once == 0) CHECK_THAT(started["parallel_attempts_why"].get<std::string>(), Catch::StartsWith("auto: "));

  // Rule by rule: the same state and the same verdict after.
  const auto serial_rules = RulesByShortName(one);
  const auto parallel_rules = RulesByShortName(many);
  REQUIRE(serial_rules.size() == kSerialVsAutoRules.size());
  REQUIRE(parallel_rules.size() == kSerialVsAutoRules.size());
  size_t fixed = 0;
  for (const auto& [name, rule] : serial_rules) {
    INFO(name << ": serial " << rule.state() << " " << rule.after_verdict() << " (" << rule.detail() << "), auto "
              << parallel_rules.at(name).state() << " " << parallel_rules.at(name).after_verdict() << " ("
              << parallel_rules.at(name).detail() << ")");
    CHECK(parallel_rules.at(name).state() == rule.state());
    CHECK(parallel_rules.at(name).after_verdict() == rule.after_verdict());
    fixed += rule.state() == temper::v1::RULE_STATE_FIXED || rule.state() == temper::v1::RULE_STATE_REBOOT_PENDING;
  }
  CHECK(fixed >= kSerialVsAutoRules.size() / 2);  // a comparison of outcomes, most of them fixes

  // The rules whose fixes rewrite combined audit syscall lines never ran at once (StartOrder), and
  // the batch.completed event counts the remakes.
  const auto spans = AttemptSpans(parallel_events);
  std::vector<std::string> grouping;
  for (const std::string& name : kSerialVsAutoRules) {
    if (name.starts_with("audit_rules_dac_modification_") || name.starts_with("audit_rules_file_deletion_events_"))
      grouping.push_back(name);
  }
  REQUIRE(grouping.size() == 9);
  for (size_t i = 0; i < grouping.size(); ++i) {
    for (size_t j = i + 1; j < grouping.size(); ++j) {
      INFO(grouping[i] << " and " << grouping[j]);
      REQUIRE((spans.count(grouping[i]) && spans.count(grouping[j])));  // each made an attempt
      CHECK_FALSE(Overlap(spans.at(grouping[i]), spans.at(grouping[j])));
    }
  }
  nlohmann::json completed;
  for (const auto& e : parallel_events) {
    if (e.type() == "batch.completed") completed = nlohmann::json::parse(e.data_json());
  }
  INFO(completed.dump());
  REQUIRE(completed.contains("remakes"));
  size_t conflicts = 0;
  std::string remade;
  for (const auto& e : parallel_events) {
    if (e.type() != "attempt.conflict") continue;
    ++conflicts;
    remade += " " + ShortRuleName(e.rule_id()) + " (" + nlohmann::json::parse(e.data_json()).value("detail", "") + ")";
  }
  CHECK(completed["remakes"]["total"] == conflicts);
  WARN("auto ran " << started["parallel_attempts"] << " attempts at once ("
                   << started.value("parallel_attempts_why", "") << "); remakes " << completed["remakes"].dump()
                   << (remade.empty() ? "" : ":" + remade));
}

}  // namespace
}  // namespace temper::testing
