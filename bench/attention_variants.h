// Decode attention's split kernel (engine/cuda/attention_kernel.h) with other numbers of query
// heads a block and keys a warp loads at once than the engine launches, at the head dims of the
// Gemma 4 31B's layers (256 sliding, 512 full): temper-kernel-bench times each beside the engine's
// attention on the same inputs, after checking its output against the engine's, and the fastest
// becomes attention.cu's choice (kMaxHeads, kKeysAtOnce).
//
// Built with nvcc for temper-kernel-bench, and as C++ for the SIMT emulator
// (temper_cuda_emulated_tests). Thread safety: enqueues on `stream` only.
#pragma once

#include <cuda_runtime_api.h>

#include <vector>

#include "common/status.h"
#include "engine/cuda/rank_ops.h"

namespace temper::bench {

struct AttentionVariant {
  int heads_per_block;  // query heads a block takes at most (GM)
  int keys_at_once;     // keys a warp loads before it uses the first (KW)
};

// The variants built for head_dim 256 and 512 (none for the others), the engine's own among them.
std::vector<AttentionVariant> AttentionVariantsFor(int head_dim);

// engine::cuda::LaunchAttention with the split kernel of `variant`: the same outputs within fp32
// rounding and the same argument checks; InvalidArgument, naming it, for a variant that
// AttentionVariantsFor(kv.head_dim) does not list.
Status LaunchAttentionVariant(const engine::cuda::KvLayerView& kv, const float* q, const float* k, const float* v,
                              float* out, int rows, const engine::cuda::RowTables& t,
                              const engine::cuda::HeadRange& heads, int splits, float* partials,
                              AttentionVariant variant, cudaStream_t stream);

}  // namespace temper::bench
