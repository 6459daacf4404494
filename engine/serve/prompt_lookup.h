// PromptLookup: draft tokens for speculative decoding, taken from the text a request already has.
//
// The roles' replies echo their prompts: the Worker rewrites configuration it has just read,
// quotes paths and fix text from the rule, and repeats command shapes from earlier turns. So the
// tokens that followed the last time the current ending appeared are a good guess for what comes
// next. For the longest n-gram the history ends with (max_ngram down to min_ngram tokens), the
// draft is what followed its most recent earlier occurrence, prompt and output alike (the
// "prompt lookup decoding" of transformers and vLLM's n-gram proposer); where that continuation
// reaches the end of the history, the repeating pattern it found goes on. No model runs: each
// n-gram length keeps a hash index from n-gram to the position after its latest occurrence,
// extended as tokens arrive, so a draft costs a few hash lookups whatever the history's length.
//
// Thread safety: none; one per request, used by the scheduler's thread.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace temper::engine {

struct PromptLookupOptions {
  int min_ngram = 2;  // shorter endings match too much to predict anything
  int max_ngram = 4;
};

// How many drafts the next verification pass of a request tries: half the most at first; twice as
// many after a pass whose drafts were all accepted (up to the most), half as many after one whose
// drafts were all refused, else as many again. Checking a draft costs little next to reading the
// weights, so a partly right guess is no reason to guess less: on the roles' recorded replies
// this gives 4.7 tokens per pass where cutting k to the accepted count + 1 gave 3.9, and always 8
// gave 5.1 with more drafts wasted (bench/history/issue-24-speculative-decoding.md).
class DraftLength {
 public:
  explicit DraftLength(int most) : most_(most), next_((most + 1) / 2) {}
  int next() const { return next_; }
  void Update(int drafted, int accepted) {
    if (accepted == drafted) {
      next_ = std::min(2 * next_, most_);
    } else if (accepted == 0) {
      next_ = std::max(1, next_ / 2);
    }
  }

 private:
  int most_;
  int next_;
};

class PromptLookup {
 public:
  explicit PromptLookup(const PromptLookupOptions& options);

  // Up to `max_tokens` tokens predicted to follow `history`, possibly none. `history` must extend
  // the one of the previous call (the request's prompt and output only grow); what is new is
  // indexed first.
  std::vector<int32_t> Draft(std::span<const int32_t> history, int max_tokens);

 private:
  // The position after the latest earlier occurrence of history's last n tokens; -1 if none.
  int64_t Continuation(std::span<const int32_t> history, int n) const;

  PromptLookupOptions options_;
  // [n - min_ngram]: hash of an n-gram -> the position right after its latest occurrence.
  std::vector<std::unordered_map<uint64_t, int64_t>> index_;
  int64_t indexed_ = 0;  // history positions whose preceding n-grams are in index_
};

}  // namespace temper::engine
