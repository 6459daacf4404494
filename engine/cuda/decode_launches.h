// How many kernels one decode step launches on each rank: the figure that decides what a step
// costs beyond its bytes (each dependent node of a CUDA graph costs 1-2 us however small it is).
//
// The op sequence of a step depends on the model's layer structure (the number of layers, their
// kinds, k_eq_v, the final softcap) and on tp, never on the widths. So the count runs the device
// backend's real host logic (rank_forward.cpp) over CountingOps on ReferenceOps, for the model at
// tiny widths: the 31B model's count in a second, on any machine, and exactly what its captured
// graph holds on a GPU (each op is one kernel, but the attention and candidates ops: counting_ops.h).
//
// Thread safety: pure function (its ranks run on threads of its own).
#pragma once

#include <filesystem>
#include <vector>

#include "common/status.h"
#include "engine/cuda/counting_ops.h"

namespace temper::engine::cuda {

// The ops of one graph decode step of one sequence on each of `tp` ranks (rank order), sampling
// candidates as the scheduler's decode steps do, for the model of `config_json` (a Hugging Face
// config.json) with its widths cut down. Errors: the file's, or the backend's when the structure
// cannot run.
Result<std::vector<OpCounts>> CountDecodeStepOps(const std::filesystem::path& config_json, int tp);

}  // namespace temper::engine::cuda
