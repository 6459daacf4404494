// ExportHtml: a batch's evidence as one self-contained HTML page, for people and for print.
//
// The page stands alone: inline CSS, no scripts, no external links or fonts, so it opens the same
// on an air-gapped workstation and in an archive years later. It shows the before/after score,
// a table of every rule (severity, DISA STIG id, state, verdicts, checklist status), then per rule
// its metadata, why it ended where it did, OpenSCAP's evidence before and after, and each attempt
// with its approach, commands, outcome, reflection and the diff it applied or tried. Every text
// from outside temper (rule text, diffs, collected items, model output) is escaped
// (markup_escape.h). Print styles keep each rule's section together and show long lines wrapped.
// Thread safety: pure function.
#pragma once

#include <string>

#include "orchestrator/evidence/evidence_report.h"

namespace temper::evidence {

std::string ExportHtml(const EvidenceReport& report);

}  // namespace temper::evidence
