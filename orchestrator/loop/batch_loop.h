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
// Proven fixes (issue 50). Every kept attempt's change is captured whole (Target::FixSinceSnapshot,
// a stig::FixBundle) with the attempt and, when the Worker found it, recorded in the library of
// proven fixes (fix_library.h) with the platform the target runs (read once per batch, at its
// start). Before the Architect is asked for the next rule, the startable rules (in batch order) are
// looked up in the library; the first with a fix proven on a matching platform is started without
// a pick, and its first attempt replays the fix (stig::ReplayFix) instead of calling the Worker:
// the same slot, the same verification and keep or revert, no model call at all. A replay that
// conflicts or is rejected does not count against the rule's attempt budget: its failure is stored
// as a lesson and the model's attempts follow (on the rule's fix text) as always. Its outcome is
// noted on the library entry. A rule the Architect picked is also tried from the library first.
// Apply batches (BatchRecord.apply_from = S): no model is called. The batch has S's rules; after
// the evaluation before, the fixes S kept are replayed one attempt each, on the target itself, in
// the order S kept them; a rule whose replay is refused (a conflict, a rejected verification) or
// that S never fixed is escalated, naming why. Then the fixpoint and the evaluation after, as usual.
//
// Slots: rules run on threads of their own, one per slot, the Architect picking the next rule
// whenever a slot is free; with more than one slot it picks ahead, up to one rule more per slot,
// while the slots' attempts run (each pick journalled when made, rule.started when its slot takes
// it). A serial batch has one slot, picks only when it is free, and its attempts work on the target itself
// (the only way on targets that cannot fork, such as SSH hosts): kept, the target's state becomes
// the new snapshot; rejected, the target is reverted to the known-good one.
// Parallel attempts (the batch's parallel_attempts > 1, on a target that can fork): that many
// slots, each attempt on a fork of the known-good snapshot. A fork whose change the
// evaluator accepts goes through one serialized commit step: its change becomes the newest snapshot
// of the target, and when fixes were kept since the fork was made, the rule and its regression set
// are verified again there. A fork that changed what such a fix changed, or that fails that second
// verification, is dropped and its attempt made again on a fresh fork (attempt.conflict; it costs
// its tokens and time, not an attempt). A rejected fork is dropped; when fixes landed since it was
// made it is made again too (at most kMaxRemakes times per rule): it may have lacked one of them.
// Which rules may start beside those in flight is StartOrder's (start_order.h): never two whose
// checks read a common file, package rules one at a time and first, no rule before the package
// rules ahead of it in the batch, and the rules whose checks name a file the known-good root
// lacks after every package rule. Everything else (lessons,
// budgets, re-engagement, waivers, plan-only, fixpoint, evidence) is the serial loop's, and every
// step is still committed to the store before the next: the journal stays one ordered sequence,
// each attempt's events naming its fork. A kill at any point loses no kept fix (its snapshot is
// recorded with it); forks in flight are discarded when the target is opened again.
//
// Crash safety: the known-good snapshot id is stored with each kept fix, in the same transaction
// as the attempt and the rule's new state. A kill at any point leaves either the old state (the
// snapshot taken but not recorded is dropped by the revert at resume) or the new one; an attempt
// that was under way is simply not recorded and is made again. Committed events are never rewritten.
//
// Run() returns OK when the batch ended (completed or cancelled) or when `stopping` turned true
// (the batch stays running and resumes at the next start); an error when the target or a model
// endpoint failed, after which the caller marks the batch failed (Fail()).
// Thread safety: one thread runs a BatchLoop (and the slots' threads it starts);
// RequestCancel may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/log.h"
#include "common/status.h"
#include "orchestrator/journal_event_types.h"
#include "orchestrator/library/fix_library.h"
#include "orchestrator/loop/episodic_memory.h"
#include "orchestrator/loop/fixpoint.h"
#include "orchestrator/loop/role_models.h"
#include "orchestrator/records.h"
#include "orchestrator/store/journal.h"
#include "stig/fix_bundle.h"
#include "stig/health.h"
#include "stig/platform_id.h"
#include "stig/scap/content.h"
#include "stig/scap/evaluator.h"
#include "stig/target.h"
#include "stig/verification.h"

namespace temper {

struct LoopServices {
  Journal& journal;
  // The roles' models; null only where temperd has none (no models.yaml), which runs apply batches
  // alone: they call no model.
  const RoleModels* models;
  const stig::Content& content;
  const stig::Evaluator& evaluator;
  const Logger& log;
  std::string results_root;  // OpenSCAP results go to <results_root>/batch-<id>/...
  uint32_t fixpoint_passes = kDefaultFixpointPasses;
  // loop.cross_check_verification: verify every attempt against the whole regression set as well
  // as the cut one (stig/verification.h), journalling the rules the cut would have missed.
  bool cross_check_verification = false;
  // Why the batch runs its parallel_attempts at once (ParallelAttemptsWhy), for batch.started.
  std::string parallel_why;
  // The library of proven fixes: kept fixes are recorded in it and tried before the model.
  // nullptr: no library (nothing recorded, nothing tried).
  FixLibrary* library = nullptr;
};

// A batch's failure record that the state store refused: the step that makes it, and the store's
// error, which the record gains when it is made at last (LoopRunner).
struct RefusedRecord {
  LoopStep step;
  Status refused;

  // Adds the store's refusal to the recorded error (naming its disk when it was full), once.
  void NoteRefusal();
};

class BatchLoop {
 public:
  // Failed attempts in a row before the Architect is asked to re-engage.
  static constexpr uint32_t kReengageAfter = 2;
  // Pending rules the Architect chooses among at once (in batch order).
  static constexpr size_t kCandidates = 8;
  // Corrections a role gets for an unusable structured answer.
  static constexpr int kMaxCorrections = 2;
  // Parallel: times a rule's attempt rejected on a fork is made again, uncounted, because fixes
  // landed on the main line after the fork was made.
  static constexpr uint32_t kMaxRemakes = 2;

  // All references must outlive the loop.
  BatchLoop(LoopServices services, stig::Target& target, BatchRecord batch, std::function<bool()> stopping);

  Status Run();
  // Marks the batch failed with `error` (after a Run() error), reverting the target first. When
  // the state store cannot take that record (full, failing), returns it with the store's error,
  // for the caller to commit again later (LoopRunner backs off between tries); nullopt once
  // recorded.
  std::optional<RefusedRecord> Fail(const Status& error);
  void RequestCancel() { cancel_requested_ = true; }

 private:
  struct RuleRun;       // one rule's attempts in this batch
  class Slot;           // where one attempt works: a fork, or the target itself
  struct TriedAttempt;  // what one attempt did, before the batch is told
  struct ProvenFix;     // a fix replayed as an attempt: the library's, or an apply batch's source's
  // kConflict: a parallel attempt's accepted change did not fit the main line; it is made again.
  enum class AttemptEnd { kKept, kReverted, kInterrupted, kConflict };
  // The Architect's choice of the next rule to work on.
  struct Picked {
    const stig::RuleInfo* rule = nullptr;
    std::string approach;
    TokenUsage usage;
  };
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
  // Asks the Architect for the next rule among `startable` (pending rules, in batch order; the
  // first kCandidates); nullopt when it skipped one (committed here) or none is given.
  Result<std::optional<Picked>> Pick(const std::vector<std::string>& startable);
  // Before the Architect is asked: the first of `startable` (in batch order) that the library of
  // proven fixes has a fix for, not looked up before in this run; started with no model call, its
  // first attempt the fix's replay (TryLibraryFirst). nullopt when none has one.
  Result<std::optional<Picked>> PickFromLibrary(const std::vector<std::string>& startable);
  // The loop with up to `slots` rules at once (see the top of this file); returns as Run does.
  Status RunSlots(uint32_t slots);
  // Why a parallel attempt is made again: its accepted change did not fit the main line (a commit
  // that could not merge, or failed its verification there), or it was rejected on a fork made
  // before fixes landed. Journalled as attempt.conflict's "cause".
  enum class RemakeCause { kCommit, kRejectedBehind };
  static const char* RemakeCauseName(RemakeCause c) { return c == RemakeCause::kCommit ? "commit" : "rejected_behind"; }
  // A parallel attempt that did not fit the main line: journalled (attempt.conflict, `cause` and
  // `why`) with its tokens, not counted as an attempt; kConflict, so it is made again on a fresh fork.
  Result<AttemptEnd> MadeAgain(RuleRun& run, const AttemptRecord& attempt, const std::string& fork, RemakeCause cause,
                               const std::string& why);
  // The batch's remakes so far, from the journal (resumes included), for batch.completed:
  // {"total": N, "commit": N, "rejected_behind": N}.
  Result<nlohmann::json> Remakes();
  // A parallel attempt's accepted fork onto the main line, under target_mu_ (see the top of this
  // file): the new snapshot, or nullopt with `conflict` saying why the attempt must be made again.
  // `report` becomes the main line's verification when it was verified again there.
  Result<std::optional<stig::SnapshotId>> CommitToMainLine(stig::Target& fork, stig::SnapshotId forked_from,
                                                           const stig::VerificationRequest& request,
                                                           stig::VerificationReport& report, std::string& conflict);
  Status RunRule(const stig::RuleInfo& rule, std::string approach, TokenUsage pick_usage);
  Result<ReengageDecision> Reengage(RuleRun& run, const RecalledMemory& memory);
  // One attempt: a slot opened at the known-good state, the attempt run there (TryAttempt), its
  // outcome applied to the batch (ApplyAttempt).
  Result<AttemptEnd> Attempt(RuleRun& run, const RecalledMemory& memory);
  // Run: the Worker on the slot's tree, then the evaluator's judgement, as a plain outcome; only
  // the journal's attempt.started and worker events are written. On an error the slot is discarded.
  Result<TriedAttempt> TryAttempt(const RuleRun& run, const RecalledMemory& memory, Slot& slot);
  // Outcome to step: kept (the slot's change becomes the known-good snapshot), made again (a
  // fork that did not fit the main line, or rejected while fixes landed), or rejected (discarded,
  // the Reflector's lesson); committed with the rule's state, the lessons' utilities and events.
  Result<AttemptEnd> ApplyAttempt(RuleRun& run, const RecalledMemory& memory, Slot& slot, TriedAttempt tried);
  Result<AttemptEnd> Keep(RuleRun& run, const RecalledMemory& memory, Slot& slot, TriedAttempt& tried);
  Result<AttemptEnd> Reject(RuleRun& run, const RecalledMemory& memory, Slot& slot, TriedAttempt& tried);
  // What the slot changed since it opened, and the evaluator's judgement of it (the rule, the rules
  // passing before, the health checks), into `tried`: the second half of any attempt.
  Status Judge(const RuleRun& run, Slot& slot, TriedAttempt& tried, std::chrono::steady_clock::time_point acted_at);
  // A proven fix as one attempt (see the top of this file): replayed on a slot, judged, kept or
  // rejected. A rejection commits the attempt (and, for the library's fix, a lesson) and fills
  // `refused` with why; kConflict when a parallel attempt must be made again.
  Result<AttemptEnd> ReplayAttempt(RuleRun& run, const ProvenFix& fix, std::string& refused);
  Result<TriedAttempt> TryReplay(const RuleRun& run, const ProvenFix& fix, Slot& slot);
  Result<AttemptEnd> RejectReplay(RuleRun& run, const ProvenFix& fix, Slot& slot, TriedAttempt& tried);
  // Before a rule's first model attempt: the library's proven fix for it, when one matches; true
  // when it was kept.
  Result<bool> TryLibraryFirst(RuleRun& run);
  // A kept attempt's fix into the library (a Worker's fix, captured whole).
  void RecordInLibrary(const RuleRun& run, const TriedAttempt& tried, int64_t attempt_id);
  // The target's platform, read once per batch (first at the start, before any rule thread runs); an
  // error when it cannot be told, which leaves the library out of this batch.
  Result<stig::TargetPlatform> Platform();
  // An apply batch's loop in place of RunSlots (see the top of this file).
  Status RunApply();
  // One pass of it: the source's kept fixes for the rules pending now, in the order they were kept.
  Status ApplyPass(const std::vector<AttemptRecord>& kept, std::set<int64_t>& replayed);
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
  BatchRecord batch_;  // as last read (RefreshBatch); under mu_ while rule threads run
  const int64_t batch_id_;
  const Budgets budgets_;
  const bool allow_disruptive_;
  std::function<bool()> stopping_;
  std::atomic<bool> cancel_requested_{false};
  std::atomic<bool> cancelled_{false};
  EpisodicMemory memory_;
  bool forks_ = false;  // attempts on forks of the known-good snapshot (else on the target itself)

  // What the rule threads share: mu_ guards the batch as last read, the
  // known-good snapshot and health, the recent events and the rules in flight; target_mu_ orders
  // what the main target does (forks made, committed or dropped; verifications on it).
  mutable std::mutex mu_;
  std::mutex target_mu_;
  std::condition_variable rule_finished_;
  std::set<std::string> in_flight_;
  Status thread_error_;              // the first error a rule thread ended with
  std::atomic<bool> failed_{false};  // set with thread_error_: the other threads stop
  uint32_t good_snapshot_ = 0;
  std::optional<stig::HealthReport> health_;  // at the known-good state
  std::vector<std::string> recent_;           // for the Architect's batch view
  std::set<std::string> library_looked_up_;   // PickFromLibrary's rules so far (the main thread's)
  std::mutex platform_mu_;
  std::optional<Result<stig::TargetPlatform>> platform_;  // under platform_mu_, once read
};

}  // namespace temper
