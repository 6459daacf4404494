// The skip's contract (skip.h), read where ctest reads it: the exit status of a process running
// the hidden probe cases below through the shared main.
#include "skip.h"

#include <catch2/catch.hpp>

#include "self_run.h"

namespace temper::testing {
namespace {

using Catch::Contains;

TEST_CASE("skip probe: skips", "[.skip_probe]") { TEMPER_SKIP("the probe cannot run here"); }

TEST_CASE("skip probe: fails and then skips", "[.skip_probe]") {
  CHECK(1 + 1 == 3);
  TEMPER_SKIP("the probe skips after a failure");
}

TEST_CASE("skip probe: passes", "[.skip_probe]") { CHECK(1 + 1 == 2); }

TEST_CASE("a case that skips exits with the skip status and says why", "[skip]") {
  const SelfRun run = RunSelf("skip probe: skips");
  INFO(run.out);
  CHECK(run.status == kSkippedExitStatus);
  CHECK_THAT(run.out, Contains("SKIPPED: the probe cannot run here"));
  CHECK_THAT(run.out, Contains("1 test case(s) skipped (exit status 77):\n  skip probe: skips\n"));
}

TEST_CASE("a case that failed before it skipped is reported failed, never skipped", "[skip]") {
  const SelfRun run = RunSelf("skip probe: fails and then skips");
  INFO(run.out);
  CHECK(run.status != 0);
  CHECK(run.status != kSkippedExitStatus);
}

TEST_CASE("a run skips when a case skipped and none failed, passes when none skipped, fails on any failure", "[skip]") {
  CHECK(RunSelf("skip probe: skips,skip probe: passes").status == kSkippedExitStatus);
  CHECK(RunSelf("skip probe: passes").status == 0);
  const SelfRun failed = RunSelf("skip probe: skips,skip probe: fails and then skips,skip probe: passes");
  CHECK(failed.status != 0);
  CHECK(failed.status != kSkippedExitStatus);
}

TEST_CASE("a run with as many failed assertions as the skip status still reads as failed", "[skip]") {
  CHECK(RunExitStatus(kSkippedExitStatus) != kSkippedExitStatus);
  CHECK(RunExitStatus(kSkippedExitStatus) != 0);
  CHECK(RunExitStatus(1) == 1);
}

}  // namespace
}  // namespace temper::testing
