// OpenBackend: the one way a loaded model gets a backend. The roles' `inprocess` endpoint,
// `temper-lm` and `temper-bench` all describe what they want in a BackendSpec (which devices, how
// many ranks and threads, how long a context, how much KV cache) and this picks the backend that
// runs it: the CPU backend (engine/cpu/cpu_backend.h) when no device is listed, else the CUDA
// backend (engine/cuda/cuda_backend.h), one rank per listed GPU. So no caller carries its own CPU
// vs CUDA branch, and every caller's errors name the model and the devices the same way.
//
// In a build without nvcc the CUDA backend still links and answers Unimplemented naming the GPUs
// asked for, so a spec with devices is refused with that reason, not a build error.
//
// temper-bench's GPU part (bench/temper_bench_gpu.cpp) is the one exception: it measures the CUDA
// backend itself (its graph steps, its memory plan, weights seeded on the device) and opens it
// directly.
//
// Ownership: the backend shares the model's weights (and drafter); the LoadedModel may go away
// after the call. Thread safety: a pure function of its arguments (the backend: see Backend).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/backend.h"
#include "engine/kv_cache.h"
#include "engine/loaded_model.h"

namespace temper::engine {

struct BackendSpec {
  // CUDA ordinals, one per tensor-parallel rank (an ordinal may repeat: ranks sharing a GPU);
  // empty: the CPU backend.
  std::vector<int> devices;
  // Tensor-parallel ranks on the CPU. With devices the ranks are the devices, and a tp other than 1
  // must equal their count.
  int tp = 1;
  // CPU: threads in all, split over the ranks; 0: one per hardware thread.
  int threads = 0;
  // The longest sequence, at most the model's max_position_embeddings; 0: min(that, 8192).
  int64_t max_context = 0;
  // Live sequences, snapshots and block size. kv.max_tokens is the CPU's paged pool; on GPUs the
  // memory plan sizes the pool from kv_memory_fraction instead.
  KvCacheOptions kv;
  // GPUs: the most snapshots the prefix cache may pin, below kv.max_snapshots when smaller (a
  // snapshot there holds a copy of every sliding layer's window on each GPU); 0: no cap.
  int device_max_snapshots = 0;
  // GPUs: tokens per forward pass.
  int max_rows = 512;
  // GPUs: the largest decode step run as a captured graph; 0: min(kv.max_sequences, max_rows).
  int max_batch = 0;
  // GPUs: the share of the memory left after weights, workspace and rings that the KV pool takes.
  double kv_memory_fraction = 0.9;
  // Attach the model's MTP drafter (LoadedModel::drafter) when it has one.
  bool use_drafter = true;
  // The model as errors name it (its directory or config); empty: not named.
  std::string model_name;
};

// "the CPU backend (tp 2)" or "the CUDA backend (gpus [0, 1])", for logs and errors.
std::string BackendDescription(const BackendSpec& spec);

// Opens the backend `spec` asks for on `model`'s weights. Errors, each naming the model (when
// spec.model_name is set) and the backend with its devices or tp: InvalidArgument for a tp that
// contradicts the device list; CpuBackend::Create's (a tp that cannot split the heads,
// max_context outside [1, max_position_embeddings], KV options that are not positive);
// CreateCudaBackend's (Unimplemented in a build without CUDA, a GPU that does not exist,
// ResourceExhausted when the plan does not fit).
Result<std::unique_ptr<Backend>> OpenBackend(const BackendSpec& spec, const LoadedModel& model);

}  // namespace temper::engine
