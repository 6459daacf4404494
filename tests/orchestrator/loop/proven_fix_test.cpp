// The approaches that name a replayed proven fix: written and read back exactly, and nothing else
// (a model's approach, however close) read as one.
#include "orchestrator/loop/proven_fix.h"

#include <catch2/catch.hpp>

namespace temper {
namespace {

TEST_CASE("a proven fix's approach is read back to where the fix came from") {
  const std::string library = LibraryFixApproach(7, 3);
  CHECK(library == "proven fix #7 from the library (batch 3)");
  std::optional<ProvenFixSource> from_library = ParseProvenFixApproach(library);
  REQUIRE(from_library);
  CHECK(from_library->library_fix == 7);
  CHECK(from_library->source_batch == 3);
  CHECK(from_library->source_attempt == 0);

  const std::string applied = ApplyFixApproach(12, 345);
  CHECK(applied == "proven fix of batch 12 (attempt 345)");
  std::optional<ProvenFixSource> from_batch = ParseProvenFixApproach(applied);
  REQUIRE(from_batch);
  CHECK(from_batch->library_fix == 0);
  CHECK(from_batch->source_batch == 12);
  CHECK(from_batch->source_attempt == 345);
}

TEST_CASE("an approach that is not exactly a proven fix's is a model's") {
  for (const char* approach :
       {"", "Apply the SCAP Security Guide fix text for this rule",
        "proven fix #7 from the library (batch 3) and then some", "proven fix #7 from the library (batch 3",
        "proven fix #0 from the library (batch 3)", "proven fix #-1 from the library (batch 3)",
        "proven fix # 7 from the library (batch 3)", "proven fix of batch 12 (attempt )",
        "proven fix of batch 12 (attempt 99999999999999999999)", "Proven fix of batch 12 (attempt 3)"}) {
    INFO(approach);
    CHECK_FALSE(ParseProvenFixApproach(approach).has_value());
  }
}

}  // namespace
}  // namespace temper
