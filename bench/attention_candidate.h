// A candidate for the split half of decode attention (engine/cuda/attention.cu's
// GroupAttentionKernel), built to take fewer dependent trips to memory: each warp loads several
// whole keys at once, its lanes splitting the head dims, instead of one thread walking one key's
// row. It is here until a GPU shows whether it beats the kernel in engine/cuda;
// attention_candidate.cu says why it might. The merge of the splits is the engine's own
// (LaunchAttentionMerge).
//
// Built with nvcc for temper-kernel-bench and temper_cuda_tests, and as C++ for the SIMT emulator
// (temper_cuda_emulated_tests). Thread safety: enqueues on `stream` only.
#pragma once

#include <cuda_runtime_api.h>

#include "common/status.h"
#include "engine/cuda/rank_ops.h"

namespace temper::bench {

// The contract of engine::cuda::LaunchAttention, argument for argument: the same outputs within
// fp32 rounding, the same partials layout, and the same errors for the same bad arguments.
Status LaunchAttentionCandidate(const engine::cuda::KvLayerView& kv, const float* q, const float* k, const float* v,
                                float* out, int rows, const engine::cuda::RowTables& t,
                                const engine::cuda::HeadRange& heads, int splits, float* partials, cudaStream_t stream);

}  // namespace temper::bench
