// BatchLoop: one batch on one target — the loop of the design, as a state machine whose every step
// is committed to the state store before the next begins.
//
//   start or resume ─▶ revert the target to its last known-good snapshot
//   evaluate every rule once ("before"): passing rules are done, undecidable ones skipped
//   while rules are pending:
//     Architect picks a rule and an approach (or skips one, with a reason)
//     attempt: Worker tool loop ─▶ Verify (the rule, every rule that passed, health checks)
//        accepted ─▶ snapshot: the new known-good state; rule fixed; lessons shown gain utility
//        rejected ─▶ revert; Reflector's lesson stored; lessons shown lose utility; after
//                    kReengageAfter failures in a row the Architect rules CONTINUE / PIVOT / ESCALATE
//     budgets (attempts, wall time, tokens per rule) spent ─▶ escalated, with the attempt history
//   no rule pending ─▶ fixpoint: evaluate every rule again; rules a later fix broke or un-gated
//     are re-queued and the loop goes on (fixpoint.h), up to the configured passes; the last
//     rescan is the "after" evaluation, with OpenSCAP's results files
//   plan-only batches: revert to the snapshot the batch started from (plan_only.h) ─▶ completed
//
// Crash safety: the known-good snapshot id is stored with each kept fix, in the same transaction
// as the attempt and the rule's new state. A kill at any point leaves either the old state (the
// snapshot taken but not recorded is dropped by the revert at resume) or the new one; an attempt
// that was under way is simply not recorded and is made again. Committed events are never rewritten.
//
// Run() returns OK when the batch ended (completed or cancelled) or when `stopping` turned true
// (the batch stays running and resumes at the next start); an error when the target or a model
// endpoint failed, after which the caller marks the batch failed (Fail()).
// Thread safety: one thread runs a BatchLoop; RequestCancel may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/log.h"
#include "common/status.h"
#include "orchestrator/journal_event_types.h"
#include "orchestrator/loop/fixpoint.h"
#include "orchestrator/loop/role_models.h"
#include "orchestrator/records.h"
#include "orchestrator/store/episodic_memory.h"
#include "orchestrator/store/journal.h"
#include "stig/health.h"
#include "stig/scap/content.h"
#include "stig/scap/evaluator.h"
#include "stig/target.h"

namespace temper {

struct LoopServices {
  Journal& journal;
  const RoleModels& models;
  const stig::Content& content;
  const stig::Evaluator& evaluator;
  const Logger& log;
  std::string results_root;  // OpenSCAP results go to <results_root>/batch-<id>/...
  uint32_t fixpoint_passes = kDefaultFixpointPasses;
  // loop.cross_check_verification: verify every attempt against the whole regression set as well
  // as the cut one (stig/verification.h), journalling the rules the cut would have missed.
  bool cross_check_verification = false;
};

class BatchLoop {
 public:
  // Failed attempts in a row before the Architect is asked to re-engage.
  static constexpr uint32_t kReengageAfter = 2;
  // Pending rules the Architect chooses among at once (in batch order).
  static constexpr size_t kCandidates = 8;
  // Corrections a role gets for an unusable structured answer.
  static constexpr int kMaxCorrections = 2;

  // All references must outlive the loop.
  BatchLoop(LoopServices services, stig::Target& target, BatchRecord batch, std::function<bool()> stopping);

  Status Run();
  // Marks the batch failed with `error` (after a Run() error), reverting the target first.
  void Fail(const Status& error);
  void RequestCancel() { cancel_requested_ = true; }

 private:
  struct RuleRun;  // one rule's attempts in this batch
  enum class AttemptEnd { kKept, kReverted, kInterrupted };
  // A role's structured answer: OK, InvalidArgument when it stayed unusable after the corrections
  // (the caller decides the fallback), or the endpoint's error.
  struct Asked {
    Status status;
    TokenUsage usage;
    std::chrono::milliseconds latency{0};  // of every call, corrections included
    std::vector<std::string> corrections;
    bool transport_failed() const { return !status.ok() && status.code() != StatusCode::kInvalidArgument; }
  };

  Status Start();
  Status EvaluateBefore();
  // Lets the rule policy (rule_policy.h) override the verdict's state; its events go to `events`.
  void ApplyRulePolicy(const stig::RuleVerdict& before, RuleUpdate& update, std::vector<NewEvent>& events) const;
  Status PickAndRun();
  Status RunRule(const stig::RuleInfo& rule, std::string approach, TokenUsage pick_usage);
  Result<ReengageDecision> Reengage(RuleRun& run, const RecalledMemory& memory);
  Result<AttemptEnd> Attempt(RuleRun& run, const RecalledMemory& memory);
  // Adds the Reflector's lesson (or why there is none) to the failed attempt and its step.
  Status Reflect(const RuleRun& run, const RecalledMemory& memory, AttemptRecord& attempt, LoopStep& step);
  template <typename Answer, typename Parse>
  Asked Ask(ModelClient& client, const RolePrompt& prompt, Parse parse, Answer& answer);
  // The rule goes to a person: escalated, with why.
  Status Escalate(RuleRun& run, const std::string& detail);
  // The fixpoint's rescan once no rule is pending: true when the batch settled (nothing re-queued).
  Result<bool> Rescan();
  // Plan-only: back to the start snapshot; then the batch is completed.
  Status Complete();
  // The loop stopped before the end: a cancelled plan-only batch still reverts.
  Status Interrupt();
  // Reverts a plan-only batch's target to its start snapshot; what to journal about it.
  Result<nlohmann::json> RevertPlan();
  // Evaluates the rules with OpenSCAP's results files written to `results_dir`, counting verdicts.
  Result<stig::Evaluation> EvaluateWithResults(const std::vector<std::string>& rule_ids, const std::string& results_dir,
                                               std::map<std::string, int>& counts);

  // True when the batch was cancelled (by request or in the store) or temperd is stopping.
  bool Interrupted();
  Status RefreshBatch();
  Result<StepCommitted> Commit(LoopStep step);
  NewEvent Event(const std::string& rule_id, const std::string& role, EventType type, const nlohmann::json& data,
                 TokenUsage usage = {}) const;
  Status JournalTrimmed(const std::string& rule_id, const std::string& role,
                        const std::vector<TrimmedSection>& trimmed);
  BatchProgress Progress() const;
  std::vector<std::string> PassingRules() const;
  std::string ResultsDir(const std::string& leaf) const;

  LoopServices s_;
  stig::Target& target_;
  BatchRecord batch_;
  std::function<bool()> stopping_;
  std::atomic<bool> cancel_requested_{false};
  bool cancelled_ = false;
  EpisodicMemory memory_;
  uint32_t good_snapshot_ = 0;
  std::optional<stig::HealthReport> health_;  // at the known-good state
  std::vector<std::string> recent_;           // for the Architect's batch view
};

}  // namespace temper
