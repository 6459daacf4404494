// Prompt-lookup drafts: what followed the latest earlier occurrence of the longest n-gram the
// history ends with, indexed incrementally as the history grows.
#include <catch2/catch.hpp>

#include "engine/serve/prompt_lookup.h"

namespace temper::engine {
namespace {

using Ids = std::vector<int32_t>;

TEST_CASE("prompt lookup drafts what followed the ending last time", "[engine][spec]") {
  PromptLookup lookup({.min_ngram = 2, .max_ngram = 3});
  // "7 8" occurs twice before the end; the latest occurrence is followed by 40 41 42.
  const Ids history = {7, 8, 30, 31, 5, 7, 8, 40, 41, 42, 9, 7, 8};
  CHECK(lookup.Draft(history, 2) == Ids{40, 41});
  // Past the end of the history the pattern repeats: ... 7 8 40 41 42 9 7 8 | 40 41
  CHECK(lookup.Draft(history, 8) == Ids{40, 41, 42, 9, 7, 8, 40, 41});
  CHECK(lookup.Draft(history, 0).empty());
}

TEST_CASE("prompt lookup continues a repeating run", "[engine][spec]") {
  PromptLookup lookup({.min_ngram = 2, .max_ngram = 4});
  CHECK(lookup.Draft(Ids{3, 9, 9, 9}, 4) == Ids{9, 9, 9, 9});
  CHECK(lookup.Draft(Ids{3, 1, 2, 1, 2, 1, 2}, 5) == Ids{1, 2, 1, 2, 1});
}

TEST_CASE("prompt lookup prefers the longest matching n-gram", "[engine][spec]") {
  PromptLookup lookup({.min_ngram = 2, .max_ngram = 3});
  // The 3-gram "6 7 8" occurred once (followed by 50); "7 8" occurred later (followed by 60).
  const Ids history = {6, 7, 8, 50, 1, 7, 8, 60, 2, 6, 7, 8};
  CHECK(lookup.Draft(history, 1) == Ids{50});
}

TEST_CASE("prompt lookup offers nothing without a match", "[engine][spec]") {
  PromptLookup lookup({.min_ngram = 2, .max_ngram = 4});
  CHECK(lookup.Draft(Ids{}, 4).empty());
  CHECK(lookup.Draft(Ids{5}, 4).empty());
  CHECK(lookup.Draft(Ids{5, 6, 7, 8}, 4).empty());
  // A repeated single token is below min_ngram: "8" alone does not count.
  CHECK(lookup.Draft(Ids{5, 6, 7, 8, 9, 8}, 4).empty());
}

TEST_CASE("prompt lookup grown token by token drafts as one built at once", "[engine][spec]") {
  Ids history;
  uint64_t x = 12345;
  for (int i = 0; i < 400; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    history.push_back(static_cast<int32_t>((x >> 33) % 12));  // a small alphabet: many repeats
  }
  PromptLookup grown({.min_ngram = 2, .max_ngram = 4});
  int drafted = 0;
  for (size_t n = 1; n <= history.size(); n += 1 + n % 3) {
    const std::span<const int32_t> prefix(history.data(), n);
    PromptLookup fresh({.min_ngram = 2, .max_ngram = 4});
    const Ids a = grown.Draft(prefix, 5), b = fresh.Draft(prefix, 5);
    INFO("history of " << n);
    CHECK(a == b);
    drafted += a.empty() ? 0 : 1;
  }
  CHECK(drafted > 50);
}

}  // namespace
}  // namespace temper::engine
