// A rank whose peer never joins the all-reduce: it waits Options::spin_limit_ms, records the stall
// in host memory and traps. The trap ends the CUDA context of the whole process, so this case has a
// test binary of its own (temper_cuda_stall_tests). Skipped without a GPU.
#include <cuda_runtime_api.h>

#include <catch2/catch.hpp>

#include "engine/cuda/all_reduce.h"
#include "engine/cuda_test_support.h"

namespace temper::engine::cuda {
namespace {

TEST_CASE("a rank whose peer never calls records who it waited for, then traps", "[gpu][all-reduce]") {
  TEMPER_SKIP_WITHOUT_GPU();
  DeviceAllReduce::Options options;
  options.spin_limit_ms = 300;
  const std::vector<int> devices = {0, 0};
  auto ar = DeviceAllReduce::Create(devices, options);
  if (!ar.ok()) FAIL(ar.status().ToString());
  REQUIRE((*ar)->StallReport().empty());
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  REQUIRE(PrepareAllReduceStream(stream).ok());
  float* data = nullptr;
  REQUIRE(cudaMalloc(reinterpret_cast<void**>(&data), 1000 * sizeof(float)) == cudaSuccess);
  REQUIRE(cudaMemset(data, 0, 1000 * sizeof(float)) == cudaSuccess);

  // Rank 0 calls; rank 1 never does.
  REQUIRE((*ar)->AllReduceSumWith(AllReduceAlgo::kOneShotP2p, 0, data, 1000, stream).ok());
  CHECK(cudaStreamSynchronize(stream) == cudaErrorLaunchFailure);
  CHECK((*ar)->StallReport() ==
        "all-reduce stalled: rank 0, block 0 of 1, call 1 of 1000 floats, waited 300 ms for rank 1's flag, which "
        "showed call 0; rank 1 had ended 0 calls");
  // The context is gone: what is left is released with the process.
}

}  // namespace
}  // namespace temper::engine::cuda
