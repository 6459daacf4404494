// The verification after a confirmed reboot, over a real state store and journal and a target whose
// OpenSCAP verdicts the test sets: pass → fixed, anything else → escalated, and an evaluation that
// cannot run leaves the rules reboot_pending with the reason in the journal.
#include "orchestrator/loop/reboot_verification.h"

#include <map>

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "orchestrator/store/journal.h"
#include "orchestrator/temp_dir.h"
#include "stig/scap/content.h"

namespace temper {
namespace {

using testing::TempDir;

const std::string kA = "xccdf_org.ssgproject.content_rule_a", kB = "xccdf_org.ssgproject.content_rule_b",
                  kC = "xccdf_org.ssgproject.content_rule_c";

// Only Evaluate is used: it answers `verdicts` for the rules asked (or `error`).
class VerdictTarget final : public stig::Target {
 public:
  const std::string& name() const override { return name_; }
  Result<stig::SnapshotId> Snapshot() override { return Unused(); }
  Status Revert(stig::SnapshotId) override { return Unused(); }
  Result<std::vector<stig::SnapshotId>> Snapshots() override { return Unused(); }
  Result<std::vector<std::string>> UnsnapshottedPaths() override { return Unused(); }
  Result<std::vector<std::string>> SnapshotChanges(stig::SnapshotId) override { return Unused(); }
  Status DropSnapshot(stig::SnapshotId) override { return Unused(); }
  Result<std::vector<stig::SnapshotOverlap>> OverlapsAbove(stig::SnapshotId) override { return Unused(); }
  Result<temper::ProcessResult> Run(const std::string&, const temper::SandboxLimits&) override { return Unused(); }
  bool CanInstallPackages() const override { return false; }
  Result<stig::ResolvedPackages> PreparePackages(const std::vector<std::string>&) override { return Unused(); }
  Result<temper::ProcessResult> RunWithPackages(const std::string&, const temper::SandboxLimits&,
                                                const stig::ResolvedPackages&) override {
    return Unused();
  }
  Result<std::string> ReadFile(const std::string&, std::size_t) override { return Unused(); }
  Status WriteFile(const std::string&, std::string_view, mode_t) override { return Unused(); }
  Result<stig::Evaluation> Evaluate(const stig::Evaluator&, const stig::EvaluationRequest& request) override {
    asked = request.rule_ids;
    if (!error.ok()) return error;
    stig::Evaluation e;
    for (const std::string& id : request.rule_ids) e.verdicts.push_back({id, verdicts.at(id)});
    return e;
  }

  std::map<std::string, stig::Verdict> verdicts;
  Status error;
  std::vector<std::string> asked;

 private:
  static Status Unused() { return Status::Internal("not used by the reboot verification"); }
  std::string name_ = "lab";
};

struct Fixture {
  TempDir dir;
  std::unique_ptr<StateStore> store = *StateStore::Open(dir / "t.db");
  std::unique_ptr<JournalFiles> files = *JournalFiles::Open(dir / "journal");
  Logger log{LogLevel::kError};
  std::unique_ptr<Journal> journal = *Journal::Open(*store, *files, log);
  stig::Content content;  // the fake target never reads it
  stig::Evaluator evaluator{content, {}, log};

  // A completed batch: a and b fixed but staged for a reboot, c fixed for good; reboot confirmed.
  BatchRecord ConfirmedBatch() {
    NewBatch nb;
    nb.target = "lab";
    nb.datastream = "/ds.xml";
    nb.profile = "stig";
    nb.rule_ids = {kA, kB, kC};
    int64_t id = store->SubmitBatch(nb)->batch.id;
    LoopStep done;
    done.batch_id = id;
    done.batch_state = BatchState::kCompleted;
    done.rules.push_back(
        {kA, RuleState::kRebootPending, std::string("staged"), std::string("fail"), std::string("pass"), 1, 0});
    done.rules.push_back(
        {kB, RuleState::kRebootPending, std::string("staged"), std::string("fail"), std::string("pass"), 2, 0});
    done.rules.push_back({kC, RuleState::kFixed, std::string("fixed on attempt 1"), {}, {}, 1, 0});
    REQUIRE(store->CommitStep(done).ok());
    REQUIRE(store->ConfirmReboot(id, "").ok());
    return **store->NextRebootCheckForTarget("lab");
  }
  std::vector<EventRecord> Events(int64_t batch) { return *store->ReadEvents(0, batch, 100); }
};

TEST_CASE("after the reboot a passing staged rule is fixed and a failing one escalated with its verdict") {
  Fixture f;
  BatchRecord batch = f.ConfirmedBatch();
  VerdictTarget target;
  target.verdicts = {{kA, stig::Verdict::kPass}, {kB, stig::Verdict::kFail}};
  REQUIRE(VerifyAfterReboot(*f.journal, target, f.evaluator, f.dir / "results", batch).ok());
  CHECK(target.asked == std::vector<std::string>{kA, kB});  // only the staged rules

  BatchRecord after = *f.store->GetBatch(batch.id);
  CHECK(after.state == BatchState::kCompleted);
  CHECK_FALSE(after.reboot_confirmed_seq.has_value());
  CHECK(after.rules[0].state == RuleState::kFixed);
  CHECK(after.rules[0].detail == "fixed on attempt 1; verified after the reboot (OpenSCAP: pass)");
  CHECK(after.rules[1].state == RuleState::kEscalated);
  CHECK(after.rules[1].detail == "the staged fix did not hold after the reboot: OpenSCAP verdict fail");
  CHECK(after.rules[1].after_verdict == "fail");
  CHECK(after.rules[2].state == RuleState::kFixed);
  CHECK(after.rules[2].detail == "fixed on attempt 1");

  std::vector<EventRecord> events = f.Events(batch.id);
  REQUIRE(events.size() >= 3);
  const EventRecord& last = events.back();
  CHECK(last.type == "reboot.verified");
  nlohmann::json summary = nlohmann::json::parse(last.data_json);
  CHECK(summary["fixed"] == 1);
  CHECK(summary["escalated"] == 1);
  CHECK(summary["results_dir"] ==
        fmt::format("{}/batch-{}/after-reboot-{}", f.dir / "results", batch.id, *batch.reboot_confirmed_seq));
  CHECK(events[events.size() - 3].type == "rule.fixed");
  CHECK(events[events.size() - 2].type == "rule.escalated");
  CHECK(nlohmann::json::parse(events[events.size() - 2].data_json)["after_reboot"] == true);
  CHECK_FALSE(f.store->NextRebootCheckForTarget("lab")->has_value());
}

TEST_CASE("a reboot verification that cannot evaluate keeps the rules staged and says why") {
  Fixture f;
  BatchRecord batch = f.ConfirmedBatch();
  VerdictTarget target;
  target.error = Status::Unavailable("target lab: the overlay cannot be mounted");
  REQUIRE(VerifyAfterReboot(*f.journal, target, f.evaluator, f.dir / "results", batch).ok());
  BatchRecord after = *f.store->GetBatch(batch.id);
  CHECK(after.rules[0].state == RuleState::kRebootPending);
  CHECK(after.rules[1].state == RuleState::kRebootPending);
  // The confirmation is used up, so the thread does not retry forever; the operator confirms again.
  CHECK_FALSE(after.reboot_confirmed_seq.has_value());
  const EventRecord last = f.Events(batch.id).back();
  CHECK(last.type == "reboot.verification_failed");
  CHECK_THAT(last.data_json, Catch::Contains("the overlay cannot be mounted"));
  CHECK(f.store->ConfirmReboot(batch.id, "again").ok());
}

}  // namespace
}  // namespace temper
