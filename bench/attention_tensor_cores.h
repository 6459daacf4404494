// A kernel candidate: decode attention's split kernel on the tensor cores, the outputs and partials
// of the engine's LaunchAttention (engine/cuda/attention.cu) with queries, keys and softmax weights
// rounded to bf16, at every head_dim the engine takes. It lives here, outside the engine, until a
// GPU run decides it: temper-kernel-bench checks it against the engine's SIMT kernel and times it
// beside it (decode_step_kernels.h); bench/RESULTS.md states the rule by which that run adopts it
// into engine/cuda or deletes it. attention_tensor_cores.cu says why it might win.
//
// Built with nvcc for temper-kernel-bench and temper_cuda_tests, and as C++ for the SIMT emulator
// (temper_cuda_emulated_tests). Thread safety: enqueues on `stream` only.
#pragma once

#include <cuda_runtime_api.h>

#include "common/status.h"
#include "engine/cuda/rank_ops.h"

namespace temper::bench {

// Where a tile's value rows are loaded: the two orders compute the same outputs, and which is
// faster is the GPU's to say.
enum class TensorCoreAttentionOrder {
  kValuesAfterScores,  // after the tile's score MMAs: fewer registers, two waits for memory a tile
  kValuesWithKeys,     // with the tile's keys: one wait a tile, about 60 more registers at head_dim 512
};
constexpr TensorCoreAttentionOrder kTensorCoreAttentionOrders[] = {TensorCoreAttentionOrder::kValuesAfterScores,
                                                                   TensorCoreAttentionOrder::kValuesWithKeys};

// The order in words, for the bench's lines.
const char* TensorCoreAttentionOrderName(TensorCoreAttentionOrder order);

// engine::cuda::LaunchAttention's outputs (and partials, merged by the engine's merge kernel) on the
// tensor cores. InvalidArgument as LaunchAttention's (engine/cuda/attention_launch.h), and for an
// order that is not one of TensorCoreAttentionOrder's values.
Status LaunchAttentionTensorCores(const engine::cuda::KvLayerView& kv, const float* q, const float* k, const float* v,
                                  float* out, int rows, const engine::cuda::RowTables& t,
                                  const engine::cuda::HeadRange& heads, int splits, float* partials,
                                  TensorCoreAttentionOrder order, cudaStream_t stream);

}  // namespace temper::bench
