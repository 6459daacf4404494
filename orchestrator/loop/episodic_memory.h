// EpisodicMemory: what the roles recall about a rule, from the state store: lessons learnt on the
// rule itself (newest first), lessons learnt on rules of the same XCCDF group (most useful first),
// and the rule's attempts in earlier batches. A lesson's utility starts at kInitialUtility and moves
// with the outcome of each later attempt that was shown it, so lessons that keep helping rise and
// misleading ones sink below the prompt budget.
//
// Where a memory may travel (issue 46): a lesson is the Reflector's reading of what a target
// showed it, so text planted on one target (a file, a banner, a package description) can come back
// as a "lesson" in another target's prompt. Memory is therefore scoped to the target it is recalled
// for (ScopeFor):
//   - an SSH host (a real machine) recalls only lessons learnt on that same host;
//   - a rootfs target (a lab root the operator built) recalls lessons learnt on any rootfs target,
//     and those stored before provenance was recorded (class "unknown", which no SSH host recalls);
//   - earlier attempts (their commands and evaluator evidence are the target's own output) come
//     from batches on the same target only.
// Every lesson carries its provenance (target class and name, batch, time, the role and endpoint
// that wrote it) into the prompt, so the model reads each one as "learnt on X in batch B".
// Also the conversions from stored and SCAP records to the plain values roles render.
// Thread safety: as the StateStore (any thread).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "orchestrator/records.h"
#include "orchestrator/store/state_store.h"
#include "roles/rule_context.h"
#include "stig/scap/content.h"

namespace temper {

// The target a batch runs on, as memory scopes it.
struct MemoryTarget {
  std::string name;
  std::string target_class;  // kRootfsTargetClass or kSshTargetClass (records.h)
};

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

  // Recalls for, and stamps new lessons with, `target`.
  EpisodicMemory(StateStore& store, MemoryTarget target) : store_(store), target_(std::move(target)) {}

  // The lessons a prompt for `target` may see (see the top of this file).
  static LessonScope ScopeFor(const MemoryTarget& target);

  Result<RecalledMemory> Recall(const stig::RuleInfo& rule, int64_t current_batch);
  // A lesson learnt now on this memory's target in `batch_id`, written by `learnt_by` (the role and
  // its endpoint, e.g. "reflector (endpoint local)"), at kInitialUtility.
  LessonRecord NewLesson(const stig::RuleInfo& rule, int64_t batch_id, std::string text, std::string learnt_by) const;

 private:
  StateStore& store_;
  MemoryTarget target_;
};

// The rule as the roles see it: SCAP metadata with the resolved SSG bash fix and its references.
RuleInfo ToRoleRule(const stig::RuleInfo& rule);
// The same, naming where the fix comes from (RuleInfo::reference_fix_source): `content`'s
// datastream file name and benchmark id, for the Worker, whose reference fixes the journal records.
RuleInfo ToRoleRule(const stig::RuleInfo& rule, const stig::Content& content);
// A stored attempt as the roles see it.
PastAttempt ToPastAttempt(const AttemptRecord& attempt);

}  // namespace temper
