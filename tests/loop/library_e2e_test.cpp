// Proven fixes end to end (issue 50): temperd records every kept fix whole in its library; a later
// batch on another target over the same root takes its fixes from there before any model call,
// learns when one no longer fits, and an apply batch replays a batch's kept fixes with no model at
// all. The real temperd, rootfs targets over the stig suite's shared root, real OpenSCAP and the
// scripted model, as loop_e2e_test.cpp runs them.
#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "loop/loop_harness.h"
#include "scripted_model/scripted_answers.h"

namespace temper::testing {
namespace {

using scripted::ModelScript;
using scripted::ScriptedModelServer;

const std::vector<std::string> kRules = {"accounts_tmout", "banner_etc_issue_net", "accounts_umask_etc_login_defs"};

std::unique_ptr<grpc::ClientContext> CallContext() {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  return ctx;
}

// Every rule's final state and verdicts, by short name: what two batches must agree on.
std::map<std::string, std::string> Verdicts(const temper::v1::Batch& batch) {
  std::map<std::string, std::string> out;
  for (const auto& [name, rule] : RulesByShortName(batch)) {
    out[name] = fmt::format("{} {} -> {}", temper::v1::RuleState_Name(rule.state()), rule.before_verdict(),
                            rule.after_verdict());
  }
  return out;
}

// The model calls of a batch, per role, from its report.
std::map<std::string, uint64_t> ModelCalls(const temper::v1::BatchReport& report) {
  std::map<std::string, uint64_t> out;
  for (const temper::v1::RoleUsage& r : report.role_usage()) out[r.role()] = r.calls();
  return out;
}

// The library's entries, by short rule name: the newest of each rule, or the one batch
// `source_batch` recorded.
std::map<std::string, temper::v1::Fix> LibraryEntries(const LoopDaemon& loop, const std::string& source_batch = "") {
  temper::v1::ListFixesRequest request;
  request.set_include_retired(true);
  temper::v1::ListFixesResponse response;
  grpc::Status s = loop.daemon->Stub()->ListFixes(CallContext().get(), request, &response);
  INFO(s.error_message());
  REQUIRE(s.ok());
  std::map<std::string, temper::v1::Fix> out;
  for (const temper::v1::Fix& f : response.fixes()) {
    if (source_batch.empty() || f.source_batch_id() == source_batch) out.emplace(ShortRuleName(f.rule_id()), f);
  }
  return out;
}

// Batch `source`'s kept fixes, as the model found them on "lab", for the cases below.
std::string FixOnLab(const LoopDaemon& loop) {
  std::string id = loop.Submit({.rules = kRules, .max_attempts = 3});
  temper::v1::Batch batch = loop.WaitUntilEnded(id);
  INFO(loop.daemon->Log());
  REQUIRE(batch.state() == temper::v1::BATCH_STATE_COMPLETED);
  for (const auto& [name, rule] : RulesByShortName(batch)) {
    INFO(name);
    REQUIRE(rule.state() == temper::v1::RULE_STATE_FIXED);
  }
  // Each kept fix is in the library, whole, with what it cost the model.
  std::map<std::string, temper::v1::Fix> entries = LibraryEntries(loop);
  for (const std::string& rule : kRules) {
    INFO(rule);
    REQUIRE(entries.count(rule) == 1);
    CHECK(entries[rule].source_batch_id() == id);
    CHECK(entries[rule].source_target() == "lab");
    CHECK(entries[rule].model_tokens() > 0);
    CHECK(entries[rule].uses() == 0);
  }
  // And the journal says it captured each.
  for (const auto& e : loop.JournalEvents(id)) {
    if (e.type() != "attempt.kept") continue;
    INFO(e.data_json());
    CHECK_THAT(nlohmann::json::parse(e.data_json()).value("fix_bundle", ""), !Catch::StartsWith("none"));
  }
  return id;
}

TEST_CASE("a second target over the same root takes every fix from the library with no model call") {
  auto server = ScriptedModelServer::Start(ModelScript{});
  REQUIRE(server.ok());
  LoopDaemon loop(**server, {.more_targets = {"b"}});
  const std::string first = FixOnLab(loop);
  const size_t requests_before = (*server)->requests().size();

  const std::string second = loop.Submit({.rules = kRules, .max_attempts = 3, .target = "b"});
  temper::v1::Batch batch = loop.WaitUntilEnded(second);
  INFO(loop.daemon->Log());
  REQUIRE(batch.state() == temper::v1::BATCH_STATE_COMPLETED);
  CHECK(Verdicts(batch) == Verdicts(loop.GetBatch(first)));

  // No model call at all: not the Architect's pick, not the Worker, not the Reflector.
  temper::v1::BatchReport report = loop.Report(second);
  CHECK(ModelCalls(report).empty());
  CHECK((*server)->requests().size() == requests_before);
  for (const auto& a : report.attempts()) {
    INFO(a.rule_id() << ": " << a.approach());
    CHECK_THAT(a.approach(),
               Catch::StartsWith("proven fix #") && Catch::EndsWith("from the library (batch " + first + ")"));
    CHECK(a.outcome() == "kept");
    CHECK(a.usage().prompt_tokens() + a.usage().completion_tokens() == 0);
  }
  CHECK(report.attempts_size() == 3);
  CHECK(report.library().tried() == 3);
  CHECK(report.library().kept() == 3);

  // Each entry was used once and saved what the model had spent finding it.
  uint64_t saved = 0;
  for (const auto& [rule, fix] : LibraryEntries(loop)) {
    INFO(rule);
    CHECK(fix.uses() == 1);
    CHECK(fix.failures() == 0);
    CHECK(fix.tokens_saved() == fix.model_tokens());
    CHECK(fix.tokens_saved() > 0);
    saved += fix.tokens_saved();
  }
  CHECK(report.library().tokens_saved() == saved);

  // batch.completed says so, and `temper report` shows it.
  bool completed = false;
  for (const auto& e : loop.JournalEvents(second)) {
    if (e.type() != "batch.completed") continue;
    completed = true;
    const nlohmann::json library = nlohmann::json::parse(e.data_json())["library"];
    CHECK(library["tried"] == 3);
    CHECK(library["kept"] == 3);
    CHECK(library["tokens_saved"] == saved);
  }
  CHECK(completed);
  ProcessResult text = loop.Cli({"report", second});
  INFO(text.err);
  REQUIRE(text.exit_code == 0);
  CHECK_THAT(text.out, Catch::Contains("3 of 3 rules fixed from proven fixes"));
  CHECK(loop.ReportJson(second)["library"]["kept"] == 3);
}

TEST_CASE("a proven fix that no longer fits is refused, its failure becomes a lesson, and the model fixes the rule") {
  auto server = ScriptedModelServer::Start(ModelScript{});
  REQUIRE(server.ok());
  LoopDaemon loop(**server, {.more_targets = {"b"}});
  const std::string first = FixOnLab(loop);

  // Target b's banner drifted from the root's: the line the fix replaces says something else
  // there. (A batch that changes nothing opens b first, so that its tree is mounted to write in.)
  REQUIRE(loop.WaitUntilEnded(loop.Submit({.rules = {"no_duplicate_uids"}, .target = "b"})).state() ==
          temper::v1::BATCH_STATE_COMPLETED);
  {
    std::ofstream drifted(loop.TargetPath("/etc/issue.net", "b"), std::ios::trunc);
    drifted << "Property of the lab: authorised use only\n";
    drifted.close();
    REQUIRE_FALSE(drifted.fail());
  }
  const std::string second = loop.Submit({.rules = {"banner_etc_issue_net"}, .max_attempts = 2, .target = "b"});
  temper::v1::Batch batch = loop.WaitUntilEnded(second);
  INFO(loop.daemon->Log());
  REQUIRE(batch.state() == temper::v1::BATCH_STATE_COMPLETED);
  const temper::v1::BatchRule rule = RulesByShortName(batch)["banner_etc_issue_net"];
  CHECK(rule.state() == temper::v1::RULE_STATE_FIXED);
  CHECK(rule.after_verdict() == "pass");

  // Attempt 1 replayed the library's fix and was refused, naming the file; attempt 2 was the
  // model's and was kept. The refused replay did not count against the budget of 2.
  temper::v1::BatchReport report = loop.Report(second);
  REQUIRE(report.attempts_size() == 2);
  const temper::v1::Attempt& replay = report.attempts(0);
  CHECK_THAT(replay.approach(), Catch::StartsWith("proven fix #"));
  CHECK(replay.outcome() != "kept");
  CHECK_THAT(replay.evidence(), Catch::Contains("/etc/issue.net"));
  CHECK(report.attempts(1).outcome() == "kept");
  CHECK_THAT(report.attempts(1).approach(), !Catch::StartsWith("proven fix"));
  CHECK(report.library().tried() == 1);
  CHECK(report.library().kept() == 0);

  // The lesson is stored, and the model's attempt was shown it.
  bool stored = false;
  for (const temper::v1::Lesson& l : report.lessons()) {
    stored = stored || l.text().starts_with("the library's proven fix #");
  }
  CHECK(stored);
  bool shown = false;
  for (const auto& r : (*server)->requests()) {
    if (r.role == "worker" && r.messages.dump().find("the library's proven fix #") != std::string::npos) shown = true;
  }
  CHECK(shown);

  // The entry counts the failure and says why; the model's fix on b is the rule's newest entry.
  temper::v1::Fix fix = LibraryEntries(loop, first)["banner_etc_issue_net"];
  CHECK(fix.failures() == 1);
  CHECK_THAT(fix.last_failure(), Catch::Contains("/etc/issue.net"));
  CHECK(fix.uses() == 0);
  CHECK(LibraryEntries(loop, second)["banner_etc_issue_net"].source_attempt_id() ==
        std::to_string(report.attempts(1).id()));
}

TEST_CASE("an apply batch replays another batch's kept fixes on a fresh target with no model call") {
  auto server = ScriptedModelServer::Start(ModelScript{});
  REQUIRE(server.ok());
  LoopDaemon loop(**server, {.more_targets = {"c"}});
  const std::string first = FixOnLab(loop);
  const size_t requests_before = (*server)->requests().size();

  temper::v1::ApplyBatchRequest request;
  request.set_batch_id(first);
  request.add_targets("c");
  temper::v1::ApplyBatchResponse response;
  grpc::Status s = loop.daemon->Stub()->ApplyBatch(CallContext().get(), request, &response);
  INFO(s.error_message());
  REQUIRE(s.ok());
  REQUIRE(response.batches_size() == 1);
  const std::string applied = response.batches(0).id();
  temper::v1::Batch batch = loop.WaitUntilEnded(applied);
  INFO(loop.daemon->Log());
  REQUIRE(batch.state() == temper::v1::BATCH_STATE_COMPLETED);
  CHECK(batch.target() == "c");
  CHECK(Verdicts(batch) == Verdicts(loop.GetBatch(first)));

  temper::v1::BatchReport report = loop.Report(applied);
  CHECK(ModelCalls(report).empty());
  CHECK((*server)->requests().size() == requests_before);
  // One attempt a rule, each the replay of the source's kept fix: its commands are the replay's
  // steps on the files the fix changed, not the Worker's.
  REQUIRE(report.attempts_size() == 3);
  for (const auto& a : report.attempts()) {
    INFO(a.rule_id() << ": " << a.approach());
    CHECK_THAT(a.approach(), Catch::StartsWith("proven fix of batch " + first + " (attempt "));
    CHECK(a.outcome() == "kept");
    CHECK(a.number() == 1);
    CHECK_FALSE(a.commands().empty());
    for (const std::string& c : a.commands()) CHECK_THAT(c, !Catch::StartsWith("reference fix "));
  }
  for (const auto& a : report.attempts()) {
    if (ShortRuleName(a.rule_id()) != "banner_etc_issue_net") continue;
    bool names_banner = false;
    for (const std::string& c : a.commands())
      names_banner = names_banner || c.find("/etc/issue.net") != std::string::npos;
    CHECK(names_banner);
  }
  // The target holds the fix, as the source's does.
  std::ifstream lab(loop.TargetPath("/etc/issue.net")), c(loop.TargetPath("/etc/issue.net", "c"));
  CHECK(std::string(std::istreambuf_iterator<char>(lab), {}) == std::string(std::istreambuf_iterator<char>(c), {}));
}

TEST_CASE("without a models.yaml temperd runs apply batches, and other batches wait saying why") {
  auto server = ScriptedModelServer::Start(ModelScript{});
  REQUIRE(server.ok());
  LoopDaemon loop(**server, {.more_targets = {"c"}});
  const std::string first = FixOnLab(loop);

  // temperd again, its `models:` line gone.
  REQUIRE(loop.daemon->Stop() == 0);
  const std::string config_path = loop.dir / "temperd.yaml";
  std::string config;
  {
    std::ifstream in(config_path);
    for (std::string line; std::getline(in, line);) {
      if (!line.starts_with("models:")) config += line + "\n";
    }
  }
  std::ofstream(config_path, std::ios::trunc) << config;
  Status restarted = loop.daemon->Start();
  INFO(restarted.ToString());
  REQUIRE(restarted.ok());
  const size_t requests_before = (*server)->requests().size();

  temper::v1::ApplyBatchRequest request;
  request.set_batch_id(first);
  request.add_targets("c");
  temper::v1::ApplyBatchResponse response;
  grpc::Status s = loop.daemon->Stub()->ApplyBatch(CallContext().get(), request, &response);
  INFO(s.error_message());
  REQUIRE(s.ok());
  REQUIRE(response.batches_size() == 1);
  temper::v1::Batch applied = loop.WaitUntilEnded(response.batches(0).id());
  INFO(loop.daemon->Log());
  REQUIRE(applied.state() == temper::v1::BATCH_STATE_COMPLETED);
  CHECK(Verdicts(applied) == Verdicts(loop.GetBatch(first)));
  CHECK((*server)->requests().size() == requests_before);

  // A batch that needs the model stays queued, and says why.
  const std::string waiting = loop.Submit({.rules = {"accounts_tmout"}, .target = "c"});
  temper::v1::Batch queued = loop.GetBatch(waiting);
  CHECK(queued.state() == temper::v1::BATCH_STATE_QUEUED);
  CHECK_THAT(queued.waiting_reason(), Catch::StartsWith("no model is configured for the roles"));
}

}  // namespace
}  // namespace temper::testing

namespace temper::testing {
namespace {

// The first and last seq of batch `id`'s run: its batch.started and its batch.completed.
std::pair<uint64_t, uint64_t> RunSpan(const LoopDaemon& loop, const std::string& id) {
  uint64_t started = 0, completed = 0;
  for (const temper::v1::JournalEvent& e : loop.JournalEvents(id)) {
    if (e.type() == "batch.started" && started == 0) started = e.seq();
    if (e.type() == "batch.completed") completed = e.seq();
  }
  return {started, completed};
}

TEST_CASE("temper apply runs at most at_once of its batches at a time and refuses what it cannot apply") {
  auto server = ScriptedModelServer::Start(ModelScript{});
  REQUIRE(server.ok());
  LoopDaemon loop(**server, {.more_targets = {"c", "d", "e"}});
  const std::string first = FixOnLab(loop);
  auto apply = [&](const std::vector<std::string>& targets, uint32_t at_once, temper::v1::ApplyBatchResponse& out) {
    temper::v1::ApplyBatchRequest request;
    request.set_batch_id(first);
    for (const std::string& t : targets) request.add_targets(t);
    request.set_at_once(at_once);
    return loop.daemon->Stub()->ApplyBatch(CallContext().get(), request, &out);
  };

  // What cannot be applied is refused whole, naming why; nothing is stored.
  temper::v1::ApplyBatchResponse refused;
  grpc::Status own = apply({"c", "lab"}, 1, refused);
  CHECK(own.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK_THAT(own.error_message(), Catch::Contains("targets[1]: lab is the source batch's own target"));
  grpc::Status twice = apply({"c", "c"}, 1, refused);
  CHECK(twice.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK_THAT(twice.error_message(), Catch::Contains("targets[1]: c is named twice"));
  grpc::Status none = apply({}, 1, refused);
  CHECK(none.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  temper::v1::ApplyBatchRequest unknown;
  unknown.set_batch_id("999");
  unknown.add_targets("c");
  CHECK(loop.daemon->Stub()->ApplyBatch(CallContext().get(), unknown, &refused).error_code() ==
        grpc::StatusCode::NOT_FOUND);

  // Three targets, one at a time: each batch starts only after the one before it completed.
  temper::v1::ApplyBatchResponse fleet;
  grpc::Status s = apply({"c", "d", "e"}, 1, fleet);
  INFO(s.error_message());
  REQUIRE(s.ok());
  REQUIRE(fleet.batches_size() == 3);
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  for (const temper::v1::Batch& b : fleet.batches()) {
    CHECK(b.apply_from() == first);
    CHECK(b.fleet() == fleet.batches(0).id());
    CHECK(b.at_once() == 1);
    temper::v1::Batch ended = loop.WaitUntilEnded(b.id());
    INFO(loop.daemon->Log());
    CHECK(ended.state() == temper::v1::BATCH_STATE_COMPLETED);
    CHECK(Verdicts(ended) == Verdicts(loop.GetBatch(first)));
    spans.push_back(RunSpan(loop, b.id()));
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i) {
    INFO("batch run " << i << " started at seq " << spans[i].first << ", the one before ended at seq "
                      << spans[i - 1].second);
    CHECK(spans[i].first > spans[i - 1].second);
  }
}

}  // namespace
}  // namespace temper::testing
