// Where the tests find the real model deploy/setup.sh fetches: Gemma 3 270M in Q4_K_M, reassembled
// from its pinned PyPI chunk packages into the build tree (deploy/fetch_test_models.sh). A case that
// needs it skips, naming setup, when a build tree was made without it.
#pragma once

#include <filesystem>
#include <string>

#include "skip.h"

namespace temper::testing {

inline std::filesystem::path RealGemma3GgufPath() {
  return std::filesystem::path(TEMPER_BINARY_DIR) / "models" / "gemma-3-270m-q4_k_m.gguf";
}

}  // namespace temper::testing

// Skips the running case when the real model is not in the build tree.
#define TEMPER_REQUIRE_REAL_GEMMA3()                                                                          \
  do {                                                                                                        \
    if (!std::filesystem::exists(::temper::testing::RealGemma3GgufPath())) {                                  \
      TEMPER_SKIP("no " + ::temper::testing::RealGemma3GgufPath().string() + ": deploy/setup.sh fetches it"); \
    }                                                                                                         \
  } while (0)
