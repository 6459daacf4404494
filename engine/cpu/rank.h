// What one tensor-parallel rank of the CPU backend holds, and the batch every rank runs.
// Internal to the CPU backend (cpu_backend.cpp builds these; forward.cpp runs them).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/kv_cache.h"
#include "engine/model/model_config.h"
#include "engine/model/tensor_parallel.h"
#include "engine/model/weights.h"
#include "engine/thread_pool.h"

namespace temper::engine::cpu {

// cos/sin of every (position, frequency) of one layer kind: angle = fp32(pos · inv_freq[j]),
// inv_freq[j] = theta^(-2j / head_dim), for j < angles (the other dims are not rotated).
struct RopeTable {
  int head_dim = 0;
  int angles = 0;
  std::vector<float> cos, sin;  // [max_context][angles]
};
std::unique_ptr<RopeTable> MakeRopeTable(const LayerGeometry& layer, int64_t max_context);

// One layer's weights as this rank sees them (views, no copies).
struct RankLayer {
  Bf16Matrix q_proj, k_proj, v_proj;  // this rank's output rows (v_proj empty on k_eq_v layers)
  Bf16Matrix o_proj;                  // this rank's input columns
  Bf16Matrix gate_proj, up_proj;      // this rank's FFN rows
  Bf16Matrix down_proj;               // this rank's FFN columns
  const RopeTable* rope = nullptr;
  int q_heads = 0;        // local query heads
  int q_head_begin = 0;   // first global query head
  int kv_heads = 0;       // local KV heads
  int kv_head_begin = 0;  // first global KV head
};

struct RankContext {
  const ModelConfig* config = nullptr;
  const ModelWeights* weights = nullptr;
  RankShard shard;
  std::vector<RankLayer> layers;
  Bf16Matrix embed;    // this rank's vocabulary rows
  Bf16Matrix lm_head;  // this rank's vocabulary rows
  std::unique_ptr<CpuKvStore> kv;
  std::unique_ptr<WorkerGroup> pool;  // this rank's helper threads (the rank thread is worker 0)

  // Activations, resized per batch: [rows][width].
  std::vector<float> x, xn, q, k, v, att, proj, gate, up, head_in;
};

// One token of the batch.
struct BatchRow {
  int seq = 0;      // KV slot
  int64_t pos = 0;  // its position in the sequence
  int32_t token = 0;
  int64_t chunk_start = 0;  // position of its item's first token (positions before are cached)
  int64_t first_row = 0;    // row of its item's first token
  int64_t chunk_end = 0;    // one past its item's last position
};

struct BatchPlan {
  std::vector<BatchRow> rows;
  std::vector<std::span<const int32_t>> blocks;  // block table per KV slot
  std::vector<int64_t> logit_rows;               // rows whose logits are wanted, in output order
  float* logits = nullptr;                       // [logit_rows][vocab]
  float* hidden = nullptr;                       // [layers + 1][rows][hidden], or null
};

// Runs the decoder for `plan` on one rank. Every rank of `comm` must call it with the same plan.
// Cannot fail: the backend validates the batch and reserves the cache before.
void ForwardRank(RankContext& rank, const BatchPlan& plan, Communicator& comm);

}  // namespace temper::engine::cpu
