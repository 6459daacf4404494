// TEMPER_DCHECK as a release build has it, whatever this build is: NDEBUG is set before the header
// (dcheck_test.cpp checks the debug form).
#include <catch2/catch.hpp>

#ifndef NDEBUG
#define NDEBUG
#endif
#include "common/dcheck.h"

namespace temper {
namespace {

TEST_CASE("a release TEMPER_DCHECK never evaluates its condition") {
  int evaluated = 0;
  TEMPER_DCHECK(++evaluated < 0, "never evaluated, so never fails");
  CHECK(evaluated == 0);
}

}  // namespace
}  // namespace temper
