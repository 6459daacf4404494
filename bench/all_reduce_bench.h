// The all-reduce microbenchmark of temper-bench --gpus: every algorithm DeviceAllReduce has, at
// given message sizes, timed inside CUDA graphs (as a decode step runs them).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/cuda/all_reduce_plan.h"

namespace temper::engine::bench {

struct AllReduceTiming {
  cuda::AllReduceAlgo algo = cuda::AllReduceAlgo::kNone;
  uint64_t bytes = 0;
  bool available = false;
  double median_us = 0;  // per all-reduce
  std::string note;      // why it is not available
};

// For each algorithm and size: every rank (devices[r], one thread each) captures a graph of
// `iterations` all-reduces of that many bytes of fp32; the graphs are replayed 5 times, and each
// replay's time over `iterations` is a sample.
Result<std::vector<AllReduceTiming>> BenchAllReduce(std::span<const int> devices, std::span<const uint64_t> bytes,
                                                    int iterations);

}  // namespace temper::engine::bench
