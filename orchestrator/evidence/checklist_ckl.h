// CKL: the STIG Viewer 2 checklist file (XML), written and read.
//
// The layout follows DISA's U_Checklist_Schema_V2.xsd (checklist schema 2.5, shipped inside STIG
// Viewer 2.17; a copy is in tests/data/checklist/), element for element and in its order:
// CHECKLIST/ASSET, STIGS/iSTIG/STIG_INFO/SI_DATA, and VULN with its STIG_DATA, STATUS,
// FINDING_DETAILS, COMMENTS, SEVERITY_OVERRIDE and SEVERITY_JUSTIFICATION.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "orchestrator/evidence/checklist.h"

namespace temper::evidence {

// The checklist as a CKL document (UTF-8, tab-indented as STIG Viewer writes it).
std::string WriteCkl(const Checklist& checklist);

// Reads a CKL document. `source` names it in errors. DataLoss with the line for XML that is not
// well-formed, for a root that is not CHECKLIST, or for an unknown STATUS; missing optional
// elements read as empty. Parsed without network access, DTDs or entity expansion.
Result<Checklist> ReadCkl(std::string_view xml, const std::string& source);

}  // namespace temper::evidence
