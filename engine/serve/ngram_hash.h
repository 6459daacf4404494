// The hash of a run of token ids that prompt lookup and the output history index n-grams by.
//
// Thread safety: a pure function.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>

namespace temper::engine {

// FNV-1a over the ids' bytes. Collisions are harmless: every hit is checked token by token.
inline uint64_t NgramHash(std::span<const int32_t> ngram) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t t : ngram) {
    uint32_t u;
    std::memcpy(&u, &t, sizeof(u));
    for (int b = 0; b < 4; ++b) {
      h ^= (u >> (8 * b)) & 0xffu;
      h *= 1099511628211ull;
    }
  }
  return h;
}

}  // namespace temper::engine
