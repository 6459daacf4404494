// The tensor-core GEMV candidate (bench/gemv_mma.h) against the products of bf16-rounded activations
// in double, on a GPU (temper_cuda_tests; skipped without one) and in the SIMT emulator
// (temper_cuda_emulated_tests), where its MMA is gathered from the warp's fragments by shuffles: a
// wrong fragment layout or k permutation fails in both.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "bench/gemv_mma.h"
#include "engine/cuda/kernel_harness.h"
#include "engine/cuda_test_support.h"
#include "engine/model/bf16.h"

namespace temper::bench {
namespace {

using engine::cuda::testing::DeviceVec;
using engine::cuda::testing::Near;
using engine::cuda::testing::Products;
using engine::cuda::testing::RandomBf16;
using engine::cuda::testing::RandomFloats;

constexpr float kPoison = std::numeric_limits<float>::quiet_NaN();

bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

TEST_CASE("the tensor-core GEMV equals the products of bf16-rounded activations, each row's sums whatever the rows") {
  TEMPER_SKIP_WITHOUT_KERNELS();
  // Outputs that no tile count divides; inputs of one chunk, of fewer chunks than warps, and of
  // chunk counts past the unrolled loop's (5376: the 31B width, 21 chunks a warp).
  // The staged layouts' warps take 0-1 chunks (32, 96), whole stages (1024: 4 chunks a warp of 8,
  // 8 of 4), and stages with a partial last one (1792: 4 + 3 chunks a warp of 8, 8 + 6 of 4;
  // 5376: 5 x 4 + 1, 5 x 8 + 2).
  for (auto [in, out] :
       {std::pair{32, 5}, std::pair{96, 40}, std::pair{1024, 70}, std::pair{1792, 17}, std::pair{5376, 24}}) {
    const auto x = RandomFloats(size_t{8} * in, 1);
    const auto w = RandomBf16(static_cast<size_t>(out) * in, 2, 0.05f);
    std::vector<float> rounded(x.size());
    for (size_t i = 0; i < x.size(); ++i) rounded[i] = engine::RoundToBf16(x[i]);
    const std::vector<float> want = Products(rounded, w, 8, in, out);
    DeviceVec dx(x);
    DeviceVec dw(w);
    for (const MmaLayout layout : kMmaLayouts) {
      std::vector<float> eight;  // the sums with all 8 rows
      for (int rows = 8; rows >= 1; --rows) {
        INFO(rows << " rows, " << in << " -> " << out << ", weights as " << (layout.weights_as_b ? "B" : "A") << ", "
                  << layout.tiles << " tiles a block, staged runs of " << layout.staged_run_bytes << " bytes");
        // One row of guard past the outputs, poisoned, as are the outputs.
        DeviceVec dy(std::vector<float>(size_t(rows + 1) * out, kPoison));
        REQUIRE(LaunchGemvMma(dx.get(), dw.get(), dy.get(), rows, in, out, layout, nullptr).ok());
        std::vector<float> got = dy.Read();
        for (size_t i = size_t(rows) * out; i < got.size(); ++i) REQUIRE(std::isnan(got[i]));
        got.resize(size_t(rows) * out);
        Near(got, std::vector<float>(want.begin(), want.begin() + got.size()), 1e-4f, 1e-4f);
        if (rows == 8) eight = got;
        for (size_t i = 0; i < got.size(); ++i) {
          INFO("output " << i);
          REQUIRE(SameBits(got[i], eight[i]));
        }
      }
    }
  }
}

TEST_CASE("the tensor-core GEMV refuses shapes it cannot run, naming the value") {
  TEMPER_SKIP_WITHOUT_KERNELS();
  DeviceVec dx(RandomFloats(8 * 64, 1));
  DeviceVec dw(RandomBf16(16 * 64, 2));
  DeviceVec dy(std::vector<float>(8 * 16));
  auto error = [&](int rows, int in, int out, MmaLayout layout, size_t x_offset = 0) {
    const Status s = LaunchGemvMma(dx.get() + x_offset, dw.get(), dy.get(), rows, in, out, layout, nullptr);
    REQUIRE(s.code() == StatusCode::kInvalidArgument);
    return s.message();
  };
  const MmaLayout one_tile{true, 1};
  CHECK_THAT(error(0, 64, 16, one_tile), Catch::Contains("rows 0 (1-8)"));
  CHECK_THAT(error(9, 64, 16, one_tile), Catch::Contains("rows 9"));
  CHECK_THAT(error(1, 48, 16, one_tile), Catch::Contains("in 48 is not a positive multiple of 32"));
  CHECK_THAT(error(1, 64, 0, one_tile), Catch::Contains("out 0"));
  CHECK_THAT(error(1, 64, 16, MmaLayout{false, 3}),
             Catch::Contains("tiles 3 (1 or 2 of 8 weight rows, 1, 2 or 4 of 16)"));
  CHECK_THAT(error(1, 64, 16, MmaLayout{true, 4}), Catch::Contains("tiles 4"));
  CHECK_THAT(error(1, 64, 16, MmaLayout{false, 2, 256}), Catch::Contains("staged runs of 256 bytes: a staged layout"));
  CHECK_THAT(error(1, 64, 16, MmaLayout{true, 1, 512}), Catch::Contains("staged runs of 512 bytes"));
  CHECK_THAT(error(1, 64, 16, MmaLayout{false, 1, 128}), Catch::Contains("runs of 256 or 512 bytes"));
  CHECK_THAT(error(1, 32, 16, one_tile, 1), Catch::Contains("16-byte aligned"));
}

}  // namespace
}  // namespace temper::bench
