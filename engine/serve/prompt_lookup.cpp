#include "engine/serve/prompt_lookup.h"

#include <algorithm>

#include "engine/serve/ngrams.h"

namespace temper::engine {

PromptLookup::PromptLookup(const PromptLookupOptions& options)
    : options_(options), index_(static_cast<size_t>(std::max(0, options.max_ngram - options.min_ngram + 1))) {}

int64_t PromptLookup::Continuation(std::span<const int32_t> history, int n) const {
  const int64_t size = static_cast<int64_t>(history.size());
  if (size < n) return -1;
  const std::span<const int32_t> suffix = history.subspan(static_cast<size_t>(size - n));
  const auto& index = index_[static_cast<size_t>(n - options_.min_ngram)];
  const auto it = index.find(NgramHash(suffix));
  if (it == index.end()) return -1;
  const int64_t at = it->second;
  if (!std::equal(suffix.begin(), suffix.end(), history.begin() + (at - n))) return -1;  // a hash collision
  return at;
}

std::vector<int32_t> PromptLookup::Draft(std::span<const int32_t> history, int max_tokens) {
  const int64_t size = static_cast<int64_t>(history.size());
  // Position i continues the n-grams that end just before it. The history's own ending is left
  // out (nothing follows it yet), so a lookup finds an earlier occurrence.
  for (; indexed_ < size; ++indexed_) {
    for (int n = options_.min_ngram; n <= options_.max_ngram && n <= indexed_; ++n) {
      index_[static_cast<size_t>(n - options_.min_ngram)]
            [NgramHash(history.subspan(static_cast<size_t>(indexed_ - n), static_cast<size_t>(n)))] = indexed_;
    }
  }
  std::vector<int32_t> draft;
  if (max_tokens < 1) return draft;
  for (int n = options_.max_ngram; n >= options_.min_ngram; --n) {
    const int64_t at = Continuation(history, n);
    if (at < 0) continue;
    // Past the history's end the match overlaps its own continuation (a repeating pattern, like
    // a run of one token): the pattern goes on with period size - at.
    for (int64_t i = 0; i < max_tokens; ++i) {
      const int64_t from = at + i;
      draft.push_back(from < size ? history[static_cast<size_t>(from)] : draft[static_cast<size_t>(from - size)]);
    }
    break;
  }
  return draft;
}

}  // namespace temper::engine
