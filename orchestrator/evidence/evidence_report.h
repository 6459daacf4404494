// EvidenceReport: everything an assessor asks about one batch, gathered once for every export
// format (ARF, CKL, CKLB, HTML).
//
// Per rule: the rule's metadata from the datastream (title, severity, DISA STIG ids, CCIs, SRGs,
// description, check, fix), its final state with the loop's reason (why it was escalated, skipped
// or waived), OpenSCAP's verdicts before and after with the OVAL evidence behind each
// (oval_evidence.h, read from the batch's before/ and after/ ARF files), and every attempt with
// its approach, commands, outcome, reflection and the change set it applied or tried
// (change_set.h). For the batch: the before/after score and where OpenSCAP's files are.
// Thread safety: CollectEvidence reads the store (itself thread-safe) and files; the report is a value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "orchestrator/records.h"
#include "orchestrator/store/state_store.h"
#include "stig/change_set.h"
#include "stig/scap/content.h"
#include "stig/scap/oval_evidence.h"

namespace temper::evidence {

struct AttemptEvidence {
  AttemptRecord attempt;
  stig::ChangeSet changes;    // empty when the attempt recorded none
  std::string changes_error;  // why the stored change set could not be read; empty when it could
};

struct RuleEvidence {
  BatchRuleRecord rule;
  const stig::RuleInfo* info = nullptr;      // null for an id the datastream lacks (state error)
  std::optional<stig::RuleEvidence> before;  // OpenSCAP's evidence before any fix, when evaluated
  std::optional<stig::RuleEvidence> after;   // at the end of the batch
  std::vector<AttemptEvidence> attempts;     // oldest first
  std::optional<Waiver> waiver;              // the batch's waiver for the rule, if any
  // A plan-only batch reverted every change: the target stands where it stood before.
  bool plan_only = false;

  // The verdict the target stands at: before the batch for a plan-only batch, else after the batch
  // if evaluated then, else before.
  const std::string& latest_verdict() const {
    return plan_only || rule.after_verdict.empty() ? rule.before_verdict : rule.after_verdict;
  }
  // The kept attempt (the fix that stayed), or null.
  const AttemptEvidence* kept() const;
};

// Rules OpenSCAP passed and failed; the rest (not applicable, not checked, errors) are neither.
struct Score {
  uint32_t pass = 0;
  uint32_t fail = 0;
  uint32_t other = 0;
  // pass / (pass + fail) as a percentage; nullopt when no rule passed or failed.
  std::optional<double> percent() const;
};

struct EvidenceReport {
  BatchRecord batch;  // with its rules
  std::string benchmark_id;
  stig::ProfileInfo profile;
  std::string before_arf;  // paths of OpenSCAP's ARF files; empty when that evaluation has not run
  std::string after_arf;
  std::vector<RuleEvidence> rules;  // in the batch's order
  Score before;
  Score after;  // where the target stands (for a plan-only batch, as before)
  TimeMs generated_at = 0;
};

// "2026-11-23 03:00:00 UTC".
std::string IsoTime(TimeMs ms);

// Where the loop keeps a batch's OpenSCAP results: <results_root>/batch-<id>/<leaf> (BatchLoop
// writes "before" and "after" there).
std::string BatchResultsDir(const std::string& results_root, int64_t batch_id, const std::string& leaf);

// Gathers the report of batch `batch_id`, whose datastream and profile `content` was loaded from.
// Errors: NotFound for an unknown batch; DataLoss when an ARF file of the batch is unreadable
// (named); the store's errors.
Result<EvidenceReport> CollectEvidence(StateStore& store, const stig::Content& content, const std::string& results_root,
                                       int64_t batch_id);

}  // namespace temper::evidence
