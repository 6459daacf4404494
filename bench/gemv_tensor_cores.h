// A kernel candidate: the decode GEMV on the tensor cores, the products of the engine's
// LaunchGemvBf16 and LaunchGemvGeglu (engine/cuda/gemv_bf16.cu) for 1-8 activation rows with the
// activations rounded to bf16. It lives here, outside the engine, until a GPU run decides it:
// temper-kernel-bench checks it against the engine's SIMT kernel and times it beside it
// (decode_step_kernels.h, gemv_variants.h); bench/RESULTS.md states the rule by which that run
// adopts it into engine/cuda or deletes it. gemv_tensor_cores.cu says why it might win.
//
// Built with nvcc for temper-kernel-bench and temper_cuda_tests, and as C++ for the SIMT emulator
// (temper_cuda_emulated_tests). Thread safety: enqueues on `stream` only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/status.h"
#include "engine/cuda/rank_ops.h"

namespace temper::bench {

// The runs (bytes of each weight row a warp reads at once) the kernel is built for.
constexpr int kTensorCoreRuns[] = {256, 512};

// engine::cuda::LaunchGemvBf16's outputs on the tensor cores; each row's sums are the same whatever
// `rows` is. InvalidArgument, naming the value, for rows outside 1-8, `in` not a positive multiple
// of 32, x or weights not 16-byte aligned, a part with a width and no weights, no outputs, or a
// run not in kTensorCoreRuns.
Status LaunchGemvTensorCores(const float* x, const engine::cuda::GemvParts& parts, int rows, int in, int run_bytes,
                             cudaStream_t stream);
// engine::cuda::LaunchGemvGeglu's outputs on the tensor cores, refused as above and for a missing
// gate, up or y.
Status LaunchGemvGegluTensorCores(const float* x, const uint16_t* gate, const uint16_t* up, float* y, int rows, int in,
                                  int out, int run_bytes, cudaStream_t stream);

}  // namespace temper::bench
