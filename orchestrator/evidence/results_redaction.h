// Results redaction: OpenSCAP's results leave temperd without password hashes.
//
// A profile rule that checks accounts' password aging or hashing (accounts_password_set_max_life_
// existing, accounts_password_all_shadowed_sha512, ...) makes OpenSCAP collect every account of
// /etc/shadow as a shadow_item, and its <password> element holds the account's hash: the ARF export
// would hand every hash on the target to whoever asks for evidence, and the OVAL evidence shown in
// the HTML and checklist exports would print them. So each <password> element of an exported ARF,
// and each "password" field of an OVAL item in the evidence, is replaced by the marker of
// change_set_redaction.h, naming the algorithm ("<sha512crypt hash redacted>"); values that are not
// hashes ("", "*", "!", "x") stay, since the checks judge them. The results files under the state
// directory keep the hashes (they are root's alone, private_files.h); only what is exported is
// redacted.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "stig/scap/oval_evidence.h"

namespace temper::evidence {

// `xml` with the text of every <password> element (any namespace prefix) redacted; the markers are
// written escaped ("&lt;sha512crypt hash redacted&gt;").
std::string RedactPasswordElements(std::string_view xml);

// Redacts the "password" fields of every item of every test of `evidence`.
void RedactPasswordFields(std::vector<stig::RuleEvidence>& evidence);

}  // namespace temper::evidence
