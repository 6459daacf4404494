#include "stig/verdict.h"

#include <catch2/catch.hpp>

namespace temper::stig {
namespace {

TEST_CASE("Verdict tokens round-trip and unknown tokens are named", "[stig][verdict]") {
  for (Verdict v : {Verdict::kPass, Verdict::kFail, Verdict::kError, Verdict::kUnknown, Verdict::kNotApplicable,
                    Verdict::kNotChecked, Verdict::kNotSelected, Verdict::kInformational, Verdict::kFixed}) {
    auto parsed = ParseVerdict(VerdictName(v));
    REQUIRE(parsed.ok());
    CHECK(*parsed == v);
  }
  CHECK(VerdictName(Verdict::kNotApplicable) == "notapplicable");
  auto bad = ParseVerdict("passed");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("\"passed\"") != std::string::npos);
  CHECK(IsPassing(Verdict::kFixed));
  CHECK_FALSE(IsPassing(Verdict::kNotApplicable));
}

}  // namespace
}  // namespace temper::stig
