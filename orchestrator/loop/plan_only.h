// Plan-only batches: the loop runs as usual, then the target goes back to the snapshot the batch
// started from, so the batch reports what it would change and which rules it could fix while
// nothing stays changed. The loop reverts when the batch completes, is cancelled or fails. A crash
// between that end and the revert would leave the plan's changes on the target, and the next batch
// would start from them, treating a plan as a known-good base. So before anything else uses a
// target (a batch, a `temper revert`), RevertEndedPlan puts that right.
#pragma once

#include <string>

#include "common/status.h"
#include "orchestrator/store/journal.h"
#include "stig/target.h"

namespace temper {

// When the batch that started last on `target_name` is a plan-only batch that has ended and the
// target holds anything beyond the snapshot it started from, reverts the target to that snapshot
// and journals "batch.plan_reverted" ({"recovered": true}) for the batch. Returns whether it
// reverted. Errors: the store's, and the target's Revert's.
Result<bool> RevertEndedPlan(Journal& journal, stig::Target& target, const std::string& target_name);

}  // namespace temper
