// Attention over the KV cache and this pass's fresh keys, split-KV ("flash decoding") with the
// query heads of a group together. One block takes one KV head of one row, over one split of the
// row's visible keys, for the query heads that share that KV head (up to kMaxHeads; larger groups
// take several blocks), so each key and value is read once for the heads of a block.
//
// Each of the block's kWarps warps takes kKeysAtOnce consecutive keys at a time, and its lanes split
// the head dims: lane l holds dims [P·l, P·l + P) of each half of the head, so a k_eq_v layer's RoPE
// pairs (dim j with j + head_dim/2) stay in one lane. All of a round's K and V pieces (and RoPE
// angles) are loaded before the first is used: one trip to memory for up to 8 keys. The scores are
// the lanes' partial dots summed over the warp, the online softmax runs per warp, and the values
// come from the pieces already in registers; on k_eq_v layers V is the very piece the key was
// rebuilt from (K = RoPE(V ⊙ k_norm)), so each row is read once. The block's warps then meet in
// shared memory. A kernel that gave each thread one key's whole row took 16-24 dependent rounds
// of loads per 32-key split and ran 1.6-2.9x slower on an H200 (bench/history/issue-25-cuda-decode-kernels.md,
// 2026-11-27).
//
// Decode rows use several splits, merged by a second kernel; how many runs on the GPU is the
// row's key count's business (UsedSplits: a split needs kMinKeysPerSplit keys; the blocks of
// unused splits leave at once), so one captured graph serves short and long contexts. Prefill rows
// use one split and write directly.
//
// Fresh keys (this pass's, not yet in the cache) are rounded to bf16 first, so a key reads the
// same whether it comes from the cache or not. The addressing and merge math is kernel_math.h's,
// which the CPU tests check; ReferenceOps::Attention is the CPU twin.
#include <cuda_runtime.h>

#include <algorithm>

#include "engine/cuda/attention_kernel.h"
#include "engine/cuda/attention_launch.h"
#include "engine/cuda/cuda_status.h"
#include "engine/cuda/grid_dependency.h"
#include "engine/cuda/kernel_loading.h"
#include "engine/cuda/kernel_math.h"
#include "engine/cuda/kernels.h"

namespace temper::engine::cuda {
namespace {

using detail::S;
using attention::GroupAttentionKernel;
using attention::kKeysAtOnce;
using attention::kMaxHeads;

__global__ void KvWriteKernel(KvLayerView kv, const float* k, const float* v, RowTables t) {
  AwaitPriorGrid();
  const int r = blockIdx.x;
  const int64_t pos = t.positions[r];
  if (math::KvWriteSkips(pos, kv.sliding, kv.ring, t.chunk_end[r])) return;
  const int width = kv.kv_heads * kv.head_dim;
  const int slot = t.slots[r];
  const int64_t row =
      math::KvRow(pos, kv.sliding, kv.ring, slot, t.blocks + int64_t{slot} * t.max_blocks, kv.block_tokens);
  for (int i = threadIdx.x; i < width; i += blockDim.x) {
    kv.v[row * width + i] = math::FloatToBf16(v[int64_t{r} * width + i]);
    if (kv.k) kv.k[row * width + i] = math::FloatToBf16(k[int64_t{r} * width + i]);
  }
}

constexpr int kMergeChunk = 64;      // splits whose weights a merge block stages at a time
constexpr int kMergeBlockDims = 64;  // output dims a merge block takes
constexpr int kMergeGroups = 4;      // threads a dim: each sums every kMergeGroups-th split
constexpr int kMergeThreads = kMergeBlockDims * kMergeGroups;

__host__ __device__ inline int MergeDimBlocks(int hd) { return (hd + kMergeBlockDims - 1) / kMergeBlockDims; }

// One block per (row, query head, kMergeBlockDims of its dims) merges the row's used splits
// (UsedSplits of its key count; the rest are empty): the largest of the splits' maxima M first,
// then each split's weight exp(max_s − M) once, staged in shared memory, then per dim
// Σ_s weight_s · acc_s[d] over Σ_s weight_s · sum_s. Each dim's sum is split over kMergeGroups
// threads (splits g, g + 4, ...), whose sums are added in group order, so each thread has few
// dependent loads and the block's are all independent. Why: one block per head with every split in
// one thread's loop took 10.3 us at 8 K keys on an H200 (32 blocks of 64 splits each, about 8
// trips to memory one after another), a tenth of the full layer's attention; a merge that folded
// the splits one after another took 33 us of a sliding layer's 42 (bench/history/issue-25-cuda-decode-kernels.md).
__global__ void __launch_bounds__(kMergeThreads)
    MergeKernel(const float* partials, float* out, int q_heads, int hd, int splits, const int64_t* positions,
                int window, bool sliding) {
  AwaitPriorGrid();
  __shared__ float weight_s[kMergeChunk], sum_s[kMergeChunk], reduce_s[kMergeThreads / 32];
  __shared__ float group_s[kMergeGroups][kMergeBlockDims];
  const int dim_blocks = MergeDimBlocks(hd);
  const int h = blockIdx.x / dim_blocks, r = blockIdx.y, tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int group = tid / kMergeBlockDims, column = tid % kMergeBlockDims;
  const int d = (blockIdx.x % dim_blocks) * kMergeBlockDims + column;
  const int64_t stride = hd + 2;
  const float* part = partials + (int64_t{r} * q_heads + h) * splits * stride;
  int used = 0;  // padding rows: none, and a zero output
  const int64_t pos = positions[r];
  if (pos >= 0) used = math::UsedSplits(pos - math::WindowStart(pos, window, sliding) + 1, splits);

  float m = -INFINITY;  // an empty split's max is -inf
  for (int s = tid; s < used; s += kMergeThreads) m = fmaxf(m, part[s * stride + hd]);
#pragma unroll
  for (int o = 16; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (lane == 0) reduce_s[warp] = m;
  __syncthreads();
  m = -INFINITY;
  for (int i = 0; i < kMergeThreads / 32; ++i) m = fmaxf(m, reduce_s[i]);

  float acc = 0, denominator = 0;
  for (int first = 0; first < used; first += kMergeChunk) {
    const int n = min(kMergeChunk, used - first);
    __syncthreads();  // the previous chunk's weights are read by every thread
    if (tid < n) {
      const float* ps = part + (first + tid) * stride;
      const math::SoftmaxState state{ps[hd], ps[hd + 1]};
      weight_s[tid] = math::SplitWeight(state, m);
      sum_s[tid] = state.sum;
    }
    __syncthreads();
    for (int i = 0; i < n; ++i) denominator += weight_s[i] * sum_s[i];
    if (d < hd) {
#pragma unroll 8
      for (int i = group; i < n; i += kMergeGroups) acc += weight_s[i] * part[(first + i) * stride + d];
    }
  }
  group_s[group][column] = acc;
  __syncthreads();
  if (group != 0 || d >= hd) return;
  float total = group_s[0][column];
#pragma unroll
  for (int g = 1; g < kMergeGroups; ++g) total += group_s[g][column];
  out[(int64_t{r} * q_heads + h) * hd + d] = denominator > 0 ? total / denominator : 0.0f;
}

template <int HD, int GM, int KW>
void LaunchGroup(const KvLayerView& kv, const float* q, const float* k, const float* v, float* out, int rows,
                 const RowTables& t, const HeadRange& heads, int splits, float* partials, cudaStream_t stream) {
  const attention::GroupGrid grid = attention::GroupGridOf(kv, heads, splits, rows, GM);
  if (kv.k) {
    GroupAttentionKernel<HD, GM, KW, false><<<grid.blocks, attention::kWarps * 32, 0, stream>>>(
        kv, q, k, v, t, heads, splits, grid.head_chunks, partials, out);
  } else {
    GroupAttentionKernel<HD, GM, KW, true><<<grid.blocks, attention::kWarps * 32, 0, stream>>>(
        kv, q, k, v, t, heads, splits, grid.head_chunks, partials, out);
  }
}

// The fewest query heads a block is compiled for that hold the group (or kMaxHeads of it).
template <int HD>
void LaunchHeads(const KvLayerView& kv, const float* q, const float* k, const float* v, float* out, int rows,
                 const RowTables& t, const HeadRange& heads, int splits, float* partials, cudaStream_t stream) {
  const int wanted = heads.group < kMaxHeads<HD> ? heads.group : kMaxHeads<HD>;
  if (wanted <= 2) {
    LaunchGroup<HD, 2, kKeysAtOnce<HD>>(kv, q, k, v, out, rows, t, heads, splits, partials, stream);
  } else if (wanted <= 4 || kMaxHeads<HD> == 4) {
    LaunchGroup<HD, 4, kKeysAtOnce<HD>>(kv, q, k, v, out, rows, t, heads, splits, partials, stream);
  } else {
    LaunchGroup<HD, kMaxHeads<HD>, kKeysAtOnce<HD>>(kv, q, k, v, out, rows, t, heads, splits, partials, stream);
  }
}

}  // namespace

int AttentionSplits(int sm_count, int kv_heads, int group, int max_splits) {
  // Counted with up to kSplitHeads query heads a block; at head_dim 512 a block takes half as
  // many (kMaxHeads), and the blocks double, which leaves each multiprocessor a few.
  constexpr int kSplitHeads = 8;
  const int blocks = kv_heads * ((group + kSplitHeads - 1) / kSplitHeads);
  const int wanted = (2 * sm_count + blocks - 1) / std::max(blocks, 1);
  return std::clamp(wanted, 1, std::max(max_splits, 1));
}

Status LaunchKvWrite(const KvLayerView& kv, const float* k, const float* v, int rows, const RowTables& t,
                     cudaStream_t stream) {
  if (rows < 1 || kv.kv_heads < 1 || kv.head_dim < 1 || !kv.v) {
    return Status::InvalidArgument("KV write: rows " + S(rows) + ", kv_heads " + S(kv.kv_heads) + ", head_dim " +
                                   S(kv.head_dim));
  }
  KvWriteKernel<<<rows, 256, 0, stream>>>(kv, k, v, t);
  TEMPER_CUDA_TRY(cudaGetLastError());
  return Status::OK();
}

Status LaunchAttention(const KvLayerView& kv, const float* q, const float* k, const float* v, float* out, int rows,
                       const RowTables& t, const HeadRange& heads, int splits, float* partials, cudaStream_t stream) {
  TEMPER_RETURN_IF_ERROR(CheckAttentionArguments("attention", kv, rows, heads, splits, partials));
  TEMPER_RETURN_IF_ERROR(ForAttentionHeadDim("attention", kv.head_dim, [&](auto hd) {
    LaunchHeads<decltype(hd)::value>(kv, q, k, v, out, rows, t, heads, splits, partials, stream);
  }));
  TEMPER_CUDA_TRY(cudaGetLastError());
  if (splits == 1) return Status::OK();
  return LaunchAttentionMerge(partials, out, rows, heads.q_heads, kv.head_dim, splits, t.positions, kv.window,
                              kv.sliding, stream);
}

Status LaunchAttentionMerge(const float* partials, float* out, int rows, int q_heads, int head_dim, int splits,
                            const int64_t* positions, int window, bool sliding, cudaStream_t stream) {
  if (rows < 1 || q_heads < 1 || head_dim < 1 || splits < 2 || !partials) {
    return Status::InvalidArgument("attention merge: rows " + S(rows) + ", q_heads " + S(q_heads) + ", head_dim " +
                                   S(head_dim) + ", splits " + S(splits) + " (at least 2, with partials)");
  }
  MergeKernel<<<dim3(q_heads * MergeDimBlocks(head_dim), rows), kMergeThreads, 0, stream>>>(
      partials, out, q_heads, head_dim, splits, positions, window, sliding);
  TEMPER_CUDA_TRY(cudaGetLastError());
  return Status::OK();
}

Status LoadAttentionKernels(AwaitingKernels* awaiting) {
  TEMPER_RETURN_IF_ERROR(LoadKernelCode(KvWriteKernel, "KvWriteKernel", awaiting));
  Status status;
  auto load = [&](auto hd) {
    constexpr int HD = decltype(hd)::value, KW = kKeysAtOnce<HD>;
    // Every kernel LaunchHeads may pick for this head_dim.
    for (Status loaded :
         {LoadKernelCode(GroupAttentionKernel<HD, 2, KW, false>, "GroupAttentionKernel", awaiting),
          LoadKernelCode(GroupAttentionKernel<HD, 2, KW, true>, "GroupAttentionKernel", awaiting),
          LoadKernelCode(GroupAttentionKernel<HD, 4, KW, false>, "GroupAttentionKernel", awaiting),
          LoadKernelCode(GroupAttentionKernel<HD, 4, KW, true>, "GroupAttentionKernel", awaiting),
          LoadKernelCode(GroupAttentionKernel<HD, kMaxHeads<HD>, KW, false>, "GroupAttentionKernel", awaiting),
          LoadKernelCode(GroupAttentionKernel<HD, kMaxHeads<HD>, KW, true>, "GroupAttentionKernel", awaiting)}) {
      if (status.ok()) status = loaded;
    }
  };
  for (int hd : {32, 64, 128, 256, 512}) TEMPER_RETURN_IF_ERROR(ForAttentionHeadDim("attention", hd, load));
  TEMPER_RETURN_IF_ERROR(status);
  TEMPER_RETURN_IF_ERROR(LoadKernelCode(MergeKernel, "MergeKernel", awaiting));
  return Status::OK();
}

}  // namespace temper::engine::cuda
