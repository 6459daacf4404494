// Attention over the KV cache and this pass's fresh keys on the tensor cores, split-KV ("flash
// decoding") with the query heads of a group together, for decode and prefill rows alike. One
// block takes one KV head of one row, over one split of the row's visible keys, for up to 8 query
// heads that share that KV head (larger groups take several blocks), so each key and value is read
// once for the heads of a block; the kernel is attention_kernel.h's.
//
// Why the tensor cores: a SIMT kernel (a warp's lanes splitting the head dims, 4-8 whole keys a
// warp at once) was bound by instructions and latency, not bytes: 134-137 us for a tp 1 full
// layer at 8,192 keys on an H200, 33.5 MB at 250 GB/s, about 1,900 instructions a warp per round
// of keys and 241-255 registers a thread (bench/history/issue-25-cuda-decode-kernels.md). Here the
// score dots and the value sums are MMAs: about 3,600 warp-instructions per 16 keys of a KV head
// against its 15,200 (counted by hand). On an H200 (2026-11-29,
// bench/history/issue-49-whole-profile-in-minutes.md) decode attention of a tp 1 step took 1.36 ms
// at 8 K context (7.4% of the step) against the SIMT kernel's 2.26 ms, 1.08 against 1.28 ms at 1 K,
// and for 8 rows 4.07 against 6.38 ms at 1 K and 6.34 against 13.97 ms at 8 K.
//
// Layout. A block is kWarps<HD> warps (4 from head_dim 256, HD / 64 below, 1 at 32) over one KV
// head, up to kHeads query heads of its group, one split of one row's keys, in tiles of 16 keys
// that every warp takes together. The warps split the head dims, in pieces of 32 (16 at head_dim
// 32): warp w holds pieces w, w + kWarps, ... of the head's first half and their RoPE partners
// head_dim / 2 further on, so a k_eq_v layer's key pairs stay in one lane. Per tile (the dims
// below are a 32-dim piece's; a 16-dim piece has half as many in each place):
//   1. Scores, S = Q · Kᵀ over the warp's dims: m16n8k16 MMAs with the query heads as A's rows
//      (rows 8-15 zero) and 8 keys as B's columns, two MMAs (n-tiles) for the tile's 16 keys.
//      The k order inside a piece is permuted so that lane 4g + c's A and B pieces are dims
//      8c .. 8c + 7 of the piece (two k-steps): one 16-byte load of key row g (and g + 8). On
//      k_eq_v layers the key is rebuilt there, K = RoPE(V ⊙ k_norm), and rounded to bf16.
//   2. The warps' partial scores meet in shared memory (double-buffered: one barrier a tile), and
//      every warp adds them in warp order, so all hold the same scores. Lane 4g + c then holds
//      head g's scores of keys 2c, 2c + 1, 2c + 8 and 2c + 9: exactly the B operand (Pᵀ, keys as k,
//      heads as columns) of the value MMA, so the online softmax's weights go to the tensor cores
//      without a shuffle.
//   3. Values, Oᵀ += Vᵀ · Pᵀ over the warp's dims: Vᵀ is A (dims as rows, the tile's keys as k).
//      Lane 4g + c reads 4 dims (8 bytes) of each of its 4 keys' value rows and pairs halves of two
//      keys into each A register; C's rows g and g + 8 are dims 4g + mt and 4g + 2 + mt of the
//      piece (m-tile mt), its columns the heads 2c and 2c + 1.
// The partials are num, max and sum per query head and split, which the merge kernel below
// combines; the split count is AttentionSplits' (which counts blocks of 8 query heads, as these are).
//
// Numerics (ReferenceOps::Attention, the CPU twin, rounds the same way): the queries, the keys
// (rebuilt in fp32 on k_eq_v layers, then rounded) and the softmax weights are bf16 operands;
// products are exact and summed in fp32. Each head's sum of weights is the sum of the rounded
// weights, so an output is a true weighted mean of the values. Outputs stay independent of the
// other rows of a pass and of its row count.
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
using attention::AttentionKernel;

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

template <int HD>
void LaunchHeadDim(const KvLayerView& kv, const float* q, const float* k, const float* v, float* out, int rows,
                   const RowTables& t, const HeadRange& heads, int splits, float* partials, cudaStream_t stream) {
  const attention::GroupGrid grid = attention::GroupGridOf(kv, heads, splits, rows, attention::kHeads);
  constexpr int kThreads = attention::kWarps<HD> * 32;
  if (kv.k) {
    AttentionKernel<HD, false>
        <<<grid.blocks, kThreads, 0, stream>>>(kv, q, k, v, t, heads, splits, grid.head_chunks, partials, out);
  } else {
    AttentionKernel<HD, true>
        <<<grid.blocks, kThreads, 0, stream>>>(kv, q, k, v, t, heads, splits, grid.head_chunks, partials, out);
  }
}

}  // namespace

int AttentionSplits(int sm_count, int kv_heads, int group, int max_splits) {
  // Counted with the kernel's query heads a block.
  constexpr int kSplitHeads = attention::kHeads;
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
    LaunchHeadDim<decltype(hd)::value>(kv, q, k, v, out, rows, t, heads, splits, partials, stream);
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
    constexpr int HD = decltype(hd)::value;
    // Both kernels LaunchHeadDim may pick for this head_dim.
    for (Status loaded : {LoadKernelCode(AttentionKernel<HD, false>, "AttentionKernel", awaiting),
                          LoadKernelCode(AttentionKernel<HD, true>, "AttentionKernel", awaiting)}) {
      if (status.ok()) status = loaded;
    }
  };
  for (int hd : {32, 64, 128, 256, 512}) TEMPER_RETURN_IF_ERROR(ForAttentionHeadDim("attention", hd, load));
  TEMPER_RETURN_IF_ERROR(status);
  TEMPER_RETURN_IF_ERROR(LoadKernelCode(MergeKernel, "MergeKernel", awaiting));
  return Status::OK();
}

}  // namespace temper::engine::cuda
