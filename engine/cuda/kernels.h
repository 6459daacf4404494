// Launchers of the CUDA backend's kernels (one .cu file per op). Every pointer is device memory on
// the current device; every launcher enqueues on `stream`, never synchronizes, and returns
// InvalidArgument for a shape it does not handle or the launch error (TEMPER_CUDA_TRY).
// Weights and the KV cache are bf16 (uint16_t bits); activations and the residual stream fp32.
// Each kernel's math follows engine/cpu/forward.cpp; the point numbers are those of the fixture
// README. Thread safety: launches on distinct streams may run concurrently.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/status.h"

namespace temper::engine::cuda {

// gemv_bf16.cu. y[r * y_stride + o] = Σ_i x[r * x_stride + i] · w[o * w_stride + i] for r < rows
// (1..8), o < out, i < in. One warp per output row streams it once with 128-bit loads (when `in`,
// w_stride and w are 16-byte aligned; else 16-bit loads) and keeps `rows` fp32 accumulators.
Status LaunchGemvBf16(const float* x, int64_t x_stride, const uint16_t* w, int64_t w_stride, float* y,
                      int64_t y_stride, int rows, int in, int out, cudaStream_t stream);

// rmsnorm.cu. For each of `rows` rows of n floats: out = x · RmsScale · w (w null: no weight,
// point 3), then, when cos/sin are given, RoPE on the pairs (j, j + n/2) for j < angles at
// positions[row / rows_per_position] (point 8; tables are [position][angles]). In place is fine.
Status LaunchNormRope(const float* x, float* out, const uint16_t* w, int rows, int n, float eps, const float* cos,
                      const float* sin, int angles, const int64_t* positions, int rows_per_position,
                      cudaStream_t stream);
// rmsnorm.cu. The sandwich-norm residual update (points 10, 11): x = (x + RmsNorm(branch) · w) · scale.
Status LaunchNormResidual(float* x, const float* branch, const uint16_t* w, int rows, int n, float eps, float scale,
                          cudaStream_t stream);

// geglu.cu. gate[i] = GeluTanh(gate[i]) · up[i] for i < n (point 10).
Status LaunchGeglu(float* gate, const float* up, int64_t n, cudaStream_t stream);

// A layer's KV cache on one rank: rows of kv_heads · head_dim bf16; K null on k_eq_v layers,
// where K = RoPE(V ⊙ k_norm) is rebuilt at the key's position (point 6).
struct KvLayerView {
  uint16_t* k = nullptr;
  uint16_t* v = nullptr;
  const uint16_t* k_norm = nullptr;  // k_eq_v layers only
  bool sliding = false;
  int window = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int block_tokens = 0;
  const float* cos = nullptr;  // RoPE table [position][angles], for rebuilding K
  const float* sin = nullptr;
  int angles = 0;
};

// attention_decode.cu. Stores k/v (fp32 [rows][kv_heads·head_dim], k ignored when the layer keeps
// V only) in bf16 at each row's position: row r belongs to ring slot slots[r] and block table
// blocks + r · max_blocks.
Status LaunchKvWrite(const KvLayerView& kv, const float* k, const float* v, int rows, const int64_t* positions,
                     const int32_t* slots, const int32_t* blocks, int max_blocks, cudaStream_t stream);

// attention_decode.cu. Split-KV (flash-decoding) attention of one query row per sequence over the
// cache, which must already hold the row's own key: out[r][h] = Σ softmax(q·k) v over the visible
// keys (point 7 window, point 4 scale 1, point 9 head grouping: query head h reads KV head
// (q_head_begin + h) / group - kv_head_begin). `partials` holds rows · q_heads · splits ·
// (head_dim + 2) floats. head_dim must be 32, 64, 128, 256 or 512.
Status LaunchAttentionDecode(const KvLayerView& kv, const float* q, float* out, int rows, int q_heads,
                             int q_head_begin, int group, int kv_head_begin, const int64_t* positions,
                             const int32_t* slots, const int32_t* blocks, int max_blocks, int splits,
                             float* partials, cudaStream_t stream);

}  // namespace temper::engine::cuda
