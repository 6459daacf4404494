// Launchers of the CUDA backend's kernels, one .cu file per op. Each computes exactly what the
// RankOps method of the same name specifies (rank_ops.h), on `stream`; ReferenceOps computes the
// same on the CPU, and tests/engine/cuda/cuda_kernels_test.cpp holds every launcher to its reference.
// Launchers never synchronize; they return InvalidArgument for a shape they do not handle, or the
// launch error (TEMPER_CUDA_TRY).
//
// Thread safety: launches on distinct streams may run concurrently.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/status.h"
#include "engine/cuda/rank_ops.h"

namespace temper::engine::cuda {

class AwaitingKernels;  // kernel_loading.h

// Each file's kernels (every instantiation a launcher can pick), loaded on the current device now
// (kernel_loading.h says why) and listed in `awaiting`: all of them begin with AwaitPriorGrid.
// CudaOps::Create calls LoadAllKernels.
Status LoadAttentionKernels(AwaitingKernels* awaiting);
Status LoadElementwiseKernels(AwaitingKernels* awaiting);
Status LoadEmbedKernels(AwaitingKernels* awaiting);
Status LoadGegluKernels(AwaitingKernels* awaiting);
Status LoadGemvKernels(AwaitingKernels* awaiting);
Status LoadNormKernels(AwaitingKernels* awaiting);
Status LoadSyntheticKernels(AwaitingKernels* awaiting);
Status LoadTopCandidatesKernels(AwaitingKernels* awaiting);
inline Status LoadAllKernels(AwaitingKernels* awaiting) {
  for (Status (*load)(AwaitingKernels*) :
       {LoadAttentionKernels, LoadElementwiseKernels, LoadEmbedKernels, LoadGegluKernels, LoadGemvKernels,
        LoadNormKernels, LoadSyntheticKernels, LoadTopCandidatesKernels}) {
    TEMPER_RETURN_IF_ERROR(load(awaiting));
  }
  return Status::OK();
}

// synthetic.cu
Status LaunchFillSynthetic(uint16_t* dst, int64_t n, uint64_t seed, float mean, float halfwidth, cudaStream_t stream);

// embed.cu
Status LaunchEmbed(const int32_t* tokens, int rows, const uint16_t* table, int vocab_begin, int vocab_end, int hidden,
                   float scale, float* x, cudaStream_t stream);

// rmsnorm.cu
Status LaunchRmsNorm(const float* x, float* out, const uint16_t* w, int rows, int n, float eps, float weight_offset,
                     cudaStream_t stream);
Status LaunchQkvNorm(const KvLayerView& kv, float* q, float* k, float* v, const uint16_t* q_norm, int rows, int q_heads,
                     float eps, const RowTables& t, bool write_kv, cudaStream_t stream);
Status LaunchNormResidual(float* x, const float* branch, const uint16_t* w, int rows, int n, float eps, float scale,
                          const uint16_t* next_w, float* next_out, float weight_offset, cudaStream_t stream);

// geglu.cu
Status LaunchGeglu(float* gate, const float* up, int64_t n, cudaStream_t stream);

// gemv_bf16.cu
Status LaunchGemvBf16(const float* x, const GemvParts& parts, int rows, int in, cudaStream_t stream);
Status LaunchGemvGeglu(const float* x, const uint16_t* gate, const uint16_t* up, float* y, int rows, int in, int out,
                       cudaStream_t stream);

// elementwise.cu
Status LaunchToBf16(const float* x, uint16_t* y, int64_t n, cudaStream_t stream);
Status LaunchGatherRows(const float* x, int64_t width, const int32_t* index, int n, float* out, cudaStream_t stream);
Status LaunchSoftcap(float* y, int64_t ld, int rows, int n, float cap, cudaStream_t stream);

// attention.cu
// Splits of a decode attention call: enough blocks for two per multiprocessor for one row (one
// block per KV head and per chunk of eight query heads), at most max_splits (so 1 for a pass of
// one split, as prefill's). The kernel then uses only as many as the row's keys fill
// (math::UsedSplits). Counted for one row whatever the pass's rows, so that a row's keys are cut,
// and its attention summed, the same way alone, beside other sequences' rows, or among its own
// drafts: a verification pass's rows then equal decode steps' bit for bit.
int AttentionSplits(int sm_count, int kv_heads, int group, int max_splits);
Status LaunchKvWrite(const KvLayerView& kv, const float* k, const float* v, int rows, const RowTables& t,
                     cudaStream_t stream);
Status LaunchAttention(const KvLayerView& kv, const float* q, const float* k, const float* v, float* out, int rows,
                       const RowTables& t, const HeadRange& heads, int splits, float* partials, cudaStream_t stream);
// The second half of a call with splits > 1: out[row][head] from each split's partial state
// (partials[row][head][split] = Σ weight · V over its keys, then its softmax max and sum).
// LaunchAttention runs it; bench/decode_step_kernels.cpp times it alone.
Status LaunchAttentionMerge(const float* partials, float* out, int rows, int q_heads, int head_dim, int splits,
                            const int64_t* positions, int window, bool sliding, cudaStream_t stream);

// top_candidates.cu
Status LaunchTopCandidates(const float* logits, int64_t ld, int rows, int n, int k, int index_offset,
                           const float* temperatures, float* out_vals, int32_t* out_ids, float* out_max,
                           float* out_mass, void* scratch, cudaStream_t stream);

}  // namespace temper::engine::cuda
