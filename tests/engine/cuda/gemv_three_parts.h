// A GEMV launcher's outputs through three GemvParts instead of one, for the kernel tests that hold
// the engine's GEMV (tests/engine/cuda/cuda_kernels_test.cpp) to the same sums whichever part an
// output falls in.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "engine/cuda/rank_ops.h"
#include "engine/cuda_test_support.h"

namespace temper::engine::cuda::testing {

// The outputs of `launch(parts)` for the weights `w` ([out][in] on the device) split into three
// parts of widths out/2 + 1, out/4 and the rest, each with its own outputs, joined back row by row.
template <typename Launch>
std::vector<float> ThroughThreeParts(const uint16_t* w, int rows, int in, int out, Launch launch) {
  const int a = out / 2 + 1, b = out / 4, c = out - a - b;
  DeviceVec ya(std::vector<float>(size_t(rows) * a)), yb(std::vector<float>(size_t(rows) * b)),
      yc(std::vector<float>(size_t(rows) * c));
  GemvParts parts;
  parts.Add(w, ya.get(), a).Add(w + size_t(a) * in, yb.get(), b);
  parts.Add(w + size_t(a + b) * in, yc.get(), c);
  REQUIRE(launch(parts).ok());
  const std::vector<float> got_a = ya.Read(), got_b = yb.Read(), got_c = yc.Read();
  std::vector<float> joined;
  for (int r = 0; r < rows; ++r) {
    joined.insert(joined.end(), got_a.begin() + size_t(r) * a, got_a.begin() + size_t(r + 1) * a);
    joined.insert(joined.end(), got_b.begin() + size_t(r) * b, got_b.begin() + size_t(r + 1) * b);
    joined.insert(joined.end(), got_c.begin() + size_t(r) * c, got_c.begin() + size_t(r + 1) * c);
  }
  return joined;
}

}  // namespace temper::engine::cuda::testing
