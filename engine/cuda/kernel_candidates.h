// The decode kernels on the tensor cores that wait for a GPU run's verdict, and which of them a
// rank runs. Each is off by default: the SIMT kernels, whose numerics the CPU twin (ReferenceOps)
// has. bench/RESULTS.md states the rule by which the next GPU run adopts or removes each one; the
// run that decides leaves one kernel per op. CudaBackendOptions, CudaOps and the emulated ops take
// these; temper-bench sets them (--gpu-tensor-core-gemv, --gpu-tensor-core-attention).
//
// Host code. Thread safety: values and pure functions.
#pragma once

#include <string>

#include "common/status.h"

namespace temper::engine::cuda {

// The attention's split kernel on the tensor cores (attention_tensor_cores.cu), and where a tile's
// value rows are loaded in it: the two orders compute the same outputs, and which is faster is
// the GPU's to say.
enum class TensorCoreAttention {
  kOff,                // the SIMT kernel (attention.cu)
  kValuesAfterScores,  // after the tile's score MMAs: fewer registers, two waits for memory a tile
  kValuesWithKeys,     // with the tile's keys: one wait a tile, about 60 more registers at head_dim 512
};

inline const char* TensorCoreAttentionName(TensorCoreAttention a) {
  switch (a) {
    case TensorCoreAttention::kOff:
      return "off";
    case TensorCoreAttention::kValuesAfterScores:
      return "values loaded after the scores";
    case TensorCoreAttention::kValuesWithKeys:
      return "values loaded with the keys";
  }
  return "unknown";
}

struct KernelCandidates {
  // The decode GEMVs on the tensor cores (gemv_tensor_cores.cu), each weight row read in runs of
  // this many bytes (256 or 512); 0: the SIMT kernel (gemv_bf16.cu). It rounds the activations to
  // bf16; GEMVs whose inputs are not a multiple of 32 wide stay on the SIMT kernel.
  int tensor_core_gemv_run_bytes = 0;
  // The attention of every layer on the tensor cores (attention_tensor_cores.cu), decode and
  // prefill rows alike; it rounds queries, keys and softmax weights to bf16.
  TensorCoreAttention tensor_core_attention = TensorCoreAttention::kOff;
};

// OK, or InvalidArgument naming the field and its value.
inline Status CheckKernelCandidates(const KernelCandidates& c) {
  const int run = c.tensor_core_gemv_run_bytes;
  if (run != 0 && run != 256 && run != 512) {
    return Status::InvalidArgument("tensor_core_gemv_run_bytes " + std::to_string(run) +
                                   " is not 0 (the SIMT GEMV), 256 or 512");
  }
  switch (c.tensor_core_attention) {
    case TensorCoreAttention::kOff:
    case TensorCoreAttention::kValuesAfterScores:
    case TensorCoreAttention::kValuesWithKeys:
      return Status::OK();
  }
  return Status::InvalidArgument("tensor_core_attention " + std::to_string(static_cast<int>(c.tensor_core_attention)) +
                                 " is not one of TensorCoreAttention's values");
}

}  // namespace temper::engine::cuda
