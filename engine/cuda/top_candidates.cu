// Sampling candidates of logit rows on the device (RankOps::TopCandidates): the k largest of each
// row, descending with ties to the lower index, and the row's max and softmax mass at its
// temperature. Only these leave the device; the host merges the ranks (logit_candidates.h).
//
// Top-k by rounds of chunk sorts: each block bitonic-sorts a chunk of kTopCandidatesChunk (value,
// index) pairs in shared memory and keeps the first k; the survivors of a row, chunks · k of them,
// are sorted again the same way until one chunk remains (262,144 entries, k 64: 128 chunks, then
// 4, then 1). Entries past the row's end are padded with (-inf, INT_MAX), which sort last.
#include <cuda_runtime.h>

#include <climits>

#include "engine/cuda/cuda_status.h"
#include "engine/cuda/grid_dependency.h"
#include "engine/cuda/kernel_loading.h"
#include "engine/cuda/kernels.h"
#include "engine/cuda/top_candidates_plan.h"

namespace temper::engine::cuda {
namespace {

using detail::S;

constexpr int kChunk = kTopCandidatesChunk;
constexpr int kSortThreads = kChunk / 2;
constexpr int kMassThreads = 1024;

// Whether (va, ia) comes before (vb, ib): larger values first, then lower indices.
__device__ __forceinline__ bool Before(float va, int32_t ia, float vb, int32_t ib) {
  return va > vb || (va == vb && ia < ib);
}

// Sorts chunk blockIdx.x of row blockIdx.y of the input and writes its first k to the output at
// [row][chunk · k]. ids_in null: an entry's index is its position in the row plus index_offset.
__global__ void ChunkTopKernel(const float* vals_in, const int32_t* ids_in, int64_t in_ld, int n, int k,
                               int index_offset, float* vals_out, int32_t* ids_out, int64_t out_ld) {
  AwaitPriorGrid();
  __shared__ float v[kChunk];
  __shared__ int32_t id[kChunk];
  const int row = blockIdx.y;
  const int base = blockIdx.x * kChunk;
  for (int i = threadIdx.x; i < kChunk; i += blockDim.x) {
    const int at = base + i;
    if (at < n) {
      v[i] = vals_in[row * in_ld + at];
      id[i] = ids_in ? ids_in[row * in_ld + at] : at + index_offset;
    } else {
      v[i] = -INFINITY;
      id[i] = INT_MAX;
    }
  }
  __syncthreads();
  // Bitonic sort, descending by Before().
  for (int size = 2; size <= kChunk; size *= 2) {
    for (int stride = size / 2; stride > 0; stride /= 2) {
      for (int t = threadIdx.x; t < kChunk / 2; t += blockDim.x) {
        const int i = 2 * t - (t & (stride - 1));
        const int j = i + stride;
        const bool descending = (i & size) == 0;
        const bool swap = descending ? Before(v[j], id[j], v[i], id[i]) : Before(v[i], id[i], v[j], id[j]);
        if (swap) {
          const float tv = v[i];
          v[i] = v[j];
          v[j] = tv;
          const int32_t ti = id[i];
          id[i] = id[j];
          id[j] = ti;
        }
      }
      __syncthreads();
    }
  }
  for (int i = threadIdx.x; i < k; i += blockDim.x) {
    vals_out[row * out_ld + int64_t{blockIdx.x} * k + i] = v[i];
    ids_out[row * out_ld + int64_t{blockIdx.x} * k + i] = id[i];
  }
}

__device__ float BlockReduce(float x, bool max, float* shared) {
  for (int off = 16; off > 0; off /= 2) {
    const float y = __shfl_xor_sync(0xffffffffu, x, off);
    x = max ? fmaxf(x, y) : x + y;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) shared[warp] = x;
  __syncthreads();
  x = shared[0];
  for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w) x = max ? fmaxf(x, shared[w]) : x + shared[w];
  return x;
}

// One block per row: its max, then Σ exp((l − max) / T).
__global__ void MassKernel(const float* logits, int64_t ld, int n, const float* temperatures, float* out_max,
                           float* out_mass) {
  AwaitPriorGrid();
  __shared__ float shared[kMassThreads / 32];
  const float* row = logits + blockIdx.x * ld;
  float m = -INFINITY;
  for (int i = threadIdx.x; i < n; i += blockDim.x) m = fmaxf(m, row[i]);
  m = BlockReduce(m, /*max=*/true, shared);
  const float t = temperatures[blockIdx.x] > 0 ? temperatures[blockIdx.x] : 1.0f;
  // An entry equal to the max weighs exactly 1 (expf(0) for a finite max), written out so that a
  // shard of -inf (or a +inf max) gives its count of such entries, not NaN.
  float s = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) s += row[i] == m ? 1.0f : expf((row[i] - m) / t);
  s = BlockReduce(s, /*max=*/false, shared);
  if (threadIdx.x == 0) {
    out_max[blockIdx.x] = m;
    out_mass[blockIdx.x] = s;
  }
}

}  // namespace

Status LaunchTopCandidates(const float* logits, int64_t ld, int rows, int n, int k, int index_offset,
                           const float* temperatures, float* out_vals, int32_t* out_ids, float* out_max,
                           float* out_mass, void* scratch, cudaStream_t stream) {
  if (rows < 1 || n < 1 || k < 1 || k > n || k > 256 || ld < n) {
    return Status::InvalidArgument("top candidates: rows " + S(rows) + ", n " + S(n) + ", k " + S(k) + ", ld " + S(ld) +
                                   " (1 <= k <= min(n, 256))");
  }
  // Ping-pong survivor buffers in the scratch (TopCandidatesScratchBytes).
  const int64_t first_chunks = (n + kChunk - 1) / kChunk;
  const int64_t half = int64_t{rows} * first_chunks * k;
  float* vals[2] = {static_cast<float*>(scratch), static_cast<float*>(scratch) + half};
  int32_t* ids[2] = {reinterpret_cast<int32_t*>(vals[1] + half), reinterpret_cast<int32_t*>(vals[1] + half) + half};

  const float* in_vals = logits;
  const int32_t* in_ids = nullptr;
  int64_t in_ld = ld;
  int count = n;
  for (int round = 0;; ++round) {
    const int chunks = (count + kChunk - 1) / kChunk;
    const bool last = chunks == 1;
    float* to_vals = last ? out_vals : vals[round % 2];
    int32_t* to_ids = last ? out_ids : ids[round % 2];
    const int64_t out_ld = last ? k : int64_t{chunks} * k;
    ChunkTopKernel<<<dim3(chunks, rows), kSortThreads, 0, stream>>>(in_vals, in_ids, in_ld, count, k, index_offset,
                                                                    to_vals, to_ids, out_ld);
    TEMPER_CUDA_TRY(cudaGetLastError());
    if (last) break;
    in_vals = to_vals;
    in_ids = to_ids;
    in_ld = out_ld;
    count = chunks * k;
  }
  MassKernel<<<rows, kMassThreads, 0, stream>>>(logits, ld, n, temperatures, out_max, out_mass);
  TEMPER_CUDA_TRY(cudaGetLastError());
  return Status::OK();
}

Status LoadTopCandidatesKernels(AwaitingKernels* awaiting) {
  TEMPER_RETURN_IF_ERROR(LoadKernelCode(ChunkTopKernel, "ChunkTopKernel", awaiting));
  TEMPER_RETURN_IF_ERROR(LoadKernelCode(MassKernel, "MassKernel", awaiting));
  return Status::OK();
}

}  // namespace temper::engine::cuda
