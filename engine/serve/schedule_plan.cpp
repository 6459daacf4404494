#include "engine/serve/schedule_plan.h"

#include <algorithm>

namespace temper::engine {

namespace {

int64_t BlocksFor(int64_t tokens, int block_tokens) { return (tokens + block_tokens - 1) / block_tokens; }

// Where the prefill chunk of `s` ends at the latest: its next checkpoint past what is fed, else
// its last token.
int64_t ChunkEnd(const PlanSequence& s) {
  for (int64_t c : s.checkpoints) {
    if (c > s.fed) return std::min(s.tokens, c);
  }
  return s.tokens;
}

}  // namespace

int64_t StepPlan::tokens() const {
  int64_t n = 0;
  for (const PlannedItem& it : items) n += it.tokens;
  return n;
}

int64_t DraftRowCapacity(const ScheduleInput& input) {
  const int64_t budget = input.max_batch_tokens;
  int64_t decoding = 0;
  for (const PlanSequence& s : input.running) decoding += s.remaining() == 1 ? 1 : 0;
  int64_t rows = budget - std::min(budget, decoding);
  if (input.max_decode_rows > 0) rows = std::min(rows, std::max<int64_t>(0, input.max_decode_rows - decoding));
  return rows;
}

StepPlan PlanStep(const ScheduleInput& input) {
  StepPlan plan;
  int64_t budget = input.max_batch_tokens;
  int64_t draft_rows = DraftRowCapacity(input);
  // Decode first: each decoding sequence's token, then its drafts while rows are left.
  for (size_t i = 0; i < input.running.size() && budget > 0; ++i) {
    const PlanSequence& s = input.running[i];
    if (s.remaining() != 1) continue;
    const int64_t drafts = std::min(s.proposed_drafts, draft_rows);
    draft_rows -= drafts;
    plan.items.push_back({i, 1 + drafts, drafts, true});
    budget -= 1 + drafts;
  }
  // Then prefill chunks in admission order with what is left of the budget.
  for (size_t i = 0; i < input.running.size() && budget > 0; ++i) {
    const PlanSequence& s = input.running[i];
    if (s.remaining() <= 1) continue;
    const int64_t n = std::min(ChunkEnd(s) - s.fed, budget);
    plan.items.push_back({i, n, 0, false});
    budget -= n;
  }
  return plan;
}

bool DropDrafts(StepPlan& plan) {
  bool dropped = false;
  for (PlannedItem& it : plan.items) {
    if (it.drafts == 0) continue;
    it.drafts = 0;
    it.tokens = 1;
    dropped = true;
  }
  return dropped;
}

std::optional<size_t> ChoosePreemptionVictim(std::span<const uint64_t> admission_orders) {
  if (admission_orders.size() < 2) return std::nullopt;
  return static_cast<size_t>(std::max_element(admission_orders.begin(), admission_orders.end()) -
                             admission_orders.begin());
}

AdmissionVerdict DecideAdmission(const AdmissionInput& input) {
  // Blocks promised to running sequences for the tokens they have still to feed.
  int64_t promised = 0;
  for (int64_t remaining : input.running_remaining) promised += BlocksFor(remaining, input.block_tokens);
  // The uncached part's blocks, and one spare.
  const int64_t need = BlocksFor(input.request_tokens - input.cached_tokens, input.block_tokens) + 1;
  if (input.free_blocks - promised >= need) return AdmissionVerdict::kAdmit;
  if (input.can_free_cache) return AdmissionVerdict::kFreeCachedPrefix;
  // Running sequences will free room as they finish or are preempted; alone, nothing will.
  return input.running_remaining.empty() ? AdmissionVerdict::kAdmit : AdmissionVerdict::kWait;
}

}  // namespace temper::engine
