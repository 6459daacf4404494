// DeviceDrafter: Gemma 4's MTP drafter (drafter_weights.h) on one rank of the device backend — its
// weight shards, its buffers, and the draft step it runs (device_drafter.cpp), made of the same ops
// as the target's forward pass, so it runs on CudaOps and on the CPU twins alike.
//
// One draft step, for up to kMaxDraftRows sequences each at position L (its length):
//   [e, h] = [target_embed(token) · embed_scale, h]     (Embed, the all-reduce, GatherRows)
//   x = pre_projection · [e, h]                          (GEMV; replicated on every rank)
//   4 layers: q only (QkvNorm with no KV heads), attention over the target's cache of its last
//   layer of the same kind (the target layer's view; a query at L - 1 on a window one longer sees
//   the last window + 1 positions below L, as transformers' assistant does), o_proj, the MLP, both
//   row-parallel with their all-reduce, as the target's layers
//   logits = lm_head · final_norm(x) on this rank's vocabulary rows; its top candidate
//   h = post_projection · final_norm(x)                  (for the next step)
// The host merges the ranks' top candidates into each sequence's draft and feeds it to the next
// step. The first step's h is the target's final-norm hidden state of the row that sampled the
// token, which the head leaves in head_in at that output row's slot.
//
// Internal to the device backend. Thread safety: as DeviceRank.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "engine/cuda/device_rank.h"
#include "engine/model/drafter_weights.h"

namespace temper::engine::cuda {

// Sequences one draft step holds (the GEMV's rows); Draft runs larger requests in groups.
constexpr int kMaxDraftRows = kMaxGemvRows;

struct DeviceDrafterLayer {
  const uint16_t *q = nullptr, *o = nullptr, *gate = nullptr, *up = nullptr, *down = nullptr;
  const uint16_t *q_norm = nullptr, *input_norm = nullptr, *post_attention_norm = nullptr;
  const uint16_t *pre_feedforward_norm = nullptr, *post_feedforward_norm = nullptr;
  float layer_scalar = 1;
  int q_width = 0;     // local query heads · head_dim
  HeadRange heads;     // local query heads over the target layer's KV heads on this rank
  KvLayerView query;   // q's norm and RoPE: the target layer's geometry, no KV heads
  KvLayerView attend;  // the target layer's cache; sliding: a window one longer (see above)
};

// The per-step inputs, laid out identically on the host and the device so one copy uploads them.
struct DraftInputLayout {
  size_t tokens = 0, rope_positions = 0, attend_positions = 0, slots = 0, chunk_start = 0, first_row = 0, chunk_end = 0,
         hidden_slots = 0, interleave = 0, temperatures = 0;
  size_t bytes = 0;
  DraftInputLayout();
};

struct DeviceDrafter {
  std::vector<DeviceDrafterLayer> layers;
  const uint16_t *pre_projection = nullptr, *post_projection = nullptr, *final_norm = nullptr;
  const uint16_t* lm_head = nullptr;  // [vocab shard][drafter hidden]
  int hidden = 0;                     // the drafter's width
  int ffn = 0;                        // this rank's FFN channels

  void* inputs = nullptr;  // DraftInputLayout
  RowTables rope_tables, attend_tables;
  const int32_t* tokens = nullptr;
  const int32_t* hidden_slots = nullptr;  // head_in rows of the first step's hidden states
  const int32_t* interleave = nullptr;    // [2 · kMaxDraftRows]: e0, h0, e1, h1, ...
  const float* temperatures = nullptr;    // ones (the candidates' mass is not used)

  // [2 · kMaxDraftRows][backbone hidden]: the rows' embeddings, then their hidden states.
  float* eh = nullptr;
  float* cat = nullptr;  // [kMaxDraftRows][2 · backbone hidden]
  float *x = nullptr, *xn = nullptr, *proj = nullptr, *q = nullptr, *att = nullptr, *gate = nullptr;
  float* logits = nullptr;  // [kMaxDraftRows][vocab shard]
  float *cand_vals = nullptr, *cand_max = nullptr, *cand_mass = nullptr;
  int32_t* cand_ids = nullptr;
  void* cand_scratch = nullptr;
};

// What a rank's drafter takes: its weight shards, and its buffers.
struct DrafterRankBytes {
  uint64_t weights = 0;
  uint64_t workspace = 0;
};
DrafterRankBytes DeviceDrafterBytes(const DrafterConfig& drafter, const RankShard& shard);

// What the device backend needs of a drafter beyond PlanDrafterHeads (drafter_config.h), which
// must have accepted it: no more query heads per rank than the target's (the attention's
// partials), and the target's RoPE for each layer kind. InvalidArgument naming the layer.
Status CheckDeviceDrafter(const DeviceRank& rank, const DrafterConfig& drafter);

// Uploads the drafter's shards and allocates its buffers (accounted as weights and workspace).
// The target's layers must be built. ResourceExhausted naming what did not fit.
Status BuildDeviceDrafter(DeviceRank& rank, const DrafterWeights& weights);

// Enqueues one draft step of `rows` sequences (inputs uploaded). The first step also gathers the
// target's hidden states from head_in. Every rank of the group runs it (its collectives).
Status RunDraftStep(DeviceRank& rank, int rows, bool first);

}  // namespace temper::engine::cuda
