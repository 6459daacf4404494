// Verdict: OpenSCAP's own result for one rule, as XCCDF 1.2 names it (section 6.6.4.2).
//
// The evaluator never derives a verdict from text it matched itself; it maps libopenscap's
// xccdf_test_result_type_t one to one onto this enum, so "notchecked" and "unknown" stay distinct
// from "fail" and a rule is only ever called passing when OpenSCAP said so.
// Thread safety: pure functions.
#pragma once

#include <string_view>

#include "common/status.h"

namespace temper::stig {

enum class Verdict {
  kPass,
  kFail,
  kError,
  kUnknown,
  kNotApplicable,
  kNotChecked,
  kNotSelected,
  kInformational,
  kFixed,
};

// The XCCDF token: "pass", "fail", "error", "unknown", "notapplicable", "notchecked",
// "notselected", "informational", "fixed".
std::string_view VerdictName(Verdict v);

// Parses an XCCDF token. InvalidArgument names the token when it is not one of the nine.
Result<Verdict> ParseVerdict(std::string_view token);

// Pass and fixed are the verdicts a remediation may count as success.
inline bool IsPassing(Verdict v) { return v == Verdict::kPass || v == Verdict::kFixed; }

}  // namespace temper::stig
