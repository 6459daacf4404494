// BatchRevert: `temper revert BATCH [RULE]` takes a batch's changes, or one rule's, back out of its
// target (users of SCAP remediation are told "restore a snapshot or reinstall"; this is the
// per-run and per-rule undo they ask for).
//
// Each kept fix is one frozen snapshot on the target (stig/rootfs/overlay_snapshots.h), and the store
// records the snapshot each batch started from and the one each kept attempt made. So:
//   - revert BATCH returns the target to the batch's start snapshot. Refused when a later batch
//     kept changes on top (they would go too: revert those first, newest first);
//   - revert BATCH RULE takes exactly that rule's snapshots (two when the fixpoint fixed it again)
//     out of the middle of the stack; later snapshots keep their ids. Refused when a later
//     snapshot holds a path the rule's changed: dropping it alone would leave the later version,
//     so the refusal names that rule and the paths, and the way is reverse order.
// Both refuse while the target has changes no snapshot holds (a revert would discard them).
// Then the batch's rules are evaluated again (a rule's revert: that rule and those that passed),
// the reverted rules become kReverted with their fresh verdicts, the attempts whose changes went
// are marked, and the journal says what happened: "batch.revert_started" / "rule.revert_started"
// before the target is touched, "batch.reverted" / "rule.reverted" after. A crash in between is
// completed by running the same revert again: snapshots already gone are skipped.
//
// The caller holds the target exclusively (TargetSlots) and has made sure no batch runs on it.
// Thread safety: stateless; the target is used by the calling thread only.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "orchestrator/records.h"
#include "orchestrator/store/journal.h"
#include "stig/scap/content.h"
#include "stig/scap/evaluator.h"
#include "stig/target.h"

namespace temper {

struct RevertServices {
  Journal& journal;
  const stig::Content& content;  // the batch's datastream and profile
  const stig::Evaluator& evaluator;
  std::string results_root;  // the re-evaluation's results go to <results_root>/batch-<id>/revert-<ms>
};

struct RevertRequest {
  int64_t batch_id = 0;
  std::string rule_id;  // full XCCDF id; empty: the whole batch
};

struct RevertOutcome {
  BatchRecord batch;  // as stored afterwards, with its rules
  std::vector<std::string> reverted_rules;
  std::vector<stig::SnapshotId> dropped_snapshots;    // a rule's revert
  std::optional<stig::SnapshotId> restored_snapshot;  // a batch's revert
  std::vector<std::string> now_failing;               // rules that passed before the revert and fail after it
  std::string results_dir;
};

// The checks that need neither the target nor the content: the batch has run, has ended, was not
// plan-only or reverted already; a rule is the batch's and was fixed. NotFound or FailedPrecondition
// as RevertBatch.
Status CheckRevertRequest(const BatchRecord& batch, const RevertRequest& request);

// Errors: NotFound (no such batch, or rule in it); FailedPrecondition with what is in the way (the
// batch is queued, running, plan-only or already reverted, a later batch or rule is on top, the
// target has unsnapshotted changes); the target's and the evaluator's errors.
Result<RevertOutcome> RevertBatch(const RevertServices& services, stig::Target& target, const RevertRequest& request);

}  // namespace temper
