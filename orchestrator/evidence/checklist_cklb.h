// CKLB: the STIG Viewer 3 checklist file (JSON), written and read.
//
// DISA publishes no schema for CKLB; the fields are those STIG Viewer 3 writes and reads, as other
// tools that exchange CKLB with it (STIG Manager's export, MITRE's converters) use them: top-level
// title, id, stigs, active, mode, has_path, target_data and cklb_version "1.0"; per STIG its name,
// id, release, version, uuid, reference_identifier, size and rules; per rule group_id(_src),
// rule_id(_src), rule_version, severity, titles, discussion, check and fix text, ccis, status,
// finding_details, comments and the rest of the DISA rule fields. Each CKL attribute maps to one
// CKLB field (the table is in checklist_cklb.cpp), so a Checklist read from either format writes to
// either. Identifiers CKL lacks (rule uuids) are derived from the content, so two exports of the
// same checklist are the same bytes.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "orchestrator/evidence/checklist.h"

namespace temper::evidence {

// The checklist as a CKLB document (pretty-printed UTF-8 JSON).
std::string WriteCklb(const Checklist& checklist);

// Reads a CKLB document; `source` names it in errors. DataLoss naming the JSON path
// ("stigs[0].rules[3].status") for text that is not JSON, a missing stigs or rules array, a field of
// the wrong type, or an unknown status. Fields it does not map are ignored.
Result<Checklist> ReadCklb(std::string_view json, const std::string& source);

}  // namespace temper::evidence
