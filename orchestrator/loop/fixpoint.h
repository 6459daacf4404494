// Fixpoint: the loop does not trust that a rule it fixed (or found passing, or not applicable)
// still is when the batch ends. Users of SCAP remediation run it twice because one fix breaks or
// un-gates another (oscap#1880, #8487: a fix installs a package and a rule that was not applicable
// now fails). So once no rule is pending, every rule of the batch is evaluated again; a rule that
// flipped is re-queued and the loop runs again, up to a bound of passes; rules still flipping at
// the bound are escalated, with why.
//
// A rule flipped when its last known verdict (the loop's after verdict, else the one before the
// batch) was passing and the rescan says fail, error or unknown (a later change broke it), or was
// "notapplicable" and the rescan says "fail" (a later change un-gated it). Only rules the loop
// decided on its own are re-queued: fixed, already passing, and skipped-as-not-applicable ones;
// waived, manual, held and reboot-pending rules are policy's, escalated and errored ones a human's.
// Every rescan also records each rule's verdict as its after verdict, so the next pass compares
// against this one, and a rule that stays failing is not counted as flipping again.
//
// Pure functions of the batch and the rescan; the loop commits the decision in one step.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "orchestrator/budgets.h"
#include "orchestrator/records.h"
#include "stig/scap/evaluator.h"

namespace temper {

struct FlippedRule {
  std::string rule_id;
  std::string was;     // the last known verdict
  std::string now;     // the rescan's
  std::string reason;  // for people: "passed before, fails now: a later change broke it"
};

struct FixpointDecision {
  FixpointPass pass;                // to append to the batch's passes
  std::vector<FlippedRule> flips;   // in batch order
  std::vector<RuleUpdate> updates;  // after verdicts for every rescanned rule; re-queues, escalations
};

// Decides pass `pass_number` (1-based) of at most `max_passes` from the batch as stored and the
// rescan of its rules. `attempts` and `fixed` are the attempts made (and kept) during the pass.
// Flips are re-queued while pass_number < max_passes, escalated at the bound; the pass is final
// when nothing was re-queued.
FixpointDecision DecidePass(const BatchRecord& batch, const stig::Evaluation& rescan, uint32_t pass_number,
                            uint32_t max_passes, uint32_t attempts, uint32_t fixed);

}  // namespace temper
