// Speculative decoding's backend contract, for any Backend: a pass that appends the next token
// and k draft tokens, of which only the first `good` are right, then Truncate back to the kept
// ones, must leave the sequence exactly as if the wrong drafts had never been fed. With the tiny
// model's window of 8 and prompts of 24 and 13 tokens, the passes cross the window and wrap the
// rings, so the rows a rejected draft overwrote are ones the slack has to keep.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include <catch2/catch.hpp>

#include "engine/backend.h"

namespace temper::engine::testing {

// Teacher-forced logits of every position of `ids`: the first `prefix` tokens in one pass, then
// passes of the next token and `k` drafts of which the first `good` are the true tokens and the
// rest wrong (or, with `wrong` false, true as well), truncated after the first `good`. With `good`
// = k nothing is rejected.
inline std::vector<float> LogitsThroughRejectedDrafts(Backend& b, const std::vector<int32_t>& ids, size_t prefix, int k,
                                                      int good, bool wrong = true) {
  const size_t V = static_cast<size_t>(b.config().vocab_size);
  auto seq = b.AddSequence();
  REQUIRE(seq.ok());
  ForwardItem first{*seq, std::span<const int32_t>(ids).first(prefix), /*all_logits=*/true};
  auto out = b.Forward({&first, 1}, {});
  REQUIRE(out.ok());
  std::vector<float> logits = out->logits;
  for (size_t pos = prefix; pos < ids.size();) {
    const size_t kept = std::min<size_t>(static_cast<size_t>(good) + 1, ids.size() - pos);
    std::vector<int32_t> fed(ids.begin() + static_cast<long>(pos), ids.begin() + static_cast<long>(pos + kept));
    while (fed.size() < static_cast<size_t>(k) + 1) {
      const int32_t truth = pos + fed.size() < ids.size() ? ids[pos + fed.size()] : 0;
      fed.push_back(wrong ? static_cast<int32_t>((truth + 7 + fed.size()) % V) : truth);
    }
    ForwardItem pass{*seq, fed, /*all_logits=*/true};
    out = b.Forward({&pass, 1}, {});
    REQUIRE(out.ok());
    logits.insert(logits.end(), out->logits.begin(), out->logits.begin() + static_cast<long>(kept * V));
    pos += kept;
    REQUIRE(b.Truncate(*seq, static_cast<int64_t>(pos)).ok());
    REQUIRE(*b.SequenceLength(*seq) == static_cast<int64_t>(pos));
  }
  REQUIRE(b.ReleaseSequence(*seq).ok());
  return logits;
}

// Truncate's limits: not below the start of the last pass, not after a pass longer than
// kMaxDraftTokens + 1, not below a snapshot; and a dead sequence is NotFound.
inline void CheckTruncateLimits(Backend& b, const std::vector<int32_t>& ids) {
  auto seq = b.AddSequence();
  REQUIRE(seq.ok());
  ForwardItem prompt{*seq, std::span<const int32_t>(ids).first(kMaxDraftTokens + 2), false};
  REQUIRE(b.Forward({&prompt, 1}, {}).ok());
  const int64_t after_prompt = kMaxDraftTokens + 2;
  Status s = b.Truncate(*seq, after_prompt - 1);
  CHECK(s.code() == StatusCode::kFailedPrecondition);  // a pass too long to undo
  INFO(s.ToString());
  CHECK(s.ToString().find("cannot truncate to 9 tokens") != std::string::npos);

  ForwardItem pass{*seq, std::span<const int32_t>(ids).subspan(static_cast<size_t>(after_prompt), 4), true};
  REQUIRE(b.Forward({&pass, 1}, {}).ok());
  CHECK(b.Truncate(*seq, after_prompt - 1).code() == StatusCode::kFailedPrecondition);  // before the pass
  CHECK(b.Truncate(*seq, after_prompt + 5).code() == StatusCode::kFailedPrecondition);  // past the end
  REQUIRE(b.Truncate(*seq, after_prompt + 2).ok());
  REQUIRE(b.Truncate(*seq, after_prompt + 1).ok());  // again, still within the pass

  // A snapshot pins what it holds (the backend needs a snapshot slot).
  auto snap = b.TakeSnapshot(*seq);
  REQUIRE(snap.ok());
  CHECK(b.Truncate(*seq, after_prompt).code() == StatusCode::kFailedPrecondition);
  REQUIRE(b.ReleaseSnapshot(*snap).ok());
  REQUIRE(b.ReleaseSequence(*seq).ok());
  CHECK(b.Truncate(*seq, 0).code() == StatusCode::kNotFound);
}

}  // namespace temper::engine::testing
