// bf16 GEMV for decode (1-8 activation rows): reading the weights once is what bounds a decode
// step, so the kernel is built to keep enough bytes in flight to saturate memory.
//
// Each warp computes M weight rows (outputs). Each lane reads 16 bytes (8 weights) of every one of
// its M rows per step, and issues kLoadsInFlight such loads before it uses the first, so a warp has
// kLoadsInFlight · 512 bytes in flight. Bytes needed in flight are bandwidth × latency: an H100
// (3.35 TB/s, ~0.7 µs) wants ~2.3 MB, 18 KB per SM; an L4 (300 GB/s, ~0.6 µs) ~180 KB, 3 KB per
// SM. At 8 warps per block and several blocks per SM, 4 loads per lane give 16 KB per 8 warps,
// enough on both as long as the grid has a few thousand rows.
//
// Activations: every warp re-reads the fp32 activation rows (from L1), 2 · R 16-byte loads per
// step. With one weight row per warp that is 16 activation loads per 16 weight bytes at batch 8,
// which bound the batch-8 GEMV at 14-23% of the copy bandwidth on the H200
// (bench/history/issue-21-gpu-bundle-and-h200-first-run.md). So a warp takes M = 4 weight rows from 2 activation rows
// up and reuses each activation load for all of them: 4 activation loads per 16 weight bytes at batch 8; M = 2 at
// batch 1. An H100 (2026-11-26, bench/history/issue-25-cuda-decode-kernels.md) timed every M: 4 is fastest from 2 rows
// up (M = 8 spills and falls to 38-49%), and at 1 row M = 1 and 2 were within 1%; on an H200 (2026-11-27) M = 2 read 5%
// faster than M = 1 at 1 row (103% and 98% of the copy bandwidth on the 31B's gate projection). Each output's sum is
// formed in the same order whatever M is.
//
// Weights are loaded with the streaming hint (evict first), so the activations stay in L1; the
// R · M accumulators live in registers.
//
// Two kernels share that loop (gemv_kernel.h): the GEMV over up to three parts (q, k and v in
// one launch), and the MLP's gate and up products with the GeGLU applied in the epilogue (a warp's
// M rows are P gate rows and the same P up rows). bench/gemv_variants.cu times every M.
#include <cuda_runtime.h>

#include "engine/cuda/cuda_status.h"
#include "engine/cuda/gemv_kernel.h"
#include "engine/cuda/kernel_loading.h"
#include "engine/cuda/kernel_math.h"
#include "engine/cuda/kernels.h"

namespace temper::engine::cuda {
namespace {

using detail::S;

using gemv::Blocks;
using gemv::ForRows;
using gemv::GegluOutputsPerWarp;
using gemv::GemvGegluKernel;
using gemv::GemvKernel;
using gemv::kWarpsPerBlock;
using gemv::RowsPerWarp;

// 128-bit loads need 16-byte aligned weight and activation rows.
bool Vectorizable(const float* x, int in) { return in % 8 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0; }
bool Aligned16(const uint16_t* w) { return reinterpret_cast<uintptr_t>(w) % 16 == 0; }

}  // namespace

Status LaunchGemvBf16(const float* x, const GemvParts& parts, int rows, int in, cudaStream_t stream) {
  const int outputs = parts.outputs();
  bool parts_ok = true, vec = Vectorizable(x, in);
  for (int p = 0; p < GemvParts::kMax; ++p) {
    if (parts.width[p] < 0 || (parts.width[p] > 0 && (!parts.w[p] || !parts.y[p]))) parts_ok = false;
    if (parts.width[p] > 0) vec = vec && Aligned16(parts.w[p]);
  }
  if (rows < 1 || rows > 8 || in < 1 || outputs < 1 || !parts_ok) {
    return Status::InvalidArgument("GEMV: " + S(rows) + " rows (1-8), in " + S(in) + ", " + S(outputs) +
                                   " outputs (each part with weights and output) are not a valid shape");
  }
  ForRows(rows, [&](auto r) {
    constexpr int R = decltype(r)::value, M = RowsPerWarp(R);
    GemvKernel<R, M><<<Blocks(outputs, M), kWarpsPerBlock * 32, 0, stream>>>(x, parts, in, outputs, vec);
  });
  TEMPER_CUDA_TRY(cudaGetLastError());
  return Status::OK();
}

Status LaunchGemvGeglu(const float* x, const uint16_t* gate, const uint16_t* up, float* y, int rows, int in, int out,
                       cudaStream_t stream) {
  if (rows < 1 || rows > 8 || in < 1 || out < 1) {
    return Status::InvalidArgument("GEMV GeGLU: " + S(rows) + " rows (1-8), in " + S(in) + ", out " + S(out) +
                                   " are not a valid shape");
  }
  const bool vec = Vectorizable(x, in) && Aligned16(gate) && Aligned16(up);
  ForRows(rows, [&](auto r) {
    constexpr int R = decltype(r)::value, P = GegluOutputsPerWarp(R);
    GemvGegluKernel<R, P><<<Blocks(out, P), kWarpsPerBlock * 32, 0, stream>>>(x, gate, up, y, in, out, vec);
  });
  TEMPER_CUDA_TRY(cudaGetLastError());
  return Status::OK();
}

Status LoadGemvKernels(AwaitingKernels* awaiting) {
  for (int rows = 1; rows <= 8; ++rows) {
    TEMPER_RETURN_IF_ERROR(ForRows(rows, [awaiting](auto r) -> Status {
      constexpr int R = decltype(r)::value;
      const Status gemv = LoadKernelCode(GemvKernel<R, RowsPerWarp(R)>, "GemvKernel", awaiting);
      return gemv.ok() ? LoadKernelCode(GemvGegluKernel<R, GegluOutputsPerWarp(R)>, "GemvGegluKernel", awaiting) : gemv;
    }));
  }
  return Status::OK();
}

}  // namespace temper::engine::cuda
