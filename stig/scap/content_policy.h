// ContentPolicy: what temper lets a SCAP source datastream make OpenSCAP do.
//
// temperd evaluates as root, and OpenSCAP can do more than read a target's files: an XCCDF check
// whose system is SCE (http://open-scap.org/page/SCE) runs a script the datastream carries, and a
// reference that names no component of the datastream makes libopenscap open another file (a
// ds:component-ref with xlink:href "file:...", a CPE check href, resolved against the
// datastream's directory) or fetch a URL. A datastream is allowed only when:
//   - every XCCDF check (in rules, complex checks, anywhere) uses OVAL, which OpenSCAP's probes
//     evaluate by reading state, or OCIL, a questionnaire that is never executed (temper reports
//     such rules as manual);
//   - every ds:component-ref points inside the datastream (xlink:href "#id"), and so does every
//     catalog entry (uri "#id");
//   - every check href (XCCDF check-content-ref, CPE dictionary check, CPE language
//     check-fact-ref) names a catalog entry of the datastream, so it resolves to one of its
//     components and never to a path or URL.
// The check reads the XML itself (libxml2's streaming reader: no network, no entity substitution,
// no DTD loading) rather than libopenscap's model, so it sees every element whatever libopenscap
// would make of it, and it is cheap (about 0.08 s for the 11 MB Ubuntu 20.04 content).
//
// Used at load (Content::Load) and again by temper-stig-eval on the file it evaluates, so content
// that reaches the evaluator by any other road (temper baseline, tests) is refused too.
// Thread safety: reentrant (libxml2's reader keeps its state per call).
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace temper::stig {

inline constexpr std::string_view kOvalCheckSystem = "http://oval.mitre.org/XMLSchema/oval-definitions-5";
// OCIL 2.0; both spellings occur in published content.
inline constexpr std::string_view kOcilCheckSystem = "http://scap.nist.gov/schema/ocil/2";
inline constexpr std::string_view kOcilCheckSystem20 = "http://scap.nist.gov/schema/ocil/2.0";

// OK when the datastream at `path` keeps to the policy above. Errors: PermissionDenied listing
// each violation (at most the first 10, and how many there were) with its line, the rule id and
// the check system or href; NotFound when the file is missing; DataLoss when it is not well-formed
// XML (libxml2's message and line) or not a SCAP source datastream.
Status CheckContentPolicy(const std::string& path);

}  // namespace temper::stig
