// Sampling candidates gathered from tensor-parallel ranks. Each rank holds a vocabulary shard's
// logits and reduces each row to its k largest entries, the shard's largest logit and its softmax
// mass Σ exp((l − max) / T); MergeRankCandidates turns those into the row's LogitCandidates
// (backend.h): the k largest over all ranks, and the mass of everything else relative to the top
// logit. A global top-k entry is always in its own shard's top k, so nothing is lost.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <span>

#include "engine/backend.h"

namespace temper::engine {

// One rank's candidates of one row, as the device produced them.
struct RankCandidates {
  std::span<const float> logits;  // k, descending (ties in id order)
  std::span<const int32_t> ids;   // k, global vocabulary ids
  float max = 0;                  // the shard's largest logit
  float mass = 0;                 // Σ exp((l − max) / T) over the whole shard
};

// The row's top `k` over `ranks` and its tail mass at `temperature` (0 counts as 1).
LogitCandidates MergeRankCandidates(std::span<const RankCandidates> ranks, int k, float temperature,
                                    int32_t vocab_size);

}  // namespace temper::engine
