// Decode attention's split kernel on the tensor cores, a candidate to replace the SIMT kernel of
// engine/cuda/attention_kernel.h (at least on full layers, head_dim 512): temper-kernel-bench
// times it beside the engine's attention on the same inputs, after checking its output against the
// engine's within the tolerance its bf16 operands allow. attention_mma.cu says how it works, why,
// and how its numerics differ.
//
// Built with nvcc for temper-kernel-bench, and as C++ for the SIMT emulator
// (temper_cuda_emulated_tests). Thread safety: enqueues on `stream` only.
#pragma once

#include <cuda_runtime_api.h>

#include "common/status.h"
#include "engine/cuda/rank_ops.h"

namespace temper::bench {

// Whether LaunchAttentionMma is built for this head_dim (256 and 512: the Gemma 4 31B's layers).
bool AttentionMmaBuiltFor(int head_dim);

// engine::cuda::LaunchAttention on the tensor cores: the same inputs, outputs and partials layout
// (the engine's merge kernel combines the splits), with queries, keys and softmax weights rounded
// to bf16; the same argument checks, and InvalidArgument naming the head_dim for one that
// AttentionMmaBuiltFor refuses. `values_with_keys`: each tile's value rows are loaded with its
// keys (one wait for memory a tile, about 60 more registers at head_dim 512) rather than after its
// scores; the outputs are the same either way, and temper-kernel-bench times both.
Status LaunchAttentionMma(const engine::cuda::KvLayerView& kv, const float* q, const float* k, const float* v,
                          float* out, int rows, const engine::cuda::RowTables& t, const engine::cuda::HeadRange& heads,
                          int splits, float* partials, bool values_with_keys, cudaStream_t stream);

}  // namespace temper::bench
