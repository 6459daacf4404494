// NVIDIA's libraries are loaded at run time (cuBLASLt here, NCCL in all_reduce.cu), so a binary built
// with CUDA starts on a host without them; these cases need no GPU.
#include <stdlib.h>

#include <catch2/catch.hpp>

#include "engine/cuda/gemm_bf16.h"

namespace temper::engine::cuda {
namespace {

TEST_CASE("a missing cuBLASLt is named when the GEMM is created, not when the program starts", "[cuda]") {
  ::setenv("TEMPER_CUBLASLT_LIBRARY", "/nonexistent/libcublasLt.so.13", 1);
  auto gemm = GemmBf16::Create();
  ::unsetenv("TEMPER_CUBLASLT_LIBRARY");
  REQUIRE_FALSE(gemm.ok());
  CHECK(gemm.status().code() == StatusCode::kNotFound);
  CHECK_THAT(gemm.status().message(),
             Catch::StartsWith("cuBLASLt: cannot load /nonexistent/libcublasLt.so.13 (NVIDIA's CUDA") &&
                 Catch::Contains("needed to run on GPUs"));
}

}  // namespace
}  // namespace temper::engine::cuda
