// temper-bench's GPU part (temper_bench_gpu.cpp, built only with CUDA): the CUDA backend's speed
// and memory on synthetic weights of a config's shape, on the production decode path, checked
// before it is timed.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace temper::engine::bench {

struct GpuBenchArgs {
  std::string config;        // config.json of the shape to build
  std::vector<int> devices;  // one GPU per rank (may repeat)
  std::vector<int> prefill_tokens = {2048, 8192};
  std::vector<int> decode_tokens = {256};  // timed decode steps per run, at batch 1 and max_batch
  // Prompts before the decode runs, one run each at batch 1 and max_batch; the first is also the
  // context of the verification passes and the drafter's steps.
  std::vector<int> context_tokens = {1024};
  int max_batch = 8;
  int max_rows = 2048;  // tokens per prefill pass
  double kv_fraction = 0.9;
  int all_reduce_ranks = 4;        // ranks in the all-reduce microbenchmark at tp 1 (GPU repeated)
  std::string drafter_config;      // an MTP drafter's config.json (seeded weights): also time its draft steps
  bool programmatic_edges = true;  // CudaBackendOptions::programmatic_edges: off to measure what it saves
};

// Errors: the backend's, a CUDA call's, and Internal when a self-check fails (greedy tokens from
// candidates differ from those from full logits, a NaN or inf, a wrong all-reduce sum) or
// FailedPrecondition when timed steps did not run as graphs.
Status RunGpuBench(const GpuBenchArgs& args);

}  // namespace temper::engine::bench
