// One kernel of a decode step as the 4×L4 estimate reads it (l4_decode_estimate.h): what it is,
// how often a step launches it, what bounds its time, and its time on the GPU that measured it
// (decode_step_kernels.h times them). Plain values, host only: the estimate's arithmetic and its
// tests build without nvcc.
#pragma once

#include <string>

namespace temper::bench {

enum class StepCost {
  kBandwidth,  // time ∝ bytes read from device memory: scaled to another GPU's bandwidth
  kLatency,    // launch- or latency-bound: kept as measured
};

struct StepKernel {
  std::string name;  // what it is and its shape, e.g. "GEMV q_proj sliding 2048x5376"
  int per_step = 0;  // launches in one decode step
  StepCost cost = StepCost::kLatency;
  double bytes = 0;     // bandwidth-bound: bytes one launch must read (weights, or KV over the context)
  double us = 0;        // microseconds per launch, measured here
  double fixed_us = 0;  // bandwidth-bound: per launch at the minimal size (the part that does not scale)
};

}  // namespace temper::bench
