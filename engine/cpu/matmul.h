// MatMulBf16: out = x · Wᵀ with fp32 activations and bf16 weights, the CPU backend's one hot loop.
//
// Decode is bound by memory bandwidth (every weight byte is read once per token), so the kernel
// streams each weight row once, widening bf16 to fp32 in registers, and dots it with up to four
// activation rows at a time so prefill reuses the row while it is in L1. Built for AVX-512, AVX2
// and baseline x86-64 at once (function multi-versioning); the loader picks the best at run time.
// Each output is one dot product in a fixed order that does not depend on the thread count, so
// results are bitwise reproducible.
#pragma once

#include <cstdint>

#include "engine/model/weights.h"
#include "engine/thread_pool.h"

namespace temper::engine::cpu {

// out[r * out_stride + o] = Σ_i x[r * x_stride + i] · w[o][i], for r < rows, o < w.rows,
// i < w.cols. Splits the output columns over `pool`.
void MatMulBf16(WorkerGroup& pool, const float* x, int64_t rows, int64_t x_stride, const Bf16Matrix& w, float* out,
                int64_t out_stride);

}  // namespace temper::engine::cpu
