// A candidate decode GEMV on the tensor cores, for 1-8 activation rows: the weights are one MMA
// operand (16 or 8 output rows a tile), the activation rows, rounded to bf16, the other. It is
// here, beside the SIMT kernel's variants (gemv_variants.h), until a GPU shows whether it beats
// engine/cuda/gemv_bf16.cu; gemv_mma.cu says why it might and what it changes in the numerics.
//
// Built with nvcc for temper-kernel-bench and temper_cuda_tests, and as C++ for the SIMT emulator
// (temper_cuda_emulated_tests). Thread safety: enqueues on `stream` only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/status.h"

namespace temper::bench {

// Where the weights go in the MMA and how many tiles of weight rows a block takes: as B, tiles of
// 8 rows (1 or 2 a block); as A, tiles of 16 (1, 2 or 4). Staged (staged_run_bytes 256 or 512):
// the engine's tensor-core GEMV (engine/cuda/gemv_tensor_cores.cu), whose warps read each weight
// row in runs of that many bytes, as the SIMT kernel reads it, through shared memory.
struct MmaLayout {
  bool weights_as_b;
  int tiles;
  int staged_run_bytes = 0;
  int BlockRows() const { return tiles * (weights_as_b ? 8 : 16); }
};
constexpr MmaLayout kMmaLayouts[] = {{true, 1},  {true, 2},       {false, 1},     {false, 2},
                                     {false, 4}, {false, 1, 256}, {false, 1, 512}};

// y[r·out + o] = Σ_i bf16(x[r·in + i]) · w[o·in + i] for r < rows, o < out, summed in fp32 (the
// products are exact). Each row's sums are the same whatever `rows` is. `layout` is one of
// kMmaLayouts. InvalidArgument, naming the value, for rows outside 1-8, `in` not a multiple of
// 32, x or w not 16-byte aligned, a non-positive `out`, or another layout.
Status LaunchGemvMma(const float* x, const uint16_t* w, float* y, int rows, int in, int out, MmaLayout layout,
                     cudaStream_t stream);

}  // namespace temper::bench
