#include "stig/verdict.h"

#include <array>
#include <string>
#include <utility>

namespace temper::stig {
namespace {

constexpr std::array<std::pair<Verdict, std::string_view>, 9> kNames{{
    {Verdict::kPass, "pass"},
    {Verdict::kFail, "fail"},
    {Verdict::kError, "error"},
    {Verdict::kUnknown, "unknown"},
    {Verdict::kNotApplicable, "notapplicable"},
    {Verdict::kNotChecked, "notchecked"},
    {Verdict::kNotSelected, "notselected"},
    {Verdict::kInformational, "informational"},
    {Verdict::kFixed, "fixed"},
}};

}  // namespace

std::string_view VerdictName(Verdict v) {
  for (const auto& [verdict, name] : kNames) {
    if (verdict == v) return name;
  }
  return "?";
}

Result<Verdict> ParseVerdict(std::string_view token) {
  for (const auto& [verdict, name] : kNames) {
    if (name == token) return verdict;
  }
  return Status::InvalidArgument("not an XCCDF rule result: \"" + std::string(token) + "\"");
}

}  // namespace temper::stig
