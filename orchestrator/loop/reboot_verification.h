// Reboot verification: the second half of a fix that takes effect only after a reboot.
//
// The loop leaves such a rule reboot_pending, its change staged and kept (rule_policy.h,
// KeptFixState). Once the operator says the host rebooted (temper rebooted → ConfirmReboot, a
// "reboot.confirmed" event), the target's thread in LoopRunner evaluates the batch's reboot_pending
// rules again on the target as it is now: pass → fixed, anything else → escalated with the verdict,
// so a fix that did not survive the reboot goes to a human. The outcome (rule states, one
// rule.fixed / rule.escalated event per rule and a "reboot.verified" summary) is committed in one
// step, which also clears the confirmation. When the target cannot be evaluated, the rules stay
// reboot_pending, a "reboot.verification_failed" event says why, and `temper rebooted` may be run
// again. OpenSCAP's results go to <results_root>/batch-<id>/after-reboot-<confirmation seq>.
//
// Thread safety: call from the thread that owns the target.
#pragma once

#include <string>

#include "common/status.h"
#include "orchestrator/records.h"
#include "orchestrator/store/journal.h"
#include "stig/scap/evaluator.h"
#include "stig/target.h"

namespace temper {

// `batch` has a pending confirmation (reboot_confirmed_seq) and its rules; OpenSCAP's results go
// under `results_root`. Errors only when the outcome cannot be committed.
Status VerifyAfterReboot(Journal& journal, stig::Target& target, const stig::Evaluator& evaluator,
                         const std::string& results_root, const BatchRecord& batch);

// Gives up the pending confirmation of `batch` with a "reboot.verification_failed" event saying
// `why` (the content or the target could not be opened); the rules stay reboot_pending.
Status AbandonRebootVerification(Journal& journal, const BatchRecord& batch, const Status& why);

}  // namespace temper
