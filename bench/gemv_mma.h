// A candidate decode GEMV on the tensor cores, for 1-8 activation rows: the weights are the MMA's A
// operand (16 output rows a tile), the activation rows, rounded to bf16, its 8 B columns. It is
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

// The weight rows one warp computes in one launch of the kernel, by tiles of 16: 1, 2 or 4 tiles.
constexpr int kMmaTileChoices[] = {1, 2, 4};

// y[r·out + o] = Σ_i bf16(x[r·in + i]) · w[o·in + i] for r < rows, o < out, summed in fp32 (the
// products are exact). Each row's sums are the same whatever `rows` is. `tiles` is one of
// kMmaTileChoices. InvalidArgument, naming the value, for rows outside 1-8, `in` not a multiple of
// 32, x or w not 16-byte aligned, a non-positive `out`, or another `tiles`.
Status LaunchGemvMma(const float* x, const uint16_t* w, float* y, int rows, int in, int out, int tiles,
                     cudaStream_t stream);

}  // namespace temper::bench
