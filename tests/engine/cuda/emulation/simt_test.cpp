// The SIMT emulator itself: barriers and shared memory as on a GPU, shuffles, both thread orders,
// and the failures it must report (a barrier some threads never reach, a bad launch).
#include <cuda_runtime.h>

#include <catch2/catch.hpp>

#include <vector>

namespace {

using ::temper::emulation::Launcher;

// out[block] = Σ in[block · n + i] over the block's threads, through shared memory: each thread
// stores its value, and thread 0 adds them up after the barrier (or without it, when `barrier` is
// false: a race the emulator must show).
__global__ void BlockSum(const int* in, int* out, bool barrier) {
  __shared__ int values[256];
  values[threadIdx.x] = in[blockIdx.x * blockDim.x + threadIdx.x];
  if (barrier) __syncthreads();
  if (threadIdx.x != 0) return;
  int sum = 0;
  for (unsigned i = 0; i < blockDim.x; ++i) sum += values[i];
  out[blockIdx.x] = sum;
}

// The same race the other way: the last thread reads what thread 0 writes.
__global__ void LastReadsFirst(int* out, bool barrier) {
  __shared__ int first;
  if (threadIdx.x == 0) first = static_cast<int>(blockIdx.x) + 100;
  if (barrier) __syncthreads();
  if (threadIdx.x == blockDim.x - 1) out[blockIdx.x] = first;
}

// Each lane stores its value (its index plus `salt`) to shared memory and reads its neighbour's,
// after __syncwarp (or without it, when `barrier` is false: a race within a warp that the emulator
// must show).
__global__ void NeighbourInWarp(int* out, int salt, bool barrier) {
  __shared__ int values[64];
  values[threadIdx.x] = static_cast<int>(threadIdx.x) + salt;
  if (barrier) __syncwarp();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  out[threadIdx.x] = values[warp * 32 + (lane + 1) % 32];
}

__global__ void Butterfly(int* out, int lane_mask) {
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, static_cast<int>(threadIdx.x) * 10, lane_mask);
}

// Half of each warp waits at a shuffle with the other half, which waits at __syncthreads.
__global__ void Divergent(int* out) {
  if (threadIdx.x % 2 == 0) {
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1, 1);
  } else {
    __syncthreads();
  }
}

TEST_CASE("SIMT emulator: shared memory behind a barrier sums as on a GPU, and without the barrier the race shows") {
  const int blocks = 3, threads = 256;
  std::vector<int> in(blocks * threads);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int>(i % 7) + 1;
  for (bool barrier : {true, false}) {
    std::vector<int> out(blocks, -1);
    Launcher(BlockSum, blocks, threads)(in.data(), out.data(), barrier);
    REQUIRE(cudaGetLastError() == cudaSuccess);
    int right = 0;
    for (int b = 0; b < blocks; ++b) {
      int want = 0;
      for (int i = 0; i < threads; ++i) want += in[b * threads + i];
      right += out[b] == want;
    }
    // Without the barrier, the blocks that run thread 0 first sum stale values.
    INFO((barrier ? "barrier" : "no barrier"));
    CHECK(right == (barrier ? blocks : 1));
  }
  // Blocks start in alternate thread orders, so one of two blocks runs its last thread first.
  for (bool barrier : {true, false}) {
    std::vector<int> out(2, -1);
    Launcher(LastReadsFirst, 2, 64)(out.data(), barrier);
    REQUIRE(cudaGetLastError() == cudaSuccess);
    INFO((barrier ? "barrier" : "no barrier"));
    CHECK((out[0] == 100 && out[1] == 101) == barrier);
  }
}

TEST_CASE("SIMT emulator: __syncwarp orders shared memory within a warp, and without it the race shows") {
  for (bool barrier : {true, false}) {
    const int salt = barrier ? 100 : 200;  // shared memory outlives a launch: stale values differ
    std::vector<int> out(64, -1);
    Launcher(NeighbourInWarp, 1, 64)(out.data(), salt, barrier);
    REQUIRE(cudaGetLastError() == cudaSuccess);
    int right = 0;
    for (int t = 0; t < 64; ++t) right += out[t] == (t / 32) * 32 + (t % 32 + 1) % 32 + salt;
    INFO((barrier ? "__syncwarp" : "no __syncwarp"));
    // In thread order every lane but the last of each warp reads its neighbour before it stores.
    CHECK(right == (barrier ? 64 : 2));
  }
}

TEST_CASE("SIMT emulator: a shuffle gives each lane its partner's value") {
  for (int mask : {1, 2, 16, 31}) {
    std::vector<int> out(64, -1);
    Launcher(Butterfly, 1, 64)(out.data(), mask);
    REQUIRE(cudaGetLastError() == cudaSuccess);
    for (int t = 0; t < 64; ++t) {
      INFO("mask " << mask << ", thread " << t);
      CHECK(out[t] == ((t % 32) ^ mask) * 10 + (t / 32) * 320);
    }
  }
}

TEST_CASE("SIMT emulator: a deadlocked block and a bad launch are errors from cudaGetLastError") {
  std::vector<int> out(64, -1);
  Launcher(Divergent, 1, 64)(out.data());
  CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
  CHECK(cudaGetLastError() == cudaSuccess);  // read once, as on a GPU
  Launcher(Butterfly, 1, 2048)(out.data(), 1);
  CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
  Launcher(Butterfly, 0, 32)(out.data(), 1);
  CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
}

}  // namespace
