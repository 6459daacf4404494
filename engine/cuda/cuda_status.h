// TEMPER_CUDA_TRY: turns a failing CUDA runtime, cuBLASLt or NCCL call into a temper::Status
// naming the error and the file:line of the call, and returns it. Library code never exits on a
// CUDA error; the caller decides.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "common/status.h"

namespace temper::engine::cuda {

inline Status CudaStatus(cudaError_t e, const char* expr, const char* file, int line) {
  if (e == cudaSuccess) return Status::OK();
  return Status::Internal(std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ") from " + expr + " at " +
                          file + ":" + std::to_string(line));
}

namespace detail {
// fmt's headers do not compile under nvcc in C++20 mode, so .cu files build messages with this.
template <typename T>
std::string S(T v) {
  return std::to_string(v);
}
}  // namespace detail

}  // namespace temper::engine::cuda

#define TEMPER_CUDA_TRY(expr)                                                                 \
  do {                                                                                        \
    const cudaError_t temper_cuda_err_ = (expr);                                              \
    if (temper_cuda_err_ != cudaSuccess) {                                                    \
      return ::temper::engine::cuda::CudaStatus(temper_cuda_err_, #expr, __FILE__, __LINE__); \
    }                                                                                         \
  } while (0)
