// The loop as users run it: temperd with a rootfs target and models.yaml pointing at the scripted
// model server, batches submitted over the real socket, real OpenSCAP deciding every attempt.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include "orchestrator/daemon_process.h"
#include "scripted_model/scripted_answers.h"
#include "scripted_model/scripted_model_server.h"

namespace temper::testing {
namespace {

using scripted::ModelScript;
using scripted::ScriptedModelServer;

constexpr const char* kPrefix = "xccdf_org.ssgproject.content_rule_";

std::string SharedRoot() { return std::string(TEMPER_BINARY_DIR) + "/stig-rootfs/root"; }

std::string ModelsYaml(const ScriptedModelServer& server) {
  return fmt::format(R"(endpoints:
  scripted: {{type: openai, base_url: "{}", model: temper-scripted, timeout: 60s, max_retries: 2}}
roles:
  architect: {{endpoint: scripted, context_tokens: 32768, max_output_tokens: 2048}}
  worker: {{endpoint: scripted, context_tokens: 32768, max_output_tokens: 2048}}
  reflector: {{endpoint: scripted, context_tokens: 32768, max_output_tokens: 1024}}
)",
                     server.base_url());
}

// A daemon whose targets ("lab", and `more` others) are fresh overlays over the stig suite's shared
// root.
struct LoopDaemon {
  explicit LoopDaemon(const ScriptedModelServer& server, const std::vector<std::string>& more = {}) {
    REQUIRE(std::filesystem::is_directory(SharedRoot()));
    DaemonOptions options;
    for (const std::string& name : more) options.more_targets.push_back({name, MakeTargetDir(name)});
    options.models_yaml = ModelsYaml(server);
    options.content_dir = "/usr/share/xml/scap/ssg/content";
    options.lab_path = MakeTargetDir("lab");
    daemon = std::make_unique<DaemonProcess>(dir, options);
    REQUIRE(daemon->Start().ok());
  }
  std::string MakeTargetDir(const std::string& name) const {
    std::filesystem::create_directories(dir / name);
    std::filesystem::create_directory_symlink(SharedRoot(), dir / (name + "/root"));
    return dir / name;
  }
  // What a target looks like now (the overlay is mounted while temperd runs).
  bool TargetHas(const std::string& path, const std::string& target = "lab") const {
    return std::filesystem::exists(dir / (target + "/state/merged" + path));
  }

  TempDir dir;
  std::unique_ptr<DaemonProcess> daemon;
};

std::unique_ptr<grpc::ClientContext> Ctx() {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  return ctx;
}

std::string Submit(const DaemonProcess& daemon, const std::vector<std::string>& rules, uint32_t max_attempts,
                   const std::string& target = "lab", bool allow_disruptive = false) {
  temper::v1::SubmitBatchRequest req;
  req.set_name("e2e");
  req.set_target(target);
  req.set_datastream("ssg-ubuntu2004-ds.xml");
  req.set_profile("stig");
  for (const std::string& r : rules) req.add_rule_ids(r);
  req.mutable_budgets()->set_max_attempts(max_attempts);
  req.set_allow_disruptive(allow_disruptive);
  temper::v1::Batch batch;
  grpc::Status s = daemon.Stub()->SubmitBatch(Ctx().get(), req, &batch);
  REQUIRE(s.ok());
  return batch.id();
}

std::vector<temper::v1::JournalEvent> Events(const DaemonProcess& daemon, const std::string& batch) {
  temper::v1::WatchJournalRequest req;
  req.set_batch_id(batch);
  req.set_follow(false);
  auto ctx = Ctx();
  auto stub = daemon.Stub();
  auto reader = stub->WatchJournal(ctx.get(), req);
  std::vector<temper::v1::JournalEvent> events;
  temper::v1::JournalEvent e;
  while (reader->Read(&e)) events.push_back(e);
  REQUIRE(reader->Finish().ok());
  return events;
}

temper::v1::Batch WaitUntilEnded(const DaemonProcess& daemon, const std::string& batch) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(20);
  temper::v1::GetBatchRequest req;
  req.set_batch_id(batch);
  temper::v1::Batch b;
  while (std::chrono::steady_clock::now() < deadline) {
    REQUIRE(daemon.Stub()->GetBatch(Ctx().get(), req, &b).ok());
    if (b.state() == temper::v1::BATCH_STATE_COMPLETED || b.state() == temper::v1::BATCH_STATE_FAILED ||
        b.state() == temper::v1::BATCH_STATE_CANCELLED) {
      return b;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  FAIL("batch " << batch << " did not end in 20 minutes:\n" << daemon.Log());
  return b;
}

// Waits for the first event of `type` (after `after_seq`) and returns its seq.
uint64_t WaitForEvent(const DaemonProcess& daemon, const std::string& batch, const std::string& type,
                      uint64_t after_seq = 0) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(10);
  while (std::chrono::steady_clock::now() < deadline) {
    for (const auto& e : Events(daemon, batch)) {
      if (e.type() == type && e.seq() > after_seq) return e.seq();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  FAIL("no " << type << " event:\n" << daemon.Log());
  return 0;
}

std::map<std::string, temper::v1::BatchRule> RulesByShortName(const temper::v1::Batch& b) {
  std::map<std::string, temper::v1::BatchRule> out;
  for (const auto& r : b.rules()) out[r.rule_id().substr(std::string(kPrefix).size())] = r;
  return out;
}

temper::v1::BatchReport Report(const DaemonProcess& daemon, const std::string& batch) {
  temper::v1::GetBatchReportRequest req;
  req.set_batch_id(batch);
  temper::v1::BatchReport report;
  REQUIRE(daemon.Stub()->GetBatchReport(Ctx().get(), req, &report).ok());
  return report;
}

void CheckJournalIsOrdered(const std::vector<temper::v1::JournalEvent>& events) {
  std::set<uint64_t> seen;
  for (size_t i = 0; i < events.size(); ++i) {
    CHECK(seen.insert(events[i].seq()).second);
    if (i > 0) CHECK(events[i].seq() > events[i - 1].seq());
  }
}

TEST_CASE("a batch fixes rules, reverts a wrong fix and retries with the lesson, catches a regression, "
          "escalates what it cannot fix and skips what the Architect skips") {
  ModelScript script;
  script.rules["banner_etc_issue_net"].wrong_first = 1;
  script.rules["accounts_umask_etc_login_defs"].regress_first = 1;
  script.rules["accounts_maximum_age_login_defs"].skip = true;
  auto server = ScriptedModelServer::Start(script);
  REQUIRE(server.ok());
  LoopDaemon loop(**server);
  const DaemonProcess& daemon = *loop.daemon;

  std::string id = Submit(daemon,
                          {"accounts_tmout", "banner_etc_issue_net", "accounts_umask_etc_login_defs",
                           "is_fips_mode_enabled", "accounts_maximum_age_login_defs", "no_duplicate_uids"},
                          3, "lab", /*allow_disruptive=*/true);  // FIPS mode is disruptive (stig/rule_risk.h)
  temper::v1::Batch batch = WaitUntilEnded(daemon, id);
  INFO(daemon.Log());
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
  CHECK_FALSE(loop.TargetHas(scripted::WrongNotePath(std::string(kPrefix) + "banner_etc_issue_net")));
  // A fix that broke the login shell: caught by the health checks, reverted, then fixed cleanly.
  CHECK(rules["accounts_umask_etc_login_defs"].state() == temper::v1::RULE_STATE_FIXED);
  CHECK(rules["accounts_umask_etc_login_defs"].attempts() == 2);
  CHECK_FALSE(loop.TargetHas("/etc/profile.d/zz-temper-regress-accounts_umask_etc_login_defs.sh"));
  // SSG has no fix: the Worker cannot change the verdict, and the Architect escalates.
  CHECK(rules["is_fips_mode_enabled"].state() == temper::v1::RULE_STATE_ESCALATED);
  CHECK_FALSE(rules["is_fips_mode_enabled"].detail().empty());
  CHECK(rules["accounts_maximum_age_login_defs"].state() == temper::v1::RULE_STATE_SKIPPED);

  // What the roles were shown: the lesson of attempt 1 reaches the Worker's second attempt.
  std::string marker = scripted::LessonMarker(std::string(kPrefix) + "banner_etc_issue_net", 1);
  bool lesson_reached_worker = false;
  for (const auto& r : (*server)->requests()) {
    if (r.role == "worker" && r.attempt == 2 && r.rule_id == std::string(kPrefix) + "banner_etc_issue_net" &&
        r.messages.dump().find(marker) != std::string::npos) {
      lesson_reached_worker = true;
    }
  }
  CHECK(lesson_reached_worker);

  // The report: every attempt with its outcome, lessons, and OpenSCAP's results file.
  temper::v1::BatchReport report = Report(daemon, id);
  std::map<std::string, std::vector<std::string>> outcomes;
  for (const auto& a : report.attempts()) outcomes[a.rule_id().substr(std::string(kPrefix).size())].push_back(a.outcome());
  CHECK(outcomes["banner_etc_issue_net"] == std::vector<std::string>{"reverted", "kept"});
  CHECK(outcomes["accounts_umask_etc_login_defs"] == std::vector<std::string>{"unhealthy", "kept"});
  CHECK(report.lessons_size() >= 2);
  REQUIRE_FALSE(report.results_dir().empty());
  CHECK(std::filesystem::exists(report.results_dir() + "/results.xml"));
  CHECK(std::filesystem::exists(report.results_dir() + "/arf.xml"));

  // The same report through the CLI, as people read it.
  ProcessResult cli = RunProcess({TemperBinary(), "--socket", daemon.socket_path(), "report", id, "--format", "json",
                                  "--results-to", loop.dir / "results"});
  REQUIRE(cli.exit_code == 0);
  nlohmann::json summary = nlohmann::json::parse(cli.out)["summary"];
  CHECK(summary["fixed"] == 3);
  CHECK(summary["failed_before"] == 5);
  CHECK(std::filesystem::exists(loop.dir / "results/results.xml"));

  // The journal: ordered, and every step is there.
  auto events = Events(daemon, id);
  CheckJournalIsOrdered(events);
  std::multiset<std::string> types;
  for (const auto& e : events) types.insert(e.type());
  for (const char* t : {"batch.started", "evaluation.before", "architect.pick", "architect.skip", "rule.started",
                        "attempt.started", "worker.model_call", "worker.tool_call", "attempt.kept",
                        "attempt.reverted", "reflector.lesson", "rule.fixed", "rule.escalated", "batch.completed"}) {
    CHECK(types.count(t) > 0);
  }
  CHECK(types.count("rule.fixed") == 3);
}

TEST_CASE("kill -9 at several points of a batch: each restart reverts the target and the batch completes "
          "with no attempt or event lost or duplicated") {
  ModelScript script;
  script.rules["banner_etc_issue_net"].wrong_first = 1;
  script.rules["accounts_tmout"].wrong_first = 1;
  auto server = ScriptedModelServer::Start(script);
  REQUIRE(server.ok());
  LoopDaemon loop(**server);
  DaemonProcess& daemon = *loop.daemon;
  std::string id = Submit(daemon, {"banner_etc_issue_net", "accounts_tmout", "accounts_umask_etc_login_defs"}, 4);

  // Before the first evaluation, after a pick, mid-Worker (a tool has run on the target), right
  // after a revert, and right after a kept fix.
  uint64_t after = 0;
  const std::vector<std::string> kill_points = {"batch.started", "architect.pick", "worker.tool_call",
                                                "attempt.reverted", "rule.fixed"};
  for (const std::string& kill_at : kill_points) {
    after = WaitForEvent(daemon, id, kill_at, after);
    CHECK(daemon.Stop(SIGKILL) == 128 + SIGKILL);
    REQUIRE(daemon.Start().ok());
    // The next kill point counts from the resumed run, not from events the killed run got to.
    after = WaitForEvent(daemon, id, "batch.resumed", after);
  }
  temper::v1::Batch batch = WaitUntilEnded(daemon, id);
  INFO(daemon.Log());
  REQUIRE(batch.state() == temper::v1::BATCH_STATE_COMPLETED);
  for (const auto& [name, rule] : RulesByShortName(batch)) {
    INFO(name);
    CHECK(rule.state() == temper::v1::RULE_STATE_FIXED);
    CHECK(rule.after_verdict() == "pass");
  }

  auto events = Events(daemon, id);
  CheckJournalIsOrdered(events);
  size_t resumed = 0, evaluated = 0;
  for (const auto& e : events) {
    if (e.type() == "batch.resumed") ++resumed;
    if (e.type() == "attempt.kept" || e.type() == "attempt.reverted") ++evaluated;
  }
  CHECK(resumed == kill_points.size());
  // Every attempt that was evaluated is recorded once, and none that was not.
  temper::v1::BatchReport report = Report(daemon, id);
  CHECK(static_cast<size_t>(report.attempts_size()) == evaluated);
  std::set<std::pair<std::string, uint32_t>> numbers;
  for (const auto& a : report.attempts()) CHECK(numbers.insert({a.rule_id(), a.number()}).second);
  // The wrong attempts' traces were reverted away.
  CHECK_FALSE(loop.TargetHas(scripted::WrongNotePath(std::string(kPrefix) + "banner_etc_issue_net")));
  CHECK_FALSE(loop.TargetHas(scripted::WrongNotePath(std::string(kPrefix) + "accounts_tmout")));
}

TEST_CASE("a model endpoint that stays down fails the batch with its error, the next batch runs") {
  ModelScript script;
  script.faults.fail_first = 3;  // the first pick and both of the client's retries
  script.faults.fail_status = 500;
  auto server = ScriptedModelServer::Start(script);
  REQUIRE(server.ok());
  LoopDaemon loop(**server);
  const DaemonProcess& daemon = *loop.daemon;
  std::string first = Submit(daemon, {"accounts_tmout"}, 2);
  temper::v1::Batch failed = WaitUntilEnded(daemon, first);
  INFO(daemon.Log());
  CHECK(failed.state() == temper::v1::BATCH_STATE_FAILED);
  CHECK_THAT(failed.error(), Catch::Contains("architect") && Catch::Contains("500"));
  CHECK(RulesByShortName(failed)["accounts_tmout"].state() == temper::v1::RULE_STATE_PENDING);
  // The endpoint is back: the next batch on the target runs normally.
  std::string second = Submit(daemon, {"accounts_tmout"}, 2);
  CHECK(WaitUntilEnded(daemon, second).counts().fixed() == 1);
}

TEST_CASE("batches on two targets run at the same time, each on its own target") {
  ModelScript script;
  script.rules["banner_etc_issue_net"].wrong_first = 1;
  auto server = ScriptedModelServer::Start(script);
  REQUIRE(server.ok());
  LoopDaemon loop(**server, {"lab2"});
  const DaemonProcess& daemon = *loop.daemon;
  std::string first = Submit(daemon, {"banner_etc_issue_net", "accounts_tmout"}, 3, "lab");
  std::string second = Submit(daemon, {"banner_etc_issue_net", "accounts_tmout"}, 3, "lab2");
  temper::v1::Batch a = WaitUntilEnded(daemon, first), b = WaitUntilEnded(daemon, second);
  INFO(daemon.Log());
  REQUIRE(a.state() == temper::v1::BATCH_STATE_COMPLETED);
  REQUIRE(b.state() == temper::v1::BATCH_STATE_COMPLETED);
  CHECK(a.counts().fixed() == 2);
  CHECK(b.counts().fixed() == 2);
  // Overlapping in time: each batch started before the other completed.
  auto time_of = [&](const std::string& batch, const std::string& type) {
    for (const auto& e : Events(daemon, batch)) {
      if (e.type() == type) return e.seq();
    }
    return uint64_t{0};
  };
  CHECK(time_of(first, "batch.started") < time_of(second, "batch.completed"));
  CHECK(time_of(second, "batch.started") < time_of(first, "batch.completed"));
  // Each target holds its own fixes, and no trace of a wrong attempt.
  for (const char* t : {"lab", "lab2"}) {
    CHECK(loop.TargetHas("/etc/profile.d/tmout.sh", t));
    CHECK_FALSE(loop.TargetHas(scripted::WrongNotePath(std::string(kPrefix) + "banner_etc_issue_net"), t));
  }
}

}  // namespace
}  // namespace temper::testing
