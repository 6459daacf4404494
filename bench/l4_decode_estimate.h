// The 4×L4 batch-1 decode estimate: one rank's decode-step kernels, timed on whatever GPU runs
// temper-kernel-bench (decode_step_kernels.h, step_kernel.h), carried over to an L4 by stated assumptions, and
// printed as a range with every term, so a reader can redo the arithmetic. It is an estimate, not
// a measurement of an L4.
//
//   bandwidth-bound kernel (GEMV, LM head, attention over the KV), per launch:
//       t_L4 = max(fixed + (t_here − fixed) · copy_here / read_L4, bytes / read_L4)
//     fixed: the same kernel at a minimal size on this GPU (launch, ramp-up, tail: does not scale);
//     copy_here: this GPU's device-to-device copy bandwidth, measured in the same run;
//     read_L4: what a good kernel reads at on an L4, a range (below). A kernel that reaches a given
//     share of the copy bandwidth here is taken to reach that share of read_L4 there, but never to
//     read faster than read_L4: a fixed part that overlaps the streaming (an H200, 2026-11-27: a
//     GEMV's 5.6 us at 64 rows beside 12.9 us for 44 MB) would otherwise take bytes out of the
//     bandwidth's reach.
//   ... unless it reads at less than kRooflineShare of copy_here: then its time here is not its
//     bytes' time (decode attention at 1-2 K keys reads at 3-6% of an H100's copy bandwidth: it
//     waits on dependent loads and barriers), and scaling it by the bandwidth ratio would put an
//     L4 at 16 GB/s. Such a kernel takes the larger of its bytes' time there and its time here,
//     scaled by 1 at the fast end and by this GPU's SM throughput over the L4's at the slow end:
//       t_L4 = max(fixed + bytes / read_L4, t_here · {1, sm_ratio})
//     sm_ratio = (SMs × clock here) / (the L4's 58 SMs × 2.04 GHz): 2.2 for an H100 or H200.
//   latency-bound kernel (norms, RoPE, GeGLU, KV write, embedding, softcap, top candidates) and the
//     host's part of a step: as measured here.
//   all-reduce: `all_reduces` per step at an assumed per-call latency range (not measured: this
//     bench runs on one GPU, and no PCIe path between L4s was at hand).
//   step = Σ per_step · t_L4 + all_reduces · t_all_reduce;  tok/s = 1 / step.
//
// The fast end takes the high read bandwidth and the low all-reduce latency, the slow end the
// opposite. Pure host arithmetic. Thread safety: values only.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "bench/step_kernel.h"

namespace temper::bench {

// The L4's datasheet memory bandwidth (NVIDIA L4 datasheet: 300 GB/s GDDR6).
constexpr double kL4SpecGBs = 300.0;
// Achievable L4 read bandwidth, as shares of the 300 GB/s (engines.md §1.3): 76% is vLLM's whole
// decode on the reference box (14.9 tok/s × 15.35 GB per GPU per token; bf16, tp 4, eager), a
// floor for a kernel's own read rate; 90% is the top of calm's GEMVs on the same architecture
// (892–905 GB/s of the RTX 4090's 1,008 GB/s, zeux/calm README). No L4 STREAM figure was found.
constexpr double kL4ReadShareLow = 0.76;
constexpr double kL4ReadShareHigh = 0.90;
// vLLM on the reference box (engines.md, first lines): bf16, tp 4, --enforce-eager, 256/512 tokens.
constexpr double kVllmL4TokS = 14.9;
// The L4's streaming multiprocessors and boost clock (NVIDIA L4 datasheet: 7,424 CUDA cores, 128 per
// Ada SM; 2,040 MHz).
constexpr int kL4SmCount = 58;
constexpr double kL4BoostGHz = 2.04;
// Below this share of the copy bandwidth here, a bandwidth-bound kernel is treated as far from the
// roofline (the formula above).
constexpr double kRooflineShare = 0.5;

// A one-shot push all-reduce and NCCL, 4 ranks over PCIe inside a CUDA graph, V100s behind one PLX
// switch (engines.md §1.4, from sglang-V100 PR #2), interpolated linearly in the message size
// (sizes beyond the table take its last row). L4 servers usually put each GPU on its own root
// port, which is slower than one switch: that case is NOT inside this range.
struct AllReduceLatency {
  double one_shot_us = 0;
  double nccl_us = 0;
};
AllReduceLatency PlxAllReduceLatency(uint64_t bytes);

struct L4Assumptions {
  double read_gbs_low = kL4ReadShareLow * kL4SpecGBs;
  double read_gbs_high = kL4ReadShareHigh * kL4SpecGBs;
  double all_reduce_us_low = 0;   // fast end
  double all_reduce_us_high = 0;  // slow end
  std::string all_reduce_source;  // where the two latencies come from, printed beside them
  int all_reduces = 0;            // per step
  uint64_t all_reduce_bytes = 0;  // per call
  double sm_ratio = 1;            // this GPU's SMs x clock over the L4's (kL4SmCount x kL4BoostGHz)
};

// Whether a bandwidth-bound kernel reads at less than kRooflineShare of the copy bandwidth here.
bool FarFromRoofline(const StepKernel& k, double copy_gbs_here);

struct L4StepRange {
  double fast_ms = 0, slow_ms = 0;                      // whole step
  double bandwidth_fast_ms = 0, bandwidth_slow_ms = 0;  // bandwidth-bound kernels
  double latency_ms = 0;                                // latency-bound kernels and the host, as measured
  double all_reduce_fast_ms = 0, all_reduce_slow_ms = 0;
  double bytes = 0;  // read per step by the bandwidth-bound kernels
};

// Per-launch time on an L4 at `read_gbs` (the formulas above); `sm_factor` multiplies the time here of
// a kernel far from the roofline (1 at the fast end, sm_ratio at the slow end).
double L4Micros(const StepKernel& k, double copy_gbs_here, double read_gbs, double sm_factor);

L4StepRange EstimateL4Step(std::span<const StepKernel> kernels, double copy_gbs_here, const L4Assumptions& a);

// Prints the table (markdown, one row per kernel, then the all-reduce and the step) and the
// assumptions and result as bullets, so both can go into RESULTS.md as they are.
void PrintL4Estimate(std::span<const StepKernel> kernels, double copy_gbs_here, const L4Assumptions& a,
                     const std::string& what);

}  // namespace temper::bench
