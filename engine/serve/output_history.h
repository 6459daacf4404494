// OutputHistory: draft tokens for speculative decoding from what earlier requests generated.
//
// The roles write the same shapes again and again across requests: the Architect's pick is the
// same JSON around another rule's id, the Reflector's lessons open alike, the Worker frames its tool
// calls the same way each attempt. Prompt lookup (prompt_lookup.h) sees only the request's own
// text, and the Architect's picks echo little of it (1.5 tokens a pass, bench/RESULTS.md, "Speculative decoding"). This
// keeps the replies of finished requests, each after the last few tokens of the prompt it answered
// (its lead-in, so that a reply's first tokens can be drafted too), and drafts what followed the
// latest earlier occurrence of the longest n-gram (max_ngram down to min_ngram tokens) that a
// request's text ends with: SuffixDecoding's idea (arXiv 2411.04975) with prompt lookup's n-gram
// indexes. A draft never runs from one kept reply into the next.
//
// Memory: a kept token costs its 4 bytes and up to max_ngram − min_ngram + 1 index entries (about
// 48 bytes each), about 25 MB at the defaults' max_tokens. Past max_tokens the oldest replies go,
// down to half of it, and the index is rebuilt (tens of milliseconds on the scheduler's thread, once
// per max_tokens / 2 tokens generated).
//
// Thread safety: none; the scheduler's thread owns it.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "common/status.h"

namespace temper::engine {

struct OutputHistoryOptions {
  int min_ngram = 3;  // longer than prompt lookup's: a match must say which role is writing
  int max_ngram = 6;
  int64_t max_tokens = int64_t{1} << 17;  // kept, lead-ins included; 0 keeps nothing
  // InvalidArgument naming the field unless 1 <= min_ngram <= max_ngram <= 16 and max_tokens >= 0.
  Status Check() const;
};

class OutputHistory {
 public:
  explicit OutputHistory(const OutputHistoryOptions& options);

  // Keeps a finished request's reply (`reply`, its generated tokens) after the last max_ngram
  // tokens of `prompt`. An empty reply is not kept.
  void Add(std::span<const int32_t> prompt, std::span<const int32_t> reply);

  // Up to max_tokens tokens predicted to follow `text` (a request's prompt and reply so far),
  // possibly none.
  std::vector<int32_t> Draft(std::span<const int32_t> text, int max_tokens) const;

  int64_t kept_tokens() const { return static_cast<int64_t>(tokens_.size()); }

 private:
  void Index(int64_t from);  // the n-grams ending at positions from .. size
  void Evict();              // the oldest replies, down to half of max_tokens

  OutputHistoryOptions options_;
  // Kept replies with their lead-ins, each followed by kEnd.
  std::vector<int32_t> tokens_;
  // [n - min_ngram]: hash of an n-gram -> the position right after its latest occurrence.
  std::vector<std::unordered_map<uint64_t, int64_t>> index_;
};

}  // namespace temper::engine
