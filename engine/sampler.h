// Sampler: picks the next token from a row of logits.
//
// Greedy (temperature 0) takes the argmax, lowest id on ties. Otherwise, in transformers' order:
// divide by the temperature, softmax, keep the top_k most likely (0: all), keep the smallest prefix
// whose probability reaches top_p (1: all), drop tokens below min_p times the top probability
// (0: none), renormalize and draw. Draws come from a seeded generator defined here (splitmix64
// feeding xoshiro256**), not from <random>'s distributions whose output differs between standard
// libraries, so a seed gives the same tokens on every platform.
//
// A row may also come as its largest logits only (LogitCandidates, from a backend that samples on
// its devices): the same algorithm then runs on the candidates, with the rest of the vocabulary
// summed into the softmax's denominator, and is exact whenever every decision (the top-k, top-p
// and min-p cuts and the draw) falls among the candidates. When one would fall beyond them the
// sampler asks for the full row, and the full-row call finishes with the uniform already drawn, so
// a seed gives the same tokens either way (up to the rounding of the normalisation).
//
// Thread safety: a Sampler holds its generator's state; use one per sequence.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "common/status.h"
#include "engine/backend.h"

namespace temper::engine {

struct SamplingParams {
  float temperature = 0;  // 0: greedy
  int top_k = 0;          // 0: no limit
  float top_p = 1;        // in (0, 1]
  float min_p = 0;        // in [0, 1)
  uint64_t seed = 0;
  std::vector<int32_t> stop_tokens = {};  // generation ends after emitting one of these
};

class Sampler {
 public:
  // InvalidArgument naming the parameter when one is out of range.
  static Result<Sampler> Create(const SamplingParams& params);

  // The next token id from `logits` (one row, vocab entries).
  int32_t Sample(std::span<const float> logits);

  struct Outcome {
    int32_t token = -1;
    bool needs_full_row = false;  // then call Sample(full row) for this same step
  };
  // The next token from a row's candidates, or the request for its full row.
  Outcome Sample(const LogitCandidates& candidates);

  bool IsStop(int32_t token) const;
  const SamplingParams& params() const { return params_; }

 private:
  explicit Sampler(const SamplingParams& params);
  double NextUniform();  // [0, 1)
  // The draw of this step: the one a candidates call left pending, else a fresh one.
  double TakeUniform();

  SamplingParams params_;
  uint64_t state_[4];
  std::vector<std::pair<float, int32_t>> candidates_;  // scratch
  std::vector<double> probs_;                          // scratch
  std::optional<double> pending_uniform_;
};

}  // namespace temper::engine
