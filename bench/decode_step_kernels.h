// Every kernel of one batch-1 decode step of one tensor-parallel rank, timed alone at that rank's
// shapes on this GPU, with how many times a step launches it: the input of the 4×L4 estimate
// (l4_decode_estimate.h), which temper-kernel-bench prints. The launches and their counts follow
// engine/cuda/rank_forward.cpp (Layer, Head, RunPass) one for one; the host work around a step
// follows DeviceBackend::Forward (pass upload, graph launch, candidates download, one thread per
// rank).
//
// How each is timed (gpu_timing.h): a CUDA graph of many launches of the kernel, as the decode
// graph runs it; inputs random, never zeros; weights and KV rotate over enough copies (256 MiB) that
// L2 cannot serve a repeat, as in a real step where every layer reads its own. A bandwidth-bound
// kernel (GEMV, attention over the KV) is also timed at a minimal size (64 output rows; 16 keys):
// that time is its fixed part (launch, ramp-up, tail), which does not scale with bandwidth. Each
// attention is followed by a line with its merge kernel's share, timed alone. The attention of a
// prefill chunk is timed apart (TimePrefillAttention).
//
// Built only with nvcc. Thread safety: uses `device`; one call at a time.
#pragma once

#include <string>
#include <vector>

#include "bench/step_kernel.h"
#include "common/status.h"
#include "engine/model/model_config.h"
#include "engine/model/tensor_parallel.h"

namespace temper::bench {

struct DecodeStepShape {
  int context = 2048;       // tokens already in the sequence when the step runs
  int decode_splits = 64;   // most split-KV parts (DeviceBackendOptions::decode_splits)
  int top_candidates = 64;  // DeviceBackendOptions::top_candidates
  int max_rows = 2048;      // DeviceBackendOptions::max_rows: sizes the pass inputs uploaded per step
  int block_tokens = 16;    // KvCacheOptions::block_tokens
};

// A step's attention of one layer kind for `rows` rows a launch, each row another sequence, timed
// with each row's own split count (the engine's) and with the fewer splits that filled the GPU for
// `rows` rows, the engine's rule until 2026-11-27, under which a row's sums depended on the rows
// beside it.
struct BatchAttention {
  std::string name;
  int per_step = 0, rows = 0;
  int own_splits = 0, for_rows_splits = 0;
  double own_us = 0, for_rows_us = 0;  // per launch
};

// Every layer kind's BatchAttention at `rows` rows on `device`. Errors: the CUDA call or launch
// that failed.
Result<std::vector<BatchAttention>> TimeDecodeAttentionBatch(const engine::ModelConfig& config,
                                                             const engine::RankShard& shard, int device,
                                                             const DecodeStepShape& shape, int rows);

// A prefill pass's attention of one layer kind: `rows` rows of one sequence over their own keys
// (positions 0 .. rows - 1), one split, as the engine runs a prefill chunk.
struct PrefillAttention {
  std::string name;
  int per_pass = 0, rows = 0;  // launches in a pass (the layers of the kind), and rows a launch
  double us = 0;               // per launch
};

// Every layer kind's PrefillAttention at `rows` rows on `device`. Errors: the CUDA call or launch
// that failed.
Result<std::vector<PrefillAttention>> TimePrefillAttention(const engine::ModelConfig& config,
                                                           const engine::RankShard& shard, int device, int rows);

// The kernels of rank `shard.rank`'s decode step (shard from PlanShards(config, tp)), each timed
// on `device`, then the host work of a step with shard.tp rank threads on that device. Errors: the
// CUDA call or launch that failed, naming the kernel.
Result<std::vector<StepKernel>> TimeDecodeStepKernels(const engine::ModelConfig& config, const engine::RankShard& shard,
                                                      int device, const DecodeStepShape& shape);

// Only the step's attention kernels (one per layer kind, with its launches per step), timed as
// TimeDecodeStepKernels times them.
Result<std::vector<StepKernel>> TimeDecodeAttention(const engine::ModelConfig& config, const engine::RankShard& shard,
                                                    int device, const DecodeStepShape& shape);

}  // namespace temper::bench
