#include "stig/scap/classification.h"

#include <catch2/catch.hpp>

namespace temper::stig {
namespace {

TEST_CASE("Classify separates static checks from live-host checks", "[stig][classification]") {
  CHECK(Classify({"dpkginfo", "textfilecontent54", "variable"}, true).decidability == Decidability::kRootfs);
  Classification live = Classify({"textfilecontent54", "sysctl", "systemdunitproperty", "sysctl"}, true);
  CHECK(live.decidability == Decidability::kLiveHost);
  CHECK(live.live_test_types == std::vector<std::string>{"sysctl", "systemdunitproperty"});
  CHECK(Classify({}, false).decidability == Decidability::kManual);
  CHECK(IsLiveOnlyTestType("partition"));
  CHECK_FALSE(IsLiveOnlyTestType("file"));
  CHECK(DecidabilityName(Decidability::kLiveHost) == "live");
}

}  // namespace
}  // namespace temper::stig
