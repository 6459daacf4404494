// The all-reduce microbenchmark of temper-bench --gpus: every algorithm DeviceAllReduce has, at the
// message sizes the model really sends, checked and then timed inside CUDA graphs (as a decode step
// runs them).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/cuda/all_reduce_plan.h"
#include "engine/model/model_config.h"

namespace temper::engine::bench {

// A message size and what sends it.
struct AllReduceMessage {
  uint64_t bytes = 0;
  std::string what;
};

// The residual stream is fp32, so an all-reduce carries hidden_size · 4 bytes per row: a decode
// step at batch 1 and at `max_batch`, and a prefill pass of `max_rows` tokens.
std::vector<AllReduceMessage> ModelAllReduceMessages(const ModelConfig& config, int max_batch, int max_rows);

struct AllReduceTiming {
  cuda::AllReduceAlgo algo = cuda::AllReduceAlgo::kNone;
  AllReduceMessage message;
  bool available = false;
  bool chosen = false;   // the algorithm ChooseAllReduce takes for this size on these ranks
  int iterations = 0;    // all-reduces per captured graph
  double median_us = 0;  // per all-reduce
  std::string note;      // why it is not available
};

// For each algorithm and message: first a check — every rank's buffer holds small integers that
// differ per rank, three all-reduces run eagerly, and every element of every rank must equal
// tp² · Σ_r x_r exactly (integers below 2^24 add exactly in fp32, in any order); then every rank
// (devices[r], one thread each) captures a graph of all-reduces of that size (up to 200, fewer for
// large messages so a graph moves at most ~64 MiB), replayed once to warm up and 5 times timed;
// a replay's wall time over its all-reduces is a sample. The timed values grow by tp each call and
// may overflow to inf: the arithmetic's speed does not depend on them.
// Errors: Internal naming the algorithm, size, rank and element on a wrong sum; the CUDA error of
// a failing call otherwise.
Result<std::vector<AllReduceTiming>> BenchAllReduce(std::span<const int> devices,
                                                    std::span<const AllReduceMessage> messages);

}  // namespace temper::engine::bench
