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
// its devices). When every entry the cuts keep is a candidate (top_k ≤ the candidates, or the
// candidates are the whole vocabulary) the same arithmetic runs on the same values, so the token
// is the full row's to the bit. Otherwise the rest of the vocabulary is known only as its summed
// softmax weight (tail_mass): that fixes the softmax denominator when top_k is 0 or covers the
// vocabulary, and bounds it when top_k reaches past the candidates (the unseen kept entries hold
// at least their share of the tail and each at most the last candidate's weight). The top-p cut
// and the draw are taken from the candidates only when they come out the same for every
// denominator and kept mass those bounds allow, with the tail mass anywhere within 1e-4 of the
// row's mass of the value sent (which covers the device's fp32 sums); the token is then the full
// row's, up to double rounding. Else the sampler asks for the full row, and Sample(full row)
// finishes the step with the uniform this call drew, so a seed gives the same tokens whichever
// path each step took.
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
    // Then the next call must be Sample(full row) of this same row: it reuses the uniform this
    // call drew (a later Sample(candidates) drops it).
    bool needs_full_row = false;
  };
  // The next token from a row's candidates (descending, ties to the lower id, as
  // MergeRankCandidates gives them), or the request for its full row. Greedy takes the first
  // candidate. A non-greedy step draws exactly one uniform whichever path decides it, so the
  // generator stays in step with a sampler fed full rows.
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
  std::vector<double> weights_;                        // scratch
  std::optional<double> pending_uniform_;
};

}  // namespace temper::engine
