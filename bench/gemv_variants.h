// The decode GEMV with every number of weight rows per warp (M = 1, 2, 4, 8) at 1, 2, 4 and 8
// activation rows, at the model's widest decode shapes, each checked against the CPU before it is
// timed: the data that decides engine/cuda/gemv_bf16.cu's RowsPerWarp on each GPU. Printed by
// temper-kernel-bench.
//
// Built only with nvcc. Thread safety: uses the current device; one call at a time.
#pragma once

#include <cuda_runtime_api.h>

#include "common/status.h"
#include "engine/model/model_config.h"

namespace temper::bench {

// A table of µs, GB/s and % of `copy_gbs` per shape, rows and M, the launchers' M marked. An M
// whose outputs differ from the CPU's is reported as such and not timed; the table goes on.
Status PrintGemvVariants(const engine::ModelConfig& config, double copy_gbs, cudaStream_t stream);

}  // namespace temper::bench
