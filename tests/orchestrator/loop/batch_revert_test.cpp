// CheckRevertRequest: the refusals `temper revert` gives before it opens a target, on hand-built
// batches. (The revert itself runs end to end in tests/loop/undo_e2e_test.cpp.)
#include "orchestrator/loop/batch_revert.h"

#include <catch2/catch.hpp>

namespace temper {
namespace {

constexpr const char* kRule = "xccdf_org.ssgproject.content_rule_accounts_tmout";

BatchRecord Ended(RuleState rule_state) {
  BatchRecord b;
  b.id = 4;
  b.target = "lab";
  b.state = BatchState::kCompleted;
  b.start_snapshot = 2;
  b.good_snapshot = 3;
  b.rules.push_back({.rule_id = kRule, .state = rule_state});
  return b;
}

Status Check(const BatchRecord& b, const std::string& rule = "") {
  return CheckRevertRequest(b, {.batch_id = b.id, .rule_id = rule});
}

TEST_CASE("a revert is refused, saying why, for batches and rules that left nothing to revert") {
  CHECK(Check(Ended(RuleState::kFixed)).ok());
  CHECK(Check(Ended(RuleState::kFixed), kRule).ok());
  // A fix staged until a reboot is a change on the target like any other.
  CHECK(Check(Ended(RuleState::kRebootPending), kRule).ok());

  struct Case {
    BatchRecord batch;
    std::string rule;
    StatusCode code;
    std::string message;
  };
  BatchRecord queued = Ended(RuleState::kPending);
  queued.state = BatchState::kQueued;
  BatchRecord running = Ended(RuleState::kRunning);
  running.state = BatchState::kRunning;
  BatchRecord plan = Ended(RuleState::kFixed);
  plan.options.plan_only = true;
  BatchRecord reverted = Ended(RuleState::kReverted);
  reverted.reverted_at = 1'800'000'000'000;
  BatchRecord never = Ended(RuleState::kCancelled);
  never.state = BatchState::kCancelled;
  never.start_snapshot.reset();
  never.good_snapshot.reset();
  BatchRecord legacy = Ended(RuleState::kFixed);
  legacy.start_snapshot.reset();
  const Case cases[] = {
      {queued, "", StatusCode::kFailedPrecondition, "batch 4 has not run yet: it changed nothing to revert"},
      {running, "", StatusCode::kFailedPrecondition,
       "batch 4 is running on target lab: a revert must wait until it ends (or cancel it with `temper cancel 4`)"},
      {plan, "", StatusCode::kFailedPrecondition, "batch 4 was plan-only: it left nothing on target lab to revert"},
      {reverted, "", StatusCode::kFailedPrecondition, "batch 4 was already reverted"},
      {never, "", StatusCode::kFailedPrecondition,
       "batch 4 never started on target lab (cancelled): it changed nothing to revert"},
      {legacy, "", StatusCode::kFailedPrecondition,
       "batch 4 recorded no start snapshot (it ran before temper could revert batches)"},
      {Ended(RuleState::kFixed), "xccdf_org.ssgproject.content_rule_other", StatusCode::kNotFound,
       "batch 4 has no rule xccdf_org.ssgproject.content_rule_other"},
      {Ended(RuleState::kReverted), kRule, StatusCode::kFailedPrecondition,
       "rule accounts_tmout of batch 4 was already reverted"},
      {Ended(RuleState::kEscalated), kRule, StatusCode::kFailedPrecondition,
       "rule accounts_tmout of batch 4 is escalated, not fixed: it left no change to revert"},
      {Ended(RuleState::kAlreadyPassing), kRule, StatusCode::kFailedPrecondition,
       "rule accounts_tmout of batch 4 is already_passing, not fixed: it left no change to revert"},
  };
  for (const Case& c : cases) {
    INFO(c.message);
    Status s = Check(c.batch, c.rule);
    CHECK(s.code() == c.code);
    CHECK(s.message() == c.message);
  }
}

}  // namespace
}  // namespace temper
