// XCCDF results of a DISA checklist: an XCCDF 1.2 TestResult whose rule results carry DISA's rule
// ids (xccdf_mil.disa.stig_rule_SV-238213r653796_rule) and whose benchmark is DISA's STIG
// (xccdf_mil.disa.stig_benchmark_Canonical_Ubuntu_20-04_LTS_STIG): the form STIG Manager's XCCDF
// import and SCAP tools that key on DISA's ids read. OpenSCAP's own ARF carries SSG's ids instead.
//
// Result per STATUS: NotAFinding -> pass, Open -> fail, Not_Applicable -> notapplicable,
// Not_Reviewed -> notchecked. FINDING_DETAILS goes to the rule result's <message>, COMMENTS to
// <check-content><comment> in temper's namespace (STIG Manager reads a review's comment there).
// Thread safety: pure functions.
#pragma once

#include <string>

#include "orchestrator/evidence/checklist.h"
#include "orchestrator/records.h"

namespace temper::evidence {

struct XccdfResultsRun {
  std::string test_result_id;  // the part after xccdf_temper_testresult_, e.g. "batch-7"
  std::string title;           // "temper batch 7 (nightly)"
  TimeMs start_time = 0;
  TimeMs end_time = 0;
};

// The results of `checklist`'s first STIG, whose ids must be DISA's (EvidenceChecklist with a
// DISA STIG). The target is the checklist's host name.
std::string WriteXccdfResults(const Checklist& checklist, const XccdfResultsRun& run);

}  // namespace temper::evidence
