#include "engine/model/synthetic_tensors.h"

#include <cmath>
#include <new>

#include <fmt/format.h>

#include "engine/model/bf16.h"

namespace temper::engine {
namespace {

// splitmix64: a tiny, fast generator that is the same on every platform.
struct SplitMix64 {
  uint64_t state;
  uint64_t Next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  float Uniform() { return static_cast<float>(Next() >> 40) * (1.0f / 16777216.0f); }  // [0, 1)
};

void Fill(const ExpectedTensor& e, int hidden_size, uint64_t seed, std::span<uint16_t> out) {
  SplitMix64 rng{seed};
  const float sqrt3 = std::sqrt(3.0f);
  // Uniform(-a, a) has standard deviation a / sqrt(3).
  auto centered = [&](float stddev) { return (2.0f * rng.Uniform() - 1.0f) * sqrt3 * stddev; };
  const int64_t fan_in = e.shape.size() == 2 ? e.shape[1] : 1;
  for (uint16_t& v : out) {
    float x = 0;
    switch (e.init) {
      case SyntheticInit::kEmbedding:
        x = centered(1.0f);
        break;
      case SyntheticInit::kLinear:
        x = centered(1.0f / std::sqrt(static_cast<float>(fan_in)));
        break;
      case SyntheticInit::kNorm:
        x = 1.0f + centered(0.25f);
        break;
      case SyntheticInit::kQkNorm:
        x = std::pow(static_cast<float>(e.shape[0]), -0.25f) * (1.0f + centered(0.25f));
        break;
      case SyntheticInit::kPostNorm:
        x = 2.0f * std::sqrt(static_cast<float>(hidden_size)) * (1.0f + centered(0.25f));
        break;
      case SyntheticInit::kLayerScalar:
        x = 0.5f + rng.Uniform();
        break;
    }
    v = FloatToBf16(x);
  }
}

uint64_t Elements(const ExpectedTensor& e) {
  uint64_t n = 1;
  for (int64_t d : e.shape) n *= static_cast<uint64_t>(d);
  return n;
}

}  // namespace

Result<std::vector<SyntheticTensor>> FillSyntheticTensors(std::span<const ExpectedTensor> expected, int hidden_size,
                                                          uint64_t seed, std::vector<uint16_t>& storage) {
  uint64_t total = 0;
  for (const ExpectedTensor& e : expected) total += Elements(e);
  try {
    storage.resize(total);
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted(fmt::format("cannot allocate {} bytes of synthetic weights", total * 2));
  }
  std::vector<SyntheticTensor> out;
  uint64_t offset = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const ExpectedTensor& e = expected[i];
    std::span<uint16_t> values(storage.data() + offset, Elements(e));
    Fill(e, hidden_size, seed * 0x100000001b3ull + i, values);
    out.push_back({e.name, e.shape, values});
    offset += values.size();
  }
  return out;
}

}  // namespace temper::engine
