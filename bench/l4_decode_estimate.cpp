#include "bench/l4_decode_estimate.h"

#include <algorithm>
#include <cstdio>

namespace temper::bench {

AllReduceLatency PlxAllReduceLatency(uint64_t bytes) {
  // engines.md §1.4: message (KiB), NCCL µs, one-shot push µs.
  struct Row {
    double kib, nccl, one_shot;
  };
  static constexpr Row kTable[] = {{4, 19.4, 4.0},   {8, 20.3, 5.0},    {16, 22.3, 7.2},
                                   {32, 24.2, 11.8}, {128, 51.8, 44.5}, {384, 83.5, 120.3}};
  const double kib = static_cast<double>(bytes) / 1024.0;
  const Row* lo = &kTable[0];
  const Row* hi = &kTable[0];
  for (const Row& r : kTable) {
    hi = &r;
    if (r.kib >= kib) break;
    lo = &r;
  }
  if (kib <= lo->kib || hi == lo) return {lo->one_shot, lo->nccl};
  if (kib >= hi->kib) return {hi->one_shot, hi->nccl};
  const double f = (kib - lo->kib) / (hi->kib - lo->kib);
  return {lo->one_shot + f * (hi->one_shot - lo->one_shot), lo->nccl + f * (hi->nccl - lo->nccl)};
}

bool FarFromRoofline(const StepKernel& k, double copy_gbs_here) {
  return k.cost == StepCost::kBandwidth && k.us > 0 && k.bytes / (k.us * 1e3) < kRooflineShare * copy_gbs_here;
}

double L4Micros(const StepKernel& k, double copy_gbs_here, double read_gbs, double sm_factor) {
  if (k.cost == StepCost::kLatency) return k.us;
  if (FarFromRoofline(k, copy_gbs_here)) {
    return std::max(k.fixed_us + k.bytes / (read_gbs * 1e3), k.us * sm_factor);
  }
  const double streaming = std::max(0.0, k.us - k.fixed_us);
  return std::max(k.fixed_us + streaming * copy_gbs_here / read_gbs, k.bytes / (read_gbs * 1e3));
}

L4StepRange EstimateL4Step(std::span<const StepKernel> kernels, double copy_gbs_here, const L4Assumptions& a) {
  L4StepRange r;
  for (const StepKernel& k : kernels) {
    if (k.cost == StepCost::kLatency) {
      r.latency_ms += k.per_step * k.us * 1e-3;
      continue;
    }
    r.bytes += k.per_step * k.bytes;
    r.bandwidth_fast_ms += k.per_step * L4Micros(k, copy_gbs_here, a.read_gbs_high, 1.0) * 1e-3;
    r.bandwidth_slow_ms += k.per_step * L4Micros(k, copy_gbs_here, a.read_gbs_low, a.sm_ratio) * 1e-3;
  }
  r.all_reduce_fast_ms = a.all_reduces * a.all_reduce_us_low * 1e-3;
  r.all_reduce_slow_ms = a.all_reduces * a.all_reduce_us_high * 1e-3;
  r.fast_ms = r.bandwidth_fast_ms + r.latency_ms + r.all_reduce_fast_ms;
  r.slow_ms = r.bandwidth_slow_ms + r.latency_ms + r.all_reduce_slow_ms;
  return r;
}

void PrintL4Estimate(std::span<const StepKernel> kernels, double copy_gbs_here, const L4Assumptions& a,
                     const std::string& what) {
  const double hi = a.read_gbs_high, lo = a.read_gbs_low;
  const L4StepRange r = EstimateL4Step(kernels, copy_gbs_here, a);
  std::printf("\n* 4xL4 estimate (NOT a measurement of an L4): %s\n\n", what.c_str());
  std::printf(
      "| kernel (one rank) | per step | MB read per launch | us here | fixed us | us on L4, fast / slow | "
      "ms per step on L4, fast / slow |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|\n");
  for (const StepKernel& k : kernels) {
    const double fast = L4Micros(k, copy_gbs_here, hi, 1.0), slow = L4Micros(k, copy_gbs_here, lo, a.sm_ratio);
    if (k.cost == StepCost::kBandwidth) {
      std::printf("| %s%s | %d | %.2f | %.1f | %.1f | %.1f / %.1f | %.3f / %.3f |\n", k.name.c_str(),
                  FarFromRoofline(k, copy_gbs_here) ? " (far from the roofline)" : "", k.per_step, k.bytes / 1e6, k.us,
                  k.fixed_us, fast, slow, k.per_step * fast * 1e-3, k.per_step * slow * 1e-3);
    } else {
      std::printf("| %s | %d | latency-bound | %.1f | | %.1f (as measured) | %.3f |\n", k.name.c_str(), k.per_step,
                  k.us, k.us, k.per_step * k.us * 1e-3);
    }
  }
  std::printf("| all-reduce of %llu B (assumed, not measured) | %d | | | | %.1f / %.1f | %.3f / %.3f |\n",
              static_cast<unsigned long long>(a.all_reduce_bytes), a.all_reduces, a.all_reduce_us_low,
              a.all_reduce_us_high, r.all_reduce_fast_ms, r.all_reduce_slow_ms);
  std::printf("| **decode step** | | %.0f MB | | | | **%.2f / %.2f** |\n\n", r.bytes / 1e6, r.fast_ms, r.slow_ms);

  std::printf(
      "* bandwidth-bound kernels on L4: t = max(fixed + (us here - fixed) x %.0f GB/s (copy bandwidth here, "
      "read + write) / L4 read bandwidth, MB / L4 read bandwidth), at %.0f GB/s (fast: %.0f%% of the L4's %.0f GB/s, "
      "calm's GEMVs on "
      "Ada) and %.0f GB/s (slow: %.0f%%, vLLM's whole decode on 4xL4; engines.md 1.3); those reading at under %.0f%% "
      "of the copy bandwidth here (far from the roofline): t = max(fixed + MB / L4 read bandwidth, us here x 1 "
      "(fast) or x %.2f (slow: this GPU's SMs x clock over the L4's %d x %.2f GHz)): %.2f / %.2f ms per step\n",
      copy_gbs_here, hi, 100 * hi / kL4SpecGBs, kL4SpecGBs, lo, 100 * lo / kL4SpecGBs, 100 * kRooflineShare, a.sm_ratio,
      kL4SmCount, kL4BoostGHz, r.bandwidth_fast_ms, r.bandwidth_slow_ms);
  std::printf("* latency-bound kernels and the host part of a step, kept as measured on this GPU: %.2f ms per step\n",
              r.latency_ms);
  std::printf("* all-reduce: %d per step x %.1f-%.1f us (%s) = %.2f-%.2f ms per step\n", a.all_reduces,
              a.all_reduce_us_low, a.all_reduce_us_high, a.all_reduce_source.c_str(), r.all_reduce_fast_ms,
              r.all_reduce_slow_ms);
  std::printf(
      "* => 4xL4, tp 4, batch-1 decode: %.2f-%.2f ms per token = **%.1f-%.1f tok/s** (estimate), beside "
      "vLLM's %.1f tok/s measured on the reference box (bf16, tp 4, eager) and the %.1f tok/s roofline "
      "(%.2f GB per rank per token at %.0f GB/s)\n",
      r.fast_ms, r.slow_ms, 1e3 / r.slow_ms, 1e3 / r.fast_ms, kVllmL4TokS, kL4SpecGBs * 1e9 / r.bytes, r.bytes / 1e9,
      kL4SpecGBs);
}

}  // namespace temper::bench
