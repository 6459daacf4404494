// The XML namespaces of the SCAP documents temper reads, named once for every reader
// (content_policy, datastream_ids, disa_stig, oval_evidence).
#pragma once

#include <string_view>

namespace temper::stig {

inline constexpr std::string_view kXccdf11Ns = "http://checklists.nist.gov/xccdf/1.1";
inline constexpr std::string_view kXccdf12Ns = "http://checklists.nist.gov/xccdf/1.2";

// XCCDF 1.2 (SCAP Security Guide's datastreams, DISA's SCAP benchmarks) or 1.1 (DISA's manual STIGs).
inline bool IsXccdfNamespace(std::string_view ns) { return ns == kXccdf12Ns || ns == kXccdf11Ns; }

}  // namespace temper::stig
