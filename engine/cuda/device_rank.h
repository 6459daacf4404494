// DeviceRank: what one tensor-parallel rank of the device backend holds in its (device) memory —
// its weight shards, RoPE tables, KV cache and every activation buffer — and the forward pass it
// runs over one batch of rows (rank_forward.cpp). Everything is allocated once, at start-up, in
// the order of the memory plan (memory_plan.h): weights, workspace, rings, then the paged pool.
// Nothing is allocated during a forward pass, so a decode step can be captured as a graph.
//
// Internal to the device backend (device_backend.cpp builds ranks and drives them).
// Thread safety: a DeviceRank is used by its rank's thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/status.h"
#include "engine/cuda/rank_ops.h"
#include "engine/model/model_config.h"
#include "engine/model/tensor_parallel.h"
#include "engine/model/weights.h"

namespace temper::engine::cuda {

// Sizes every rank allocates for; the same on every rank.
struct RankLimits {
  int max_rows = 512;    // batch rows (tokens) one pass holds
  int max_out_rows = 8;  // logit rows resident at once (>= max sequences, >= max decode batch)
  int max_sequences = 8;
  int max_snapshots = 0;
  int64_t max_context = 4096;  // RoPE tables and block tables cover this many positions
  int block_tokens = 16;
  int64_t num_blocks = 0;  // paged KV blocks (full layers)
  int decode_splits = 64;  // split-KV parts of a decode row
  int top_candidates = 0;  // sampling candidates per row and rank (0: none)

  int max_blocks() const { return static_cast<int>((max_context + block_tokens - 1) / block_tokens); }
};

struct DeviceLayer {
  // Weights, packed [out][in] (the row-parallel o_proj and down_proj shards are copied out of the
  // checkpoint's wider rows).
  const uint16_t *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr;
  const uint16_t *gate = nullptr, *up = nullptr, *down = nullptr;
  const uint16_t *q_norm = nullptr, *k_norm = nullptr;
  const uint16_t *input_norm = nullptr, *post_attention_norm = nullptr;
  const uint16_t *pre_feedforward_norm = nullptr, *post_feedforward_norm = nullptr;
  float layer_scalar = 1;
  bool k_eq_v = false;
  int head_dim = 0;
  int q_width = 0;   // local query heads · head_dim
  int kv_width = 0;  // local KV heads · head_dim
  HeadRange heads;
  RopeView rope;
  KvLayerView kv;  // the sequences' cache (rings or paged pool)
  // Sliding layers: the snapshots' copies of the rings, [max_snapshots][window][kv_width] each.
  uint16_t *snap_k = nullptr, *snap_v = nullptr;
};

// Places an array of `count` elements of `elem` bytes at the end of an input layout of `*bytes`
// (8-byte aligned, so every array is aligned for its type) and returns its offset.
size_t TakeInputArray(size_t* bytes, size_t count, size_t elem);

// The per-pass inputs, laid out identically on the host and the device so one copy uploads them.
struct PassInputLayout {
  size_t tokens = 0, positions = 0, slots = 0, chunk_start = 0, first_row = 0, chunk_end = 0;
  size_t logit_index = 0, temperatures = 0;
  size_t bytes = 0;
  explicit PassInputLayout(const RankLimits& limits);
};

// One pass: `rows` batch rows (tokens) of the pass inputs; rows logit_index[0..logit_rows) are
// the rows whose logits are wanted, and they are output rows [out_begin, out_begin + logit_rows).
struct PassShape {
  int rows = 0;
  int logit_rows = 0;
  int out_begin = 0;
  int splits = 1;           // attention splits (decode rows: limits.decode_splits)
  bool candidates = false;  // also compute the sampling candidates of the logit rows
};

struct DeviceDrafter;  // device_drafter.h

struct DeviceRank {
  const ModelConfig* config = nullptr;
  RankShard shard;
  RankLimits limits;
  std::unique_ptr<RankOps> ops;

  std::vector<void*> allocations;  // freed with the rank
  std::vector<DeviceLayer> layers;
  const uint16_t* embed = nullptr;    // [vocab shard][hidden]
  const uint16_t* lm_head = nullptr;  // [vocab shard][hidden]; == embed when tied
  const uint16_t* final_norm = nullptr;
  uint64_t weight_bytes = 0, kv_bytes = 0, workspace_bytes = 0;

  // Pass inputs (PassInputLayout) and the block tables [max_sequences][max_blocks].
  void* pass_inputs = nullptr;
  int32_t* block_tables = nullptr;
  RowTables tables;  // views into pass_inputs and block_tables
  const int32_t* tokens = nullptr;
  const int32_t* logit_index = nullptr;
  const float* temperatures = nullptr;

  // Activations, fp32 unless noted: [RowCapacity(max_rows)][width].
  float *x = nullptr, *xn = nullptr, *proj = nullptr;
  float *q = nullptr, *k = nullptr, *v = nullptr, *att = nullptr;
  float *gate = nullptr, *up = nullptr;
  uint16_t* operand =
      nullptr;  // bf16 GEMM operand, [RowCapacity(max(max_rows, max_out_rows))][max(hidden, q_width, ffn)]
  float* partials = nullptr;  // split-KV partials of decode rows
  float* head_in = nullptr;   // [max_out_rows][hidden], output row r's final-norm input at r % max_out_rows
  float* logits = nullptr;    // [LogitRowCapacity(max_out_rows)][vocab shard], output row r at r % max_out_rows
  float *cand_vals = nullptr, *cand_max = nullptr, *cand_mass = nullptr;  // [max_out_rows][k], [max_out_rows]
  int32_t* cand_ids = nullptr;
  void* cand_scratch = nullptr;

  std::unique_ptr<DeviceDrafter> drafter;  // the MTP drafter's share of this rank, or null

  ~DeviceRank();
  int vocab_rows() const { return shard.vocab.size(); }
  Result<void*> Alloc(size_t bytes, uint64_t* account);
};

// A [rows][cols] view of host weights (rows `stride` apart), packed into new device memory and
// accounted as weights.
Result<const uint16_t*> UploadWeights(DeviceRank& rank, const Bf16Matrix& view);

// Allocates and fills everything: weights from `weights` (null: synthetic, seeded with `seed`),
// RoPE tables, KV cache and workspace. Errors: ResourceExhausted naming what did not fit.
Status BuildDeviceRank(DeviceRank& rank, const ModelWeights* weights, uint64_t seed);

// The bytes BuildDeviceRank allocates besides weights and KV (activations, RoPE tables, logits,
// candidates, pass inputs), each buffer rounded to 256 as Alloc rounds it: what the memory plan
// reserves before it sizes the KV pool.
uint64_t DeviceRankWorkspaceBytes(const ModelConfig& config, const RankShard& shard, const RankLimits& limits);

// Host memory a pass copies its results to (valid after Synchronize()); null members are skipped.
struct PassOutput {
  // [output rows][vocab_size]: each rank copies its vocabulary columns of the pass's logit rows.
  float* logits = nullptr;
  // [layers + 1][pass rows][hidden], from rank 0: the residual stream after the embedding and
  // after each layer but the last, then the final-norm output (HF's output_hidden_states).
  float* hidden = nullptr;
};

// Decode products of up to kMaxGemvRows rows are our GEMV kernel; larger ones go through cuBLASLt,
// whose kernel for a shape it has not run yet loads at that shape's first launch. Such a load may
// wait for the device to drain, which it never does while a peer's all-reduce spins there waiting
// for this rank: a deadlock. So GEMM rows come in buckets (GemmRows: 16, 32, 64, then multiples of
// 64), padded with rows that compute values nothing reads (an output row depends on its own input
// row only), and WarmGemms runs every bucket's shapes on every rank at start-up, before the first
// all-reduce: after it, no pass launches a GEMM kernel for the first time.
constexpr int kMaxGemvRows = 8;
// The bucket of a product of `rows` > kMaxGemvRows rows.
int GemmRows(int rows);
// Rows a buffer needs for passes of up to `rows` rows, bucket padding included.
int RowCapacity(int rows);
// Rows the logits buffer needs: max_out_rows, plus what the head's padding writes past a run that
// ends at the buffer's end.
int LogitRowCapacity(int max_out_rows);
// Runs every GEMM shape a pass can use (each bucket of every layer's products and of the head, at
// every alignment of the head's output rows), on the rank's own buffers.
Status WarmGemms(DeviceRank& rank);

// Enqueues one pass on the rank's ops (rank_forward.cpp): embedding, every layer (writing the
// rows' keys and values to the cache), and the head over the logit rows into `logits` (and the
// candidates). The pass inputs and block tables must already be on the device. Every rank of the
// group runs the same pass (its collectives).
Status RunPass(DeviceRank& rank, const PassShape& shape, const PassOutput& out);

}  // namespace temper::engine::cuda
