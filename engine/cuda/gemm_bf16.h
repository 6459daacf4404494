// GemmBf16: prefill's matrix products through cuBLASLt. y[r·ldy + o] = Σ_i x[r·ldx + i] · w[o·ldw + i]
// (RankOps::Gemm): bf16 x and w, both row-major as the checkpoint stores w ([out][in]), fp32
// accumulation and fp32 y. Row-major y = x·wᵀ is column-major yᵀ = w·xᵀ, so cuBLASLt sees
// A = w (transposed), B = x, C = yᵀ.
//
// The heuristic's choice is cached per GemmShape (shape, leading dimensions and pointer alignment,
// rank_ops.h), so a repeated shape costs one cublasLtMatmul call. The workspace is allocated at
// creation. cuBLASLt itself is loaded at run time (Create names the library when it is missing).
//
// Built only with nvcc. Thread safety: one per rank; not thread-safe (its cache and workspace).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>

#include "common/status.h"
#include "engine/cuda/rank_ops.h"

namespace temper::engine::cuda {

class GemmBf16 {
 public:
  // On the current device. Errors name the failing cuBLASLt or CUDA call.
  static Result<std::unique_ptr<GemmBf16>> Create(size_t workspace_bytes = 32 << 20);
  ~GemmBf16();
  GemmBf16(const GemmBf16&) = delete;
  GemmBf16& operator=(const GemmBf16&) = delete;

  // Enqueues the product on `stream`. InvalidArgument for a non-positive shape or leading
  // dimensions shorter than the rows; NotFound when cuBLASLt has no algorithm for the shape.
  Status Run(const uint16_t* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* y, int64_t ldy, int rows, int in,
             int out, cudaStream_t stream);

 private:
  struct Library;
  struct Plan;
  GemmBf16();
  Result<const Plan*> PlanFor(const GemmShape& shape);

  std::unique_ptr<Library> lt_;  // first: the plans and the handle are released through it
  void* handle_ = nullptr;       // cublasLtHandle_t
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::map<GemmShape, std::unique_ptr<Plan>> plans_;
};

}  // namespace temper::engine::cuda
