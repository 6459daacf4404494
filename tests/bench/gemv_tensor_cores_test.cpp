// The tensor-core GEMV candidate (bench/gemv_tensor_cores.h) against the products of bf16-rounded
// activations in double, through one part or three and with the GeGLU, at every row count with
// each row's sums the same bit for bit whatever the rows; and its refusals. On a GPU
// (temper_cuda_tests; skipped without one) and in the SIMT emulator (temper_cuda_emulated_tests),
// where its MMA is gathered from the warp's fragments by shuffles: a wrong fragment layout, k
// permutation or stage fails in both.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "bench/gemv_tensor_cores.h"
#include "engine/cuda/gemv_three_parts.h"
#include "engine/cuda/kernel_harness.h"
#include "engine/cuda/kernel_math.h"
#include "engine/cuda_test_support.h"
#include "engine/model/bf16.h"

namespace temper::bench {
namespace {

using engine::cuda::GemvParts;
using engine::cuda::testing::DeviceVec;
using engine::cuda::testing::Near;
using engine::cuda::testing::Products;
using engine::cuda::testing::RandomBf16;
using engine::cuda::testing::RandomFloats;
using engine::cuda::testing::ThroughThreeParts;
namespace math = engine::cuda::math;

bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

TEST_CASE(
    "the tensor-core GEMV candidate equals the products of bf16-rounded activations, each row's sums whatever the "
    "rows (1-8 rows, one to three parts, GeGLU)") {
  TEMPER_SKIP_WITHOUT_KERNELS();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Outputs no tile divides (and 16-row tiles straddling the parts); warps of 0-1 chunks (32),
  // whole stages (1024 in runs of 256: 4 chunks a warp of 8) and partial last stages (1792: 4 + 3
  // chunks a warp of 8, 8 + 6 a warp of 4; 5376, the 31B width: 5 x 4 + 1 and 5 x 8 + 2).
  for (auto [in, out] : {std::pair{32, 5}, std::pair{1024, 70}, std::pair{1792, 17}, std::pair{5376, 40}}) {
    const auto x = RandomFloats(size_t{8} * in, 1);
    std::vector<float> rounded(x.size());
    for (size_t i = 0; i < x.size(); ++i) rounded[i] = engine::RoundToBf16(x[i]);
    const auto w = RandomBf16(static_cast<size_t>(out) * in, 2, 0.05f), up = RandomBf16(w.size(), 3, 0.05f);
    const std::vector<float> want = Products(rounded, w, 8, in, out), ups = Products(rounded, up, 8, in, out);
    DeviceVec dx(x);
    DeviceVec dw(w);
    DeviceVec dup(up);
    for (int run : kTensorCoreRuns) {
      std::vector<float> eight, eight_geglu;  // the sums with all 8 rows
      for (int rows = 8; rows >= 1; --rows) {
        INFO(rows << " rows, " << in << " -> " << out << ", runs of " << run << " bytes");
        const size_t n = size_t(rows) * out;
        // One part, with a poisoned row of guard past the outputs.
        DeviceVec dy(std::vector<float>(n + out, nan));
        REQUIRE(LaunchGemvTensorCores(dx.get(), GemvParts().Add(dw.get(), dy.get(), out), rows, in, run, nullptr).ok());
        std::vector<float> got = dy.Read();
        for (size_t i = n; i < got.size(); ++i) REQUIRE(std::isnan(got[i]));
        got.resize(n);
        Near(got, std::vector<float>(want.begin(), want.begin() + n), 1e-4f, 1e-4f);
        if (rows == 8) eight = got;
        for (size_t i = 0; i < n; ++i) REQUIRE(SameBits(got[i], eight[i]));

        // The same outputs as three parts with their own outputs.
        const std::vector<float> joined = ThroughThreeParts(dw.get(), rows, in, out, [&](const GemvParts& parts) {
          return LaunchGemvTensorCores(dx.get(), parts, rows, in, run, nullptr);
        });
        for (size_t i = 0; i < n; ++i) REQUIRE(SameBits(joined[i], got[i]));

        // Gate and up with the GeGLU in the epilogue.
        DeviceVec dg(std::vector<float>(n + out, nan));
        REQUIRE(LaunchGemvGegluTensorCores(dx.get(), dw.get(), dup.get(), dg.get(), rows, in, out, run, nullptr).ok());
        std::vector<float> geglu = dg.Read();
        for (size_t i = n; i < geglu.size(); ++i) REQUIRE(std::isnan(geglu[i]));
        geglu.resize(n);
        std::vector<float> want_geglu(n);
        for (size_t i = 0; i < n; ++i) want_geglu[i] = math::GeluTanh(want[i]) * ups[i];
        Near(geglu, want_geglu, 1e-4f, 1e-4f);
        if (rows == 8) eight_geglu = geglu;
        for (size_t i = 0; i < n; ++i) REQUIRE(SameBits(geglu[i], eight_geglu[i]));
      }
    }
  }
}

TEST_CASE("the tensor-core GEMV candidate refuses what it cannot run, naming the value") {
  TEMPER_SKIP_WITHOUT_KERNELS();
  DeviceVec x(std::vector<float>(8 * 64 + 4));
  DeviceVec w(std::vector<uint16_t>(16 * 64 + 8));
  DeviceVec y(std::vector<float>(8 * 16));
  auto error = [](const Status& s) {
    REQUIRE(s.code() == StatusCode::kInvalidArgument);
    return s.message();
  };
  const GemvParts one = GemvParts().Add(w.get(), y.get(), 16);
  CHECK_THAT(error(LaunchGemvTensorCores(x.get(), one, 9, 64, 256, nullptr)), Catch::Contains("rows 9 (1-8)"));
  CHECK_THAT(error(LaunchGemvTensorCores(x.get(), one, 1, 48, 256, nullptr)),
             Catch::Contains("in 48 is not a positive multiple of 32"));
  CHECK_THAT(error(LaunchGemvTensorCores(x.get(), one, 1, 64, 128, nullptr)),
             Catch::Contains("runs of 128 bytes (256 or 512)"));
  CHECK_THAT(error(LaunchGemvTensorCores(x.get() + 1, one, 1, 64, 256, nullptr)),
             Catch::Contains("x not 16-byte aligned"));
  CHECK_THAT(error(LaunchGemvTensorCores(x.get(), GemvParts().Add(w.get() + 4, y.get(), 16), 1, 64, 256, nullptr)),
             Catch::Contains("weights of part 0 not 16-byte aligned"));
  CHECK_THAT(error(LaunchGemvTensorCores(x.get(), GemvParts().Add(nullptr, y.get(), 16), 1, 64, 256, nullptr)),
             Catch::Contains("part 0 of width 16 without weights"));
  CHECK_THAT(error(LaunchGemvTensorCores(x.get(), GemvParts(), 1, 64, 256, nullptr)), Catch::Contains("0 outputs"));
  CHECK_THAT(error(LaunchGemvGegluTensorCores(x.get(), w.get(), nullptr, y.get(), 1, 64, 8, 512, nullptr)),
             Catch::Contains("gate, up and y are needed"));
}

}  // namespace
}  // namespace temper::bench
