// EvidenceChecklist: a batch's evidence as a STIG Viewer checklist (one iSTIG for the batch's
// profile, one VULN per rule), for the CKL and CKLB exports.
//
// STATUS says what an assessor may conclude, never more than OpenSCAP and the loop showed:
//   verdict pass or fixed                  -> NotAFinding
//   verdict fail, or rule escalated        -> Open
//   verdict notapplicable                  -> Not_Applicable
//   manual rule, or any other verdict      -> Not_Reviewed (notchecked, unknown, error, none yet)
//   waived                                 -> Open (Not_Applicable when OpenSCAP found the rule not
//                                             applicable), with the waiver in COMMENTS: a waiver is
//                                             a risk accepted and tracked on the POA&M, not a fix,
//                                             so it is never NotAFinding
//   reboot pending, held                   -> Open: the fix is not in effect
// The verdict is the one the target stands at (RuleEvidence::latest_verdict): for a plan-only
// batch, which reverted everything, the verdict before the batch.
// FINDING_DETAILS carries the verdicts with OpenSCAP's OVAL evidence and the change set that was
// applied; COMMENTS the loop's account: the state and its reason (why temper gave up on an
// escalated rule), the waiver, and every attempt with its approach, outcome and reflection. Each is
// cut at kMaxChecklistText bytes (the 32,767-character cell limit that STIG Manager's and
// spreadsheet exports of checklists keep to).
//
// DISA's own V- and SV- ids are not in SCAP Security Guide's Ubuntu 20.04 content, which carries
// only the DISA STIG id (UBTU-20-010047). With DISA's STIG file (stig/scap/disa_stig.h) the
// checklist is DISA's STIG: one VULN per requirement, in DISA's order and with DISA's ids and
// texts, so STIG Viewer, STIG Manager and eMASS merge it with the site's own checklists. The batch's
// rules whose STIG id is the requirement's decide its STATUS (the worst of theirs: Open, then
// Not_Reviewed, then NotAFinding, then Not_Applicable) and fill FINDING_DETAILS and COMMENTS, each
// headed by the SSG rule's name; a requirement no rule of the batch implements is Not_Reviewed,
// saying why. Rules whose STIG ids DISA's file lacks are named in the target comment.
// Without DISA's file, Vuln_Num holds the SSG rule name, Rule_ID the full XCCDF rule id and
// Rule_Ver the STIG id, and the target comment says the ids are SSG's.
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <string>

#include "orchestrator/evidence/checklist.h"
#include "orchestrator/evidence/evidence_report.h"
#include "stig/scap/disa_stig.h"

namespace temper::evidence {

inline constexpr std::size_t kMaxChecklistText = 32767;

// The status of `rule`, as above.
ChecklistStatus ChecklistStatusOf(const RuleEvidence& rule);

// The batch's checklist; DISA's STIG when `disa` is given, as above.
Checklist EvidenceChecklist(const EvidenceReport& report, const stig::DisaStig* disa = nullptr);

// The worst of two statuses, as a requirement implemented by several rules takes it.
ChecklistStatus WorseStatus(ChecklistStatus a, ChecklistStatus b);

}  // namespace temper::evidence
