// RulePolicy: which rules the loop may remediate at all, decided once per rule right after the
// "before" evaluation, from the batch's options (waivers, allow_disruptive) and the rule's content
// (manual: stig/scap/classification.h; disruptive: stig/scap/rule_risk.h). In order:
//   1. a waiver that has not expired        → waived (whatever the verdict; never counted as pass)
//      an expired waiver is flagged (a "waiver.expired" event) and the rule goes on as unwaived;
//   2. no automated check (OCIL only)       → manual (a person reviews it; never counted as pass)
//      a check that needs the running system, undecided (error, unknown) on a target that has none
//      (a root file system)                 → skipped, saying it needs a live host (service_*_enabled:
//                                             SSG asks systemd over D-Bus), not an error of the run
//   3. failing, disruptive, no opt-in       → held, the detail saying why and how to opt in
//   4. otherwise                            → as the verdict says (pending, already passing, ...)
// Rules decided here are final before the Architect's first pick, so it is never offered them.
// The decision is committed in the same step as the verdicts: a crash never leaves one without the
// other, and a resumed batch does not decide (or flag) a rule twice.
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "orchestrator/journal_event_types.h"
#include "orchestrator/records.h"
#include "stig/scap/content.h"
#include "stig/verdict.h"

namespace temper {

// A journal event about the rule.
struct PolicyEvent {
  EventType type;  // rule.waived, waiver.expired, rule.manual or rule.held
  nlohmann::json data;
};

struct PolicyDecision {
  std::optional<RuleState> state;  // nullopt: the verdict decides, as it would without a policy
  std::string detail;              // with state
  std::vector<PolicyEvent> events;
};

// `now` decides which waivers have expired; `target_is_live` is false for a target without a running
// system (Target::ChangesAreFilesOnly).
PolicyDecision DecideRule(const stig::RuleInfo& rule, stig::Verdict before, const BatchOptions& options, TimeMs now,
                          bool target_is_live = true);

// What a kept fix of `rule` leaves the rule in: reboot_pending when SSG says its fix takes effect
// only after a reboot (the change stays staged until `temper rebooted` re-verifies it), else fixed.
RuleState KeptFixState(const stig::RuleInfo& rule);

}  // namespace temper
