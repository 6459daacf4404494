// The output history: drafts from earlier requests' replies, found by the longest n-gram the text
// ends with, never running from one kept reply into the next, and bounded in the tokens it keeps.
#include <catch2/catch.hpp>

#include <vector>

#include "engine/serve/output_history.h"

namespace temper::engine {
namespace {

using Tokens = std::vector<int32_t>;

OutputHistoryOptions Options(int min_ngram, int max_ngram, int64_t max_tokens = 1000) {
  OutputHistoryOptions o;
  o.min_ngram = min_ngram;
  o.max_ngram = max_ngram;
  o.max_tokens = max_tokens;
  return o;
}

TEST_CASE("the output history drafts an earlier reply from its lead-in, and what followed a matching n-gram",
          "[spec]") {
  OutputHistory history(Options(2, 4));
  // A reply of one request, after the prompt's end (the chat format's "model turn" tokens 8 9).
  history.Add(Tokens{100, 101, 102, 8, 9}, Tokens{20, 21, 22, 23, 24, 25});
  // Another request ending its prompt the same way: the reply's start is drafted.
  CHECK(history.Draft(Tokens{300, 301, 8, 9}, 4) == Tokens{20, 21, 22, 23});
  // In the middle of a reply: what followed the n-gram, up to the kept reply's end and no further.
  CHECK(history.Draft(Tokens{7, 21, 22}, 8) == Tokens{23, 24, 25});
  // Nothing matches: no draft; and none for a one-token ending below min_ngram.
  CHECK(history.Draft(Tokens{50, 51, 52}, 4).empty());
  CHECK(history.Draft(Tokens{22}, 4).empty());
  CHECK(history.Draft(Tokens{21, 22}, 0).empty());
}

TEST_CASE("the output history prefers the longest match, then the latest reply", "[spec]") {
  OutputHistory history(Options(2, 4));
  history.Add(Tokens{1, 2}, Tokens{5, 6, 7, 40, 41});
  history.Add(Tokens{1, 2}, Tokens{9, 6, 7, 50, 51});
  // "6 7" is in both: the latest reply's continuation.
  CHECK(history.Draft(Tokens{0, 6, 7}, 2) == Tokens{50, 51});
  // "5 6 7" only in the first: the longer match wins.
  CHECK(history.Draft(Tokens{5, 6, 7}, 2) == Tokens{40, 41});
  // The lead-in "1 2" starts both: the latest reply's first tokens.
  CHECK(history.Draft(Tokens{1, 2}, 3) == Tokens{9, 6, 7});
}

TEST_CASE("the output history never drafts across two kept replies", "[spec]") {
  OutputHistory history(Options(2, 3));
  history.Add(Tokens{1, 2}, Tokens{10, 11, 12});
  history.Add(Tokens{3, 4}, Tokens{13, 14});
  // "11 12" ends the first reply: nothing followed it there, and the second reply's lead-in is
  // not its continuation.
  CHECK(history.Draft(Tokens{11, 12}, 4).empty());
  // An n-gram spanning the end of one reply and the next lead-in is not indexed; the lead-in alone
  // is, and starts the second reply.
  CHECK(history.Draft(Tokens{12, 3}, 4).empty());
  CHECK(history.Draft(Tokens{12, 3, 4}, 4) == Tokens{13, 14});
  // An empty reply is not kept.
  history.Add(Tokens{5, 6}, Tokens{});
  CHECK(history.Draft(Tokens{5, 6}, 4).empty());
}

TEST_CASE("the output history keeps at most max_tokens, dropping the oldest replies first", "[spec]") {
  OutputHistory history(Options(2, 2, /*max_tokens=*/20));
  // Each kept reply is 2 lead-in tokens, 4 reply tokens and its end: 7 tokens.
  for (int32_t i = 0; i < 10; ++i) {
    history.Add(Tokens{1000 + i, 2000 + i}, Tokens{10 * i, 10 * i + 1, 10 * i + 2, 10 * i + 3});
    CHECK(history.kept_tokens() <= 20);
  }
  // The latest replies are still there, the first ones are gone.
  CHECK(history.Draft(Tokens{1009, 2009}, 4) == Tokens{90, 91, 92, 93});
  CHECK(history.Draft(Tokens{90, 91}, 4) == Tokens{92, 93});
  CHECK(history.Draft(Tokens{1000, 2000}, 4).empty());
  CHECK(history.Draft(Tokens{0, 1}, 4).empty());
  // A history that keeps nothing drafts nothing.
  OutputHistory none(Options(2, 4, /*max_tokens=*/0));
  none.Add(Tokens{1, 2}, Tokens{3, 4, 5});
  CHECK(none.kept_tokens() == 0);
  CHECK(none.Draft(Tokens{1, 2}, 4).empty());
}

TEST_CASE("output history options out of range are refused, naming them", "[spec]") {
  CHECK(Options(3, 6).Check().ok());
  CHECK_THAT(Options(0, 6).Check().message(), Catch::Contains("min_ngram 0 and max_ngram 6"));
  CHECK_THAT(Options(4, 3).Check().message(), Catch::Contains("1 <= min_ngram <= max_ngram <= 16"));
  CHECK_THAT(Options(3, 17).Check().message(), Catch::Contains("max_ngram 17"));
  CHECK_THAT(Options(3, 6, -1).Check().message(), Catch::Contains("max_tokens -1 is negative"));
}

}  // namespace
}  // namespace temper::engine
