#include "engine/serve/output_history.h"

#include <algorithm>

#include <fmt/format.h>

#include "engine/serve/ngrams.h"

namespace temper::engine {

namespace {

constexpr int32_t kEnd = -1;  // after each kept reply; no token id is negative

}  // namespace

Status OutputHistoryOptions::Check() const {
  TEMPER_RETURN_IF_ERROR(CheckNgramRange("speculation history", min_ngram, max_ngram));
  if (max_tokens < 0) {
    return Status::InvalidArgument(fmt::format("speculation history: max_tokens {} is negative", max_tokens));
  }
  return Status::OK();
}

OutputHistory::OutputHistory(const OutputHistoryOptions& options)
    : options_(options), index_(static_cast<size_t>(std::max(0, options.max_ngram - options.min_ngram + 1))) {}

void OutputHistory::Add(std::span<const int32_t> prompt, std::span<const int32_t> reply) {
  if (reply.empty() || options_.max_tokens == 0) return;
  const int64_t from = kept_tokens();
  const size_t lead = std::min(prompt.size(), static_cast<size_t>(options_.max_ngram));
  tokens_.insert(tokens_.end(), prompt.end() - static_cast<std::ptrdiff_t>(lead), prompt.end());
  tokens_.insert(tokens_.end(), reply.begin(), reply.end());
  tokens_.push_back(kEnd);
  Index(from);
  if (kept_tokens() > options_.max_tokens) Evict();
}

void OutputHistory::Index(int64_t from) {
  const int64_t size = kept_tokens();
  for (int64_t i = std::max<int64_t>(from, 1); i < size; ++i) {
    if (tokens_[static_cast<size_t>(i)] == kEnd) continue;  // nothing follows an n-gram ending here
    // The n-grams ending right before i that stay within one kept reply.
    int clean = 0;
    while (clean < options_.max_ngram && i - clean - 1 >= 0 && tokens_[static_cast<size_t>(i - clean - 1)] != kEnd) {
      ++clean;
    }
    for (int n = options_.min_ngram; n <= clean; ++n) {
      const std::span<const int32_t> ngram(tokens_.data() + (i - n), static_cast<size_t>(n));
      index_[static_cast<size_t>(n - options_.min_ngram)][NgramHash(ngram)] = i;
    }
  }
}

void OutputHistory::Evict() {
  // Cut after the first reply end that leaves at most half of max_tokens.
  const int64_t size = kept_tokens();
  int64_t cut = std::max<int64_t>(size - options_.max_tokens / 2, 1);
  while (cut < size && tokens_[static_cast<size_t>(cut - 1)] != kEnd) ++cut;
  tokens_.erase(tokens_.begin(), tokens_.begin() + cut);
  for (auto& index : index_) index.clear();
  Index(0);
}

std::vector<int32_t> OutputHistory::Draft(std::span<const int32_t> text, int max_tokens) const {
  std::vector<int32_t> draft;
  if (max_tokens < 1) return draft;
  const int64_t size = kept_tokens();
  for (int n = options_.max_ngram; n >= options_.min_ngram; --n) {
    if (text.size() < static_cast<size_t>(n)) continue;
    const std::span<const int32_t> suffix = text.last(static_cast<size_t>(n));
    const auto& index = index_[static_cast<size_t>(n - options_.min_ngram)];
    const auto it = index.find(NgramHash(suffix));
    if (it == index.end()) continue;
    const int64_t at = it->second;
    if (!std::equal(suffix.begin(), suffix.end(), tokens_.begin() + (at - n))) continue;  // a hash collision
    for (int64_t i = at;
         i < size && tokens_[static_cast<size_t>(i)] != kEnd && static_cast<int>(draft.size()) < max_tokens; ++i) {
      draft.push_back(tokens_[static_cast<size_t>(i)]);
    }
    if (!draft.empty()) return draft;
  }
  return draft;
}

}  // namespace temper::engine
