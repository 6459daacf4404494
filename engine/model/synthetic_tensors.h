// Seeded synthetic bf16 tensors for benchmarks and tests: the golden fixture's recipe (its README),
// so that activations stay in a sane range, drawn from a generator that is the same everywhere.
// The target's weights (weights.h) and the MTP drafter's (drafter_weights.h) both come from here.
// Internal to engine/model.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"

namespace temper::engine {

// How a synthetic tensor is drawn.
enum class SyntheticInit {
  kEmbedding,   // uniform, standard deviation 1
  kLinear,      // standard deviation 1 / sqrt(fan_in)
  kNorm,        // 1 + 0.25 · uniform
  kQkNorm,      // head_dim^-1/4 · (1 + 0.25 · uniform)
  kPostNorm,    // 2 sqrt(hidden) · (1 + 0.25 · uniform)
  kLayerScalar  // uniform in [0.5, 1.5)
};

// A tensor a checkpoint must hold, and how a synthetic one is drawn.
struct ExpectedTensor {
  std::string name;
  std::vector<int64_t> shape;
  SyntheticInit init;
};

struct SyntheticTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::span<const uint16_t> values;  // in the caller's storage
};

// Every tensor of `expected`, in order, filled with seeded values in `storage` (resized to hold them
// all; tensor i is seeded by `seed` and i). `hidden_size` scales the post norms.
// ResourceExhausted when the storage cannot be allocated.
Result<std::vector<SyntheticTensor>> FillSyntheticTensors(std::span<const ExpectedTensor> expected, int hidden_size,
                                                          uint64_t seed, std::vector<uint16_t>& storage);

}  // namespace temper::engine
