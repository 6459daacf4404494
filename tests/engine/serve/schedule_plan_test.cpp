// The scheduler's policy without a backend (schedule_plan.h): each case builds the planner's input
// by hand and checks the decision, so a change to the policy shows here as a changed plan rather
// than as a slower or differently batched run.
#include <catch2/catch.hpp>

#include "engine/serve/schedule_plan.h"

namespace temper::engine {
namespace {

// A sequence still prefilling: `tokens` of prompt, `fed` of them in its cache.
PlanSequence Prefilling(int64_t tokens, int64_t fed, std::span<const int64_t> checkpoints) {
  return PlanSequence{.tokens = tokens, .fed = fed, .checkpoints = checkpoints};
}

// A sequence with one token left to feed, proposing `drafts` speculation drafts.
PlanSequence Decoding(int64_t tokens, int64_t drafts = 0) {
  return PlanSequence{.tokens = tokens, .fed = tokens - 1, .proposed_drafts = drafts};
}

// The plan as (sequence, tokens, drafts, decode) rows, for whole-plan comparisons.
std::vector<std::tuple<size_t, int64_t, int64_t, bool>> Rows(const StepPlan& plan) {
  std::vector<std::tuple<size_t, int64_t, int64_t, bool>> rows;
  for (const PlannedItem& it : plan.items) rows.emplace_back(it.sequence, it.tokens, it.drafts, it.decode);
  return rows;
}

using Row = std::tuple<size_t, int64_t, int64_t, bool>;

TEST_CASE("Schedule plan: prefill chunks fill max_batch_tokens and no more, oldest sequence first",
          "[scheduler][plan]") {
  const std::vector<int64_t> end_a{100};
  const std::vector<int64_t> end_b{80};
  ScheduleInput input{.max_batch_tokens = 64};
  input.running = {Prefilling(100, 0, end_a), Prefilling(80, 0, end_b)};
  // The first admitted takes the whole budget; the second waits for a later pass.
  CHECK(Rows(PlanStep(input)) == std::vector<Row>{{0, 64, 0, false}});

  // With room for more, the second gets what the first leaves, cut at the budget.
  input.max_batch_tokens = 150;
  CHECK(Rows(PlanStep(input)) == std::vector<Row>{{0, 100, 0, false}, {1, 50, 0, false}});
  CHECK(PlanStep(input).tokens() == 150);

  // A sequence part-way through continues from what it has fed.
  input.running[0].fed = 90;
  CHECK(Rows(PlanStep(input)) == std::vector<Row>{{0, 10, 0, false}, {1, 80, 0, false}});
}

TEST_CASE("Schedule plan: a prefill chunk ends at the sequence's next checkpoint", "[scheduler][plan]") {
  // Message boundaries at 10 and 30: a chunk stops there so the prefix cache can pin the state.
  const std::vector<int64_t> checkpoints{10, 30, 50};
  const std::vector<int64_t> end{20};
  ScheduleInput input{.max_batch_tokens = 512};
  input.running = {Prefilling(50, 0, checkpoints), Prefilling(20, 0, end)};
  CHECK(Rows(PlanStep(input)) == std::vector<Row>{{0, 10, 0, false}, {1, 20, 0, false}});
  input.running[0].fed = 10;
  CHECK(Rows(PlanStep(input)) == std::vector<Row>{{0, 20, 0, false}, {1, 20, 0, false}});
  input.running[0].fed = 30;
  CHECK(Rows(PlanStep(input)) == std::vector<Row>{{0, 20, 0, false}, {1, 20, 0, false}});
}

TEST_CASE("Schedule plan: running decodes come before new prefills, whatever the admission order",
          "[scheduler][plan]") {
  const std::vector<int64_t> end{40};
  ScheduleInput input{.max_batch_tokens = 2};
  // The prefilling sequence was admitted first, yet the two decoding ones take the pass.
  input.running = {Prefilling(40, 0, end), Decoding(12), Decoding(30)};
  CHECK(Rows(PlanStep(input)) == std::vector<Row>{{1, 1, 0, true}, {2, 1, 0, true}});

  // With a budget below the number of decoding sequences, the oldest ones decode.
  input.max_batch_tokens = 1;
  CHECK(Rows(PlanStep(input)) == std::vector<Row>{{1, 1, 0, true}});

  // What the decodes leave goes to the prefill.
  input.max_batch_tokens = 5;
  CHECK(Rows(PlanStep(input)) == std::vector<Row>{{1, 1, 0, true}, {2, 1, 0, true}, {0, 3, 0, false}});
}

TEST_CASE("Schedule plan: speculation drafts count in the token budget", "[scheduler][plan]") {
  ScheduleInput input{.max_batch_tokens = 6};
  input.running = {Decoding(20, 8), Decoding(25, 8)};
  // Six tokens: both decoding tokens first, so four rows for drafts, the oldest sequence's first.
  CHECK(DraftRowCapacity(input) == 4);
  CHECK(Rows(PlanStep(input)) == std::vector<Row>{{0, 5, 4, true}, {1, 1, 0, true}});
  CHECK(PlanStep(input).tokens() == 6);

  // Drafts a sequence did not propose are not counted: the next one gets the rows.
  input.running[0].proposed_drafts = 1;
  CHECK(Rows(PlanStep(input)) == std::vector<Row>{{0, 2, 1, true}, {1, 4, 3, true}});

  // Drafts leave the prefill less of the budget.
  const std::vector<int64_t> end{40};
  input.max_batch_tokens = 12;
  input.running = {Decoding(20, 8), Prefilling(40, 0, end)};
  CHECK(Rows(PlanStep(input)) == std::vector<Row>{{0, 9, 8, true}, {1, 3, 0, false}});

  // No rows for drafts when the decodes alone fill the budget.
  input.max_batch_tokens = 2;
  input.running = {Decoding(20, 8), Decoding(25, 8), Decoding(30, 8)};
  CHECK(DraftRowCapacity(input) == 0);
  CHECK(Rows(PlanStep(input)) == std::vector<Row>{{0, 1, 0, true}, {1, 1, 0, true}});
}

TEST_CASE("Schedule plan: drafts stay within the backend's decode rows", "[scheduler][plan]") {
  ScheduleInput input{.max_batch_tokens = 512, .max_decode_rows = 4};
  input.running = {Decoding(20, 8), Decoding(25, 8)};
  // Four rows at a decode step's cost, two of them the decoding tokens: two drafts in all.
  CHECK(DraftRowCapacity(input) == 2);
  CHECK(Rows(PlanStep(input)) == std::vector<Row>{{0, 3, 2, true}, {1, 1, 0, true}});
  // More decoding sequences than rows: none, and never a negative count.
  input.max_decode_rows = 1;
  CHECK(DraftRowCapacity(input) == 0);
  input.max_decode_rows = 0;  // no limit: only the budget's
  CHECK(DraftRowCapacity(input) == 510);
}

TEST_CASE("Schedule plan: out of KV pages, the drafts are dropped first", "[scheduler][plan]") {
  const std::vector<int64_t> end{40};
  ScheduleInput input{.max_batch_tokens = 64};
  input.running = {Decoding(20, 3), Prefilling(40, 0, end), Decoding(30, 2)};
  StepPlan plan = PlanStep(input);
  REQUIRE(Rows(plan) == std::vector<Row>{{0, 4, 3, true}, {2, 3, 2, true}, {1, 40, 0, false}});
  CHECK(DropDrafts(plan));
  // Every decode feeds its one token; the prefill chunk is untouched.
  CHECK(Rows(plan) == std::vector<Row>{{0, 1, 0, true}, {2, 1, 0, true}, {1, 40, 0, false}});
  CHECK_FALSE(DropDrafts(plan));  // nothing left to drop: the next resort is up to the caller
}

TEST_CASE("Schedule plan: the most recently admitted sequence is preempted, never one alone", "[scheduler][plan]") {
  // Admission counters in running order; a re-admitted sequence gets a new, larger one.
  const std::vector<uint64_t> orders{3, 9, 5};
  CHECK(ChoosePreemptionVictim(orders) == std::optional<size_t>(1));
  const std::vector<uint64_t> newest_last{1, 2, 4};
  CHECK(ChoosePreemptionVictim(newest_last) == std::optional<size_t>(2));
  const std::vector<uint64_t> alone{7};
  CHECK(ChoosePreemptionVictim(alone) == std::nullopt);
  CHECK(ChoosePreemptionVictim({}) == std::nullopt);
}

TEST_CASE("Schedule plan: a waiting request is admitted once a finished sequence frees room", "[scheduler][plan]") {
  // 16-token blocks. Running: one sequence with 40 prompt tokens still to feed (3 blocks promised)
  // and one decoding (1 block). The request needs its 20 tokens' 2 blocks and one spare.
  AdmissionInput room{.block_tokens = 16, .free_blocks = 6, .running_remaining = {40, 1}, .request_tokens = 20};
  CHECK(DecideAdmission(room) == AdmissionVerdict::kWait);  // 6 - 4 promised < 3
  // The prefilling one finishes: its promise goes, and its own blocks come back to the pool.
  room.running_remaining = {1};
  room.free_blocks = 9;
  CHECK(DecideAdmission(room) == AdmissionVerdict::kAdmit);
  // Exactly enough is enough.
  room.free_blocks = 4;
  CHECK(DecideAdmission(room) == AdmissionVerdict::kAdmit);
  room.free_blocks = 3;
  CHECK(DecideAdmission(room) == AdmissionVerdict::kWait);
}

TEST_CASE("Schedule plan: admission counts prefix-cache hits and frees cached prefixes before waiting",
          "[scheduler][plan]") {
  AdmissionInput room{.block_tokens = 16, .free_blocks = 4, .running_remaining = {1}, .request_tokens = 100};
  // Uncached, 100 tokens need 7 blocks and a spare: more than the 3 left after the promise.
  CHECK(DecideAdmission(room) == AdmissionVerdict::kWait);
  room.can_free_cache = true;
  CHECK(DecideAdmission(room) == AdmissionVerdict::kFreeCachedPrefix);
  // With 80 of them cached, 20 need 2 blocks and a spare: they fit.
  room.cached_tokens = 80;
  CHECK(DecideAdmission(room) == AdmissionVerdict::kAdmit);
  // Alone, a request that does not fit goes ahead (the pass preempts or fails it): nothing
  // running would ever free room for it.
  room = AdmissionInput{.block_tokens = 16, .free_blocks = 1, .request_tokens = 100};
  CHECK(DecideAdmission(room) == AdmissionVerdict::kAdmit);
  room.can_free_cache = true;
  CHECK(DecideAdmission(room) == AdmissionVerdict::kFreeCachedPrefix);
}

}  // namespace
}  // namespace temper::engine
