#include "common/text_cut.h"

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

namespace temper {
namespace {

TEST_CASE("CutWithMarker keeps text that fits and cuts the rest, saying how much it left out") {
  CHECK(CutWithMarker("short", 100) == "short");
  std::string cut = CutWithMarker(std::string(300, 'a'), 100);
  CHECK(cut.size() <= 100);
  const size_t kept = cut.find("…");
  CHECK(kept > 0);
  CHECK(cut.substr(kept) == fmt::format("…[cut by temper: {} of 300 bytes left out]", 300 - kept));
}

TEST_CASE("CutWithMarker never splits a UTF-8 character") {
  std::string accents;
  for (int i = 0; i < 200; ++i) accents += "é";  // two bytes each
  for (size_t budget = 64; budget < 120; ++budget) {
    std::string cut = CutWithMarker(accents, budget);
    CHECK(cut.size() <= budget);
    CHECK(cut.find("…") % 2 == 0);
    CHECK_NOTHROW(nlohmann::json(cut).dump());  // the encoder refuses broken UTF-8
  }
}

}  // namespace
}  // namespace temper
