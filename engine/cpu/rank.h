// What one tensor-parallel rank of the CPU backend holds, and the batch every rank runs.
// Internal to the CPU backend (cpu_backend.cpp builds these; forward.cpp runs them).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/kv_cache.h"
#include "engine/model/drafter_weights.h"
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

// One MTP drafter layer as this rank sees it: the query heads whose KV heads the rank holds in
// the target layer it reads (the drafter's heads split over ranks like the target's).
struct RankDrafterLayer {
  Bf16Matrix q_proj;              // this rank's query-head rows
  Bf16Matrix o_proj;              // this rank's input columns
  Bf16Matrix gate_proj, up_proj;  // this rank's FFN rows
  Bf16Matrix down_proj;           // this rank's FFN columns
  const RopeTable* rope = nullptr;
  int target_layer = 0;  // whose cache it reads
  int q_heads = 0;
  int q_head_begin = 0;
};

// What one rank holds of the MTP drafter, and its activations.
struct RankDrafter {
  const DrafterWeights* weights = nullptr;
  std::vector<RankDrafterLayer> layers;
  Range ffn;
  Bf16Matrix lm_head;  // this rank's vocabulary rows
  std::vector<float> in, x, xn, q, att, proj, gate, up, hidden;
};

struct RankContext {
  const ModelConfig* config = nullptr;
  const ModelWeights* weights = nullptr;
  RankShard shard;
  std::vector<RankLayer> layers;
  Bf16Matrix embed;    // this rank's vocabulary rows
  Bf16Matrix lm_head;  // this rank's vocabulary rows
  std::unique_ptr<CpuKvStore> kv;
  std::unique_ptr<WorkerGroup> pool;     // this rank's helper threads (the rank thread is worker 0)
  std::unique_ptr<RankDrafter> drafter;  // null without an MTP drafter

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

// One sequence of a drafting pass: the drafter's query sits at `pos` (the sequence's length) and
// reads the target's cache at positions below it.
struct DraftRow {
  int seq = 0;
  int64_t pos = 0;
  int32_t token = 0;       // the token at `pos`, the first step's input
  int64_t hidden_row = 0;  // the row of `head_in` (the last forward's final-norm output) to start from
};

struct DraftPlan {
  std::vector<DraftRow> rows;
  std::vector<std::span<const int32_t>> blocks;  // block table per KV slot
  int steps = 0;
  float* logits = nullptr;       // [rows][vocab], the current step's (shared by the ranks)
  int32_t* tokens = nullptr;     // [rows][steps], written by rank 0
  float* step_logits = nullptr;  // [rows][steps][vocab] when the caller keeps them, else null
};

// Runs `plan.steps` greedy draft steps on one rank. Every rank of `comm` must call it with the
// same plan, after a ForwardRank whose head_in holds the rows' hidden states.
void DraftRank(RankContext& rank, const DraftPlan& plan, Communicator& comm);

// Runs the decoder for `plan` on one rank. Every rank of `comm` must call it with the same plan.
// Cannot fail: the backend validates the batch and reserves the cache before.
void ForwardRank(RankContext& rank, const BatchPlan& plan, Communicator& comm);

}  // namespace temper::engine::cpu
