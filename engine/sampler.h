// Sampler: picks the next token from a row of logits.
//
// Greedy (temperature 0) takes the argmax, lowest id on ties. Otherwise, in transformers' order:
// divide by the temperature, softmax, keep the top_k most likely (0: all), keep the smallest prefix
// whose probability reaches top_p (1: all), drop tokens below min_p times the top probability
// (0: none), renormalize and draw. Draws come from a seeded generator defined here (splitmix64
// feeding xoshiro256**), not from <random>'s distributions whose output differs between standard
// libraries, so a seed gives the same tokens on every platform.
//
// Thread safety: a Sampler holds its generator's state; use one per sequence.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"

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
  bool IsStop(int32_t token) const;
  const SamplingParams& params() const { return params_; }

 private:
  explicit Sampler(const SamplingParams& params);
  double NextUniform();  // [0, 1)

  SamplingParams params_;
  uint64_t state_[4];
  std::vector<std::pair<float, int32_t>> candidates_;  // scratch
};

}  // namespace temper::engine
