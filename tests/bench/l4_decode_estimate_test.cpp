// The 4xL4 estimate's per-kernel formulas (bench/l4_decode_estimate.h): a kernel near the roofline
// scales with the bandwidth ratio; one far from it keeps at least its time here, and at most its time
// scaled by the SM throughput ratio, never the bandwidth ratio.
#include "bench/l4_decode_estimate.h"

#include <catch2/catch.hpp>

#include <vector>

namespace temper::bench {
namespace {

constexpr double kCopyHere = 3000;  // GB/s

StepKernel Bandwidth(double bytes, double us, double fixed_us) {
  return StepKernel{.name = "k",
                    .per_step = 1,
                    .cost = StepCost::kBandwidth,
                    .bytes = bytes,
                    .us = us,
                    .fixed_us = fixed_us};
}

TEST_CASE("a kernel near the roofline scales with the copy bandwidth over the L4's read bandwidth") {
  // 57.8 MB in 21.5 us: 2,688 GB/s, 90% of the copy bandwidth here; 1 us at its minimal size.
  const StepKernel gemv = Bandwidth(57.8e6, 21.5, 1.0);
  CHECK_FALSE(FarFromRoofline(gemv, kCopyHere));
  CHECK(L4Micros(gemv, kCopyHere, 270, 2.2) == Approx(1.0 + (21.5 - 1.0) * kCopyHere / 270));
  // The SM factor plays no part near the roofline.
  CHECK(L4Micros(gemv, kCopyHere, 270, 1.0) == L4Micros(gemv, kCopyHere, 270, 2.2));
  // A fixed part that overlaps the streaming never takes the L4 past its read bandwidth: 44 MB in
  // 12.9 us with 5.6 us at the minimal size would give 5.6 + 7.3 x 3000 / 270 = 86.7 us, under the
  // bytes' 163 us; and the same kernel as above with 3.7 us at its minimal size, 201.5 us under 214.
  CHECK(L4Micros(Bandwidth(57.8e6, 21.5, 3.7), kCopyHere, 270, 1.0) == Approx(57.8e6 / (270 * 1e3)));
  const StepKernel overlapped = Bandwidth(44.04e6, 12.9, 5.6);
  CHECK_FALSE(FarFromRoofline(overlapped, kCopyHere));
  CHECK(L4Micros(overlapped, kCopyHere, 270, 1.0) == Approx(44.04e6 / (270 * 1e3)));
}

TEST_CASE("a kernel far from the roofline keeps its time here, scaled by the SM ratio at most") {
  // Decode attention on an H100: 4.19 MB in 50.3 us, 83 GB/s, 3% of the copy bandwidth.
  const StepKernel attention = Bandwidth(4.19e6, 50.3, 26.9);
  CHECK(FarFromRoofline(attention, kCopyHere));
  CHECK(L4Micros(attention, kCopyHere, 270, 1.0) == Approx(50.3));
  CHECK(L4Micros(attention, kCopyHere, 228, 2.2) == Approx(50.3 * 2.2));
  // Not the bandwidth ratio, which would put an L4 at 16 GB/s.
  CHECK(L4Micros(attention, kCopyHere, 228, 2.2) < 26.9 + (50.3 - 26.9) * kCopyHere / 228);
  // Its bytes' time there still bounds it from below.
  const StepKernel slow_bytes = Bandwidth(40e6, 25.0, 5.0);  // 1,600 GB/s: 53%, near
  CHECK_FALSE(FarFromRoofline(slow_bytes, kCopyHere));
  const StepKernel far_bytes = Bandwidth(20e6, 25.0, 5.0);  // 800 GB/s: 27%, far
  CHECK(FarFromRoofline(far_bytes, kCopyHere));
  CHECK(L4Micros(far_bytes, kCopyHere, 270, 1.0) == Approx(5.0 + 20e6 / (270 * 1e3)));
}

TEST_CASE("the step sums each kernel's launches, keeps latency-bound kernels as measured, adds the all-reduces") {
  const std::vector<StepKernel> kernels = {
      Bandwidth(57.8e6, 21.5, 3.7),   // near
      Bandwidth(4.19e6, 50.3, 26.9),  // far
      StepKernel{.name = "norm", .per_step = 10, .cost = StepCost::kLatency, .us = 5.0},
  };
  L4Assumptions a;
  a.read_gbs_low = 228;
  a.read_gbs_high = 270;
  a.sm_ratio = 2.0;
  a.all_reduces = 3;
  a.all_reduce_us_low = 10;
  a.all_reduce_us_high = 20;
  const L4StepRange r = EstimateL4Step(kernels, kCopyHere, a);
  CHECK(r.latency_ms == Approx(0.05));
  CHECK(r.bandwidth_fast_ms == Approx((L4Micros(kernels[0], kCopyHere, 270, 1) + 50.3) * 1e-3));
  CHECK(r.bandwidth_slow_ms == Approx((L4Micros(kernels[0], kCopyHere, 228, 2) + 100.6) * 1e-3));
  CHECK(r.fast_ms == Approx(r.bandwidth_fast_ms + 0.05 + 0.03));
  CHECK(r.slow_ms == Approx(r.bandwidth_slow_ms + 0.05 + 0.06));
  CHECK(r.bytes == Approx(57.8e6 + 4.19e6));
}

}  // namespace
}  // namespace temper::bench
