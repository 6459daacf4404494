// RankOps: everything one tensor-parallel rank of the device backend does to its memory — allocate
// and copy it, run the forward pass's kernels on it, join its peers' all-reduce, and replay a
// captured decode step.
//
// Two implementations:
//  * CudaOps (cuda_ops.h, built with nvcc): a GPU's memory, the kernels of kernels.h on the rank's
//    stream, DeviceAllReduce, CUDA graphs;
//  * ReferenceOps (reference_ops.h, always built): host memory and plain C++ loops that compute
//    exactly what each kernel is specified to compute, bf16 storage included.
// engine/cuda/rank_forward.cpp drives either one, so the device backend's whole host side —
// sharding, buffers, KV layout, chunking, graph buckets and padding — is checked against the
// golden fixtures on any machine (tests/engine/cuda/device_backend_test.cpp), and every CUDA kernel is
// checked against its reference twin on a GPU (tests/engine/cuda/cuda_kernels_test.cpp).
//
// Conventions: every pointer an op takes is memory this rank allocated with Alloc ("device
// memory"), unless its name says host. Ops are enqueued in order and may run asynchronously;
// CopyToHost's data is valid after Synchronize(). Weights and the KV cache are bf16 (uint16_t
// bits); activations, the residual stream and logits are fp32. The numbered points are those of
// the golden fixture README ("Subtle points of the Gemma 4 text decoder").
//
// Thread safety: one RankOps is driven by its rank's thread only. AllReduceSum is collective: every
// rank of the group calls it, in the same order, with the same n.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "common/status.h"

namespace temper::engine::cuda {

// RoPE tables of one layer kind: cos/sin [position][angles] (angle = fp32(pos · inv_freq[j])).
struct RopeView {
  const float* cos = nullptr;
  const float* sin = nullptr;
  int angles = 0;
};

// A layer's KV cache on one rank: rows of kv_heads · head_dim bf16. Sliding layers: one ring of
// `ring` rows per sequence slot (row = slot · ring + pos % ring; ring = window + kMaxDraftTokens,
// kv_cache.h), of which a query sees the last `window` positions. Full layers: paged blocks
// of `block_tokens` rows (row = blocks[slot][pos / block_tokens] · block_tokens + pos % block_tokens).
// k is null on k_eq_v layers, which keep V only; K = RoPE(V ⊙ k_norm) at the key's position
// (point 6), so those layers need k_norm and rope.
struct KvLayerView {
  uint16_t* k = nullptr;
  uint16_t* v = nullptr;
  const uint16_t* k_norm = nullptr;
  // What Gemma 3 computes differently (model_config.h): q_norm and k_norm multiply by
  // norm_offset + w (Gemma 3: 1 + w); QkvNorm multiplies each rotated query by score_scale, so the
  // attention's q·k is the scaled score (Gemma 3: query_pre_attn_scalar^-0.5); without value_norm
  // V is stored as projected (Gemma 4 normalizes it).
  float norm_offset = 0;
  float score_scale = 1;
  bool value_norm = true;
  bool sliding = false;
  int window = 0;
  int ring = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int block_tokens = 0;
  RopeView rope;
};

// Per batch row, in device memory: where its token sits and where its keys live. A padding row
// (position < 0) writes nothing to the cache and attends to nothing (its output is zero).
struct RowTables {
  const int64_t* positions = nullptr;    // [rows]
  const int32_t* slots = nullptr;        // [rows] KV slot: ring index and block-table row
  const int64_t* chunk_start = nullptr;  // [rows] first position of the row's item in this pass
  const int32_t* first_row = nullptr;    // [rows] batch row holding that position
  const int64_t* chunk_end = nullptr;    // [rows] one past the last position of the row's item
  const int32_t* blocks = nullptr;       // [max_sequences][max_blocks] block tables by slot
  int max_blocks = 0;
};

// Which query heads a rank computes, and the KV heads it holds (tensor_parallel.h).
struct HeadRange {
  int q_heads = 0;        // local query heads
  int q_head_begin = 0;   // first global query head
  int group = 1;          // query heads per KV head (num_heads / num_kv_heads)
  int kv_head_begin = 0;  // first global KV head held
};

// The products one GEMV launch computes over the same activation rows: up to kMax parts, part p
// of `width[p]` outputs from its own weights w[p] (packed [width][in]) into its own packed rows
// y[p] ([rows][width]). One launch for q, k and v.
struct GemvParts {
  static constexpr int kMax = 3;
  const uint16_t* w[kMax] = {};
  float* y[kMax] = {};
  int width[kMax] = {};

  int outputs() const { return width[0] + width[1] + width[2]; }
  // Appends a part; at most kMax.
  GemvParts& Add(const uint16_t* weights, float* out, int outputs) {
    for (int p = 0; p < kMax; ++p) {
      if (width[p] == 0) {
        w[p] = weights;
        y[p] = out;
        width[p] = outputs;
        break;
      }
    }
    return *this;
  }
};

// The widest row the CUDA kernels' NormResidual takes (8 elements a thread of 1,024, held in
// registers); the CUDA backend refuses a wider hidden size when it is created.
constexpr int kNormResidualMaxWidth = 8192;

class RankOps {
 public:
  virtual ~RankOps() = default;

  // ---- memory ----
  // `bytes` of uninitialised memory, 256-byte aligned. ResourceExhausted naming the size.
  virtual Result<void*> Alloc(size_t bytes) = 0;
  virtual void Free(void* p) = 0;
  // Host to device. `host` may be reused as soon as the call returns.
  virtual Status CopyToDevice(void* dst, const void* host, size_t bytes) = 0;
  // `rows` rows of `row_bytes`, host rows `host_pitch` bytes apart, device rows packed.
  virtual Status CopyRowsToDevice(void* dst, const void* host, size_t host_pitch, size_t row_bytes, size_t rows) = 0;
  // Device to host; `host` holds the data after Synchronize().
  virtual Status CopyToHost(void* host, const void* src, size_t bytes) = 0;
  // `rows` packed device rows of `row_bytes` to host rows `host_pitch` bytes apart; as CopyToHost.
  virtual Status CopyRowsToHost(void* host, size_t host_pitch, const void* src, size_t row_bytes, size_t rows) = 0;
  virtual Status CopyOnDevice(void* dst, const void* src, size_t bytes) = 0;
  // Waits for everything enqueued so far.
  virtual Status Synchronize() = 0;

  // ---- kernels (specified here; kernels.h launches them on a GPU, reference_ops.cpp on the CPU) ----

  // Seeded pseudo-random bf16 weights: dst[i] = bf16(mean + halfwidth · (2u - 1)), u =
  // SyntheticUniform(seed, i) (kernel_math.h), so both implementations fill identical values.
  virtual Status FillSynthetic(uint16_t* dst, int64_t n, uint64_t seed, float mean, float halfwidth) = 0;
  // Point 1, vocab-parallel: x[r] = table[tokens[r] - vocab_begin] · scale for tokens in
  // [vocab_begin, vocab_end), zeros otherwise (the all-reduce assembles the rows).
  virtual Status Embed(const int32_t* tokens, int rows, const uint16_t* table, int vocab_begin, int vocab_end,
                       int hidden, float scale, float* x) = 0;
  // Points 2, 8: out = x · RmsScale · (weight_offset + w) per row of n (w null: no weight; the
  // offset is ModelConfig::norm_weight_offset, 1 on Gemma 3). In place is fine.
  virtual Status RmsNorm(const float* x, float* out, const uint16_t* w, int rows, int n, float eps,
                         float weight_offset) = 0;
  // Points 3, 6 for `rows` rows of a layer's fresh heads, in one launch (q: [rows][q_heads ·
  // head_dim], k and v: [rows][kv.kv_heads · head_dim], head_dim = kv.head_dim):
  //   q = RoPE(RmsNorm(q) · (kv.norm_offset + q_norm)) · kv.score_scale per head, in place;
  //   k_eq_v layers (kv.k null): v = RmsNorm(k) per head (k holds the raw k_proj output; the
  //   attention rebuilds K from V);
  //   other layers: k = RoPE(RmsNorm(k) · (kv.norm_offset + kv.k_norm)) and v = RmsNorm(v) per
  //   head (v as it is without kv.value_norm), in place.
  // kv.kv_heads 0: queries only (the MTP drafter's, which reads the target's cache; k and v unused).
  // RoPE uses kv.rope at positions[r]; padding rows (position < 0) are normed, not rotated. With
  // `write_kv`, each head's result is also stored in the cache as KvWrite stores it, which is only
  // right before the attention when no row of the pass overwrites a ring row another row still
  // reads from the cache: true when every item has at most kMaxDraftTokens + 1 rows in the pass.
  virtual Status QkvNorm(const KvLayerView& kv, float* q, float* k, float* v, const uint16_t* q_norm, int rows,
                         int q_heads, float eps, const RowTables& t, bool write_kv) = 0;
  // Points 10, 11, then 2: x = (x + RmsNorm(branch) · (weight_offset + w)) · scale, per row of n;
  // then, when next_out is set, next_out = RmsNorm(x) · (weight_offset + next_w) (the next
  // sublayer's input norm, fused). n is at most kNormResidualMaxWidth on the GPU.
  virtual Status NormResidual(float* x, const float* branch, const uint16_t* w, int rows, int n, float eps, float scale,
                              const uint16_t* next_w, float* next_out, float weight_offset) = 0;
  // Point 10: gate[i] = GeluTanh(gate[i]) · up[i].
  virtual Status Geglu(float* gate, const float* up, int64_t n) = 0;
  // Decode products, rows 1-8, fp32 x and accumulation, for every part p of `parts`:
  // y[p][r·width[p] + o] = Σ_i x[r·in + i] · w[p][o·in + i].
  virtual Status Gemv(const float* x, const GemvParts& parts, int rows, int in) = 0;
  // Point 10 on decode rows (1-8): y[r·out + o] = GeluTanh(x_r · gate_o) · (x_r · up_o), gate and
  // up packed [out][in], each product as Gemv computes it.
  virtual Status GemvGeglu(const float* x, const uint16_t* gate, const uint16_t* up, float* y, int rows, int in,
                           int out) = 0;
  // y[i] = bf16(x[i]), round to nearest even (the operand of Gemm).
  virtual Status ToBf16(const float* x, uint16_t* y, int64_t n) = 0;
  // Prefill products: y[r·ldy + o] = Σ_i x[r·ldx + i] · w[o·ldw + i], bf16 operands, fp32
  // accumulation and result, any number of rows.
  virtual Status Gemm(const uint16_t* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* y, int64_t ldy, int rows,
                      int in, int out) = 0;
  // out[i] = x[index[i]] for i < n: rows of `width` floats.
  virtual Status GatherRows(const float* x, int64_t width, const int32_t* index, int n, float* out) = 0;
  // Point 12: y = cap · tanh(y / cap) over `rows` rows of `n` (row stride ld).
  virtual Status Softcap(float* y, int64_t ld, int rows, int n, float cap) = 0;
  // Stores each non-padding row's fresh k and v (fp32 [rows][kv_heads · head_dim]; k unused when
  // kv.k is null) in bf16 at its position. Sliding layers skip rows that a later row of the same
  // item overwrites in the ring (position < chunk_end − window), as the CPU backend does, so no
  // two rows write one ring row.
  virtual Status KvWrite(const KvLayerView& kv, const float* k, const float* v, int rows, const RowTables& t) = 0;
  // Attention of every row's local query heads (q: [rows][q_heads · head_dim], already normed and
  // rotated) over its visible keys (point 7: kv ≤ pos, and pos − kv < window on sliding layers),
  // scale 1 (point 4), query head h reading KV head (q_head_begin + h) / group − kv_head_begin
  // (point 9). Keys at positions ≥ chunk_start come from this pass's fresh k, v ([rows][kv_heads ·
  // head_dim], row first_row + pos − chunk_start), rounded to bf16 as the cache would hold them;
  // earlier keys come from the cache. `splits` cuts each row's keys into that many parts merged
  // with an online softmax (flash decoding); `partials` holds rows · q_heads · splits ·
  // (head_dim + 2) floats. head_dim must be 32, 64, 128, 256 or 512.
  virtual Status Attention(const KvLayerView& kv, const float* q, const float* k, const float* v, float* out, int rows,
                           const RowTables& t, const HeadRange& heads, int splits, float* partials) = 0;
  // Sampling candidates of `rows` rows of n logits (row stride ld): per row the k largest values,
  // descending, ties to the lower index, as (value, index + index_offset), plus the row's max and
  // Σ exp((l − max) / temperature) over all n entries (temperature 0 counts as 1).
  // out_vals/out_ids: [rows][k]; out_max/out_mass: [rows]. `scratch` holds
  // TopCandidatesScratchBytes(rows, n, k) bytes. k ≤ n, k ≤ 256.
  virtual Status TopCandidates(const float* logits, int64_t ld, int rows, int n, int k, int index_offset,
                               const float* temperatures, float* out_vals, int32_t* out_ids, float* out_max,
                               float* out_mass, void* scratch) = 0;

  // ---- collectives ----
  // The in-place sum of every rank's `n` floats at `data`, in rank order 0..tp-1 on every rank.
  virtual Status AllReduceSum(float* data, size_t n) = 0;

  // ---- captured steps ----
  // Records what `step` enqueues as step `key`, without running it. Replay(key) then runs the
  // recording, which reads per-call values only from memory the caller rewrites before each replay
  // (as a CUDA graph reads its buffers). The device backend has every rank capture a step before
  // any rank replays it: a replayed all-reduce spins until every peer's has begun, which a peer
  // still capturing could not do. ReferenceOps keeps `step` and calls it on each replay, which has
  // the same meaning. Replay of a key never captured: NotFound.
  virtual Status Capture(int key, const std::function<Status()>& step) = 0;
  virtual Status Replay(int key) = 0;
};

// What selects a GEMM kernel: the product's shape, its leading dimensions and the alignment of
// each operand (the largest power of two dividing its address, capped at 16 bytes: no kernel asks
// for more). GemmBf16 plans one kernel per GemmShape; ReferenceOps records the shapes it ran, so a
// test can show that no pass runs a shape the start-up warm-up did not (device_rank.h, WarmGemms).
struct GemmShape {
  int rows = 0, in = 0, out = 0;
  int64_t ldx = 0, ldw = 0, ldy = 0;
  int align_x = 0, align_w = 0, align_y = 0;
  auto operator<=>(const GemmShape&) const = default;
};
GemmShape GemmShapeOf(const void* x, int64_t ldx, const void* w, int64_t ldw, const void* y, int64_t ldy, int rows,
                      int in, int out);

// Bytes of scratch TopCandidates needs.
size_t TopCandidatesScratchBytes(int rows, int n, int k);

}  // namespace temper::engine::cuda
