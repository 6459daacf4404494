// The fixpoint's decision per pass: which rules flipped, which are re-queued or escalated, and
// the pass's counts, on hand-built batches and rescans.
#include "orchestrator/loop/fixpoint.h"

#include <catch2/catch.hpp>

namespace temper {
namespace {

using stig::Verdict;

BatchRuleRecord Rule(std::string id, RuleState state, std::string before, std::string after = "") {
  BatchRuleRecord r;
  r.rule_id = std::move(id);
  r.state = state;
  r.before_verdict = std::move(before);
  r.after_verdict = std::move(after);
  return r;
}

const RuleUpdate* UpdateOf(const FixpointDecision& d, const std::string& id) {
  for (const RuleUpdate& u : d.updates) {
    if (u.rule_id == id) return &u;
  }
  return nullptr;
}

// A batch of every kind of rule the fixpoint must tell apart.
BatchRecord Batch() {
  BatchRecord b;
  b.rules = {
      Rule("fixed_then_broken", RuleState::kFixed, "fail", "pass"),
      Rule("passing_then_broken", RuleState::kAlreadyPassing, "pass", "pass"),
      Rule("not_applicable_then_failing", RuleState::kSkipped, "notapplicable"),
      Rule("skipped_by_architect", RuleState::kSkipped, "fail"),
      Rule("waived", RuleState::kWaived, "pass", "pass"),
      Rule("escalated", RuleState::kEscalated, "fail", "fail"),
      Rule("passing_then_not_applicable", RuleState::kAlreadyPassing, "pass", "pass"),
      Rule("still_fixed", RuleState::kFixed, "fail", "pass"),
      Rule("requeued_before_and_still_failing", RuleState::kSkipped, "notapplicable", "fail"),
  };
  return b;
}

stig::Evaluation Rescan() {
  stig::Evaluation e;
  e.verdicts = {{"fixed_then_broken", Verdict::kFail},
                {"passing_then_broken", Verdict::kError},
                {"not_applicable_then_failing", Verdict::kFail},
                {"skipped_by_architect", Verdict::kFail},
                {"waived", Verdict::kFail},
                {"escalated", Verdict::kPass},
                {"passing_then_not_applicable", Verdict::kNotApplicable},
                {"still_fixed", Verdict::kPass},
                {"requeued_before_and_still_failing", Verdict::kFail}};
  return e;
}

TEST_CASE("a rescan re-queues rules a later change broke or made apply, and only those") {
  FixpointDecision d = DecidePass(Batch(), Rescan(), 1, 3, 7, 4);
  CHECK(d.pass.flipped ==
        std::vector<std::string>{"fixed_then_broken", "passing_then_broken", "not_applicable_then_failing"});
  CHECK(d.pass.requeued == d.pass.flipped);
  CHECK(d.pass.escalated.empty());
  CHECK_FALSE(d.pass.final);
  CHECK(d.pass.pass == 1);
  CHECK(d.pass.attempts == 7);
  CHECK(d.pass.fixed == 4);
  CHECK(d.pass.verdicts ==
        std::map<std::string, uint32_t>{{"fail", 5}, {"error", 1}, {"pass", 2}, {"notapplicable", 1}});

  const RuleUpdate* broken = UpdateOf(d, "fixed_then_broken");
  REQUIRE(broken);
  CHECK(broken->state == RuleState::kPending);
  CHECK(*broken->after_verdict == "fail");
  CHECK_THAT(*broken->detail, Catch::Contains("re-queued by the fixpoint after pass 1") &&
                                  Catch::Contains("pass before, fail at the rescan: a later change broke it"));
  CHECK_THAT(*UpdateOf(d, "not_applicable_then_failing")->detail, Catch::Contains("made it apply"));
  REQUIRE(d.flips.size() == 3);
  CHECK(d.flips[1].was == "pass");
  CHECK(d.flips[1].now == "error");

  // Every rescanned rule gets its fresh verdict; the others keep their state.
  CHECK(d.updates.size() == Batch().rules.size());
  for (const char* id : {"skipped_by_architect", "waived", "escalated", "passing_then_not_applicable", "still_fixed",
                         "requeued_before_and_still_failing"}) {
    INFO(id);
    const RuleUpdate* u = UpdateOf(d, id);
    REQUIRE(u);
    CHECK_FALSE(u->state.has_value());
  }
  CHECK(*UpdateOf(d, "escalated")->after_verdict == "pass");
}

TEST_CASE("at the bound, rules still flipping are escalated with the reason, and the pass is final") {
  FixpointDecision d = DecidePass(Batch(), Rescan(), 3, 3, 1, 1);
  CHECK(d.pass.requeued.empty());
  CHECK(d.pass.escalated == d.pass.flipped);
  CHECK(d.pass.final);
  const RuleUpdate* u = UpdateOf(d, "fixed_then_broken");
  REQUIRE(u);
  CHECK(u->state == RuleState::kEscalated);
  CHECK_THAT(*u->detail, Catch::Contains("still flipping after 3 fixpoint passes (the bound)") &&
                             Catch::Contains("a later change broke it"));
  // A bound of one pass means no second pass at all.
  CHECK(DecidePass(Batch(), Rescan(), 1, 1, 0, 0).pass.escalated.size() == 3);
}

TEST_CASE("a rescan that finds nothing flipped settles the batch") {
  BatchRecord b;
  b.rules = {Rule("a", RuleState::kFixed, "fail", "pass"), Rule("b", RuleState::kEscalated, "fail", "fail")};
  stig::Evaluation e;
  e.verdicts = {{"a", Verdict::kPass}, {"b", Verdict::kFail}};
  FixpointDecision d = DecidePass(b, e, 2, 3, 0, 0);
  CHECK(d.pass.final);
  CHECK(d.flips.empty());
  REQUIRE(d.updates.size() == 2);
  CHECK(*d.updates[0].after_verdict == "pass");
  CHECK_FALSE(d.updates[1].state.has_value());
}

}  // namespace
}  // namespace temper
