// EpisodicMemory: what the roles recall about a rule, from the state store: lessons learnt on the
// rule itself (newest first), lessons learnt on rules of the same XCCDF group (most useful first),
// and the rule's attempts in earlier batches. A lesson's utility starts at kInitialUtility and moves
// with the outcome of each later attempt that was shown it, so lessons that keep helping rise and
// misleading ones sink below the prompt budget.
// Also the conversions from stored and SCAP records to the plain values roles render.
// Thread safety: as the StateStore (any thread).
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "orchestrator/records.h"
#include "orchestrator/store/state_store.h"
#include "roles/rule_context.h"
#include "stig/scap/content.h"

namespace temper {

struct RecalledMemory {
  std::vector<Lesson> lessons;                // same rule first
  std::vector<int64_t> lesson_ids;            // parallel to lessons: whose utility the outcome moves
  std::vector<PastAttempt> earlier_attempts;  // from other batches, oldest first
};

class EpisodicMemory {
 public:
  static constexpr double kInitialUtility = 0.5;
  static constexpr double kUtilityOnPass = 0.2;
  static constexpr double kUtilityOnFail = -0.1;
  static constexpr uint32_t kSameRuleLessons = 8;
  static constexpr uint32_t kGroupLessons = 4;
  static constexpr uint32_t kEarlierAttempts = 6;

  explicit EpisodicMemory(StateStore& store) : store_(store) {}

  Result<RecalledMemory> Recall(const stig::RuleInfo& rule, int64_t current_batch);

 private:
  StateStore& store_;
};

// The rule as the roles see it: SCAP metadata with the resolved SSG bash fix and its references.
RuleInfo ToRoleRule(const stig::RuleInfo& rule);
// A stored attempt as the roles see it.
PastAttempt ToPastAttempt(const AttemptRecord& attempt);

}  // namespace temper
