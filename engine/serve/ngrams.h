// What prompt lookup and the output history share about the n-grams they index: the hash, and
// the range of lengths either accepts.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "common/status.h"

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

// InvalidArgument, prefixed by `what`, unless 1 <= min_ngram <= max_ngram <= 16.
inline Status CheckNgramRange(const std::string& what, int min_ngram, int max_ngram) {
  if (min_ngram >= 1 && max_ngram >= min_ngram && max_ngram <= 16) return Status::OK();
  return Status::InvalidArgument(what + ": min_ngram " + std::to_string(min_ngram) + " and max_ngram " +
                                 std::to_string(max_ngram) + " must satisfy 1 <= min_ngram <= max_ngram <= 16");
}

}  // namespace temper::engine
