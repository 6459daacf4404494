// The stand-in CUDA runtime of the SIMT emulator (simt.h): what the backend's .cu files use of
// CUDA, for a host compiler. Qualifiers vanish (`__shared__` becomes `static`: one block runs at a
// time), the built-in indices and barriers go to the emulator, vector types are plain structs,
// and a launch (rewritten by launch_syntax.pl) runs the whole grid before it returns. Errors a
// launch can have here (a bad configuration, a deadlocked block) come back from cudaGetLastError,
// as on a GPU, with the emulator's message on stderr.
#pragma once

#include <math.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "engine/cuda/emulation/simt.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static

struct dim3 {
  unsigned x, y, z;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint3 {
  unsigned x, y, z;
};
struct alignas(8) uint2 {
  uint32_t x, y;
};
struct alignas(16) uint4 {
  uint32_t x, y, z, w;
};
struct alignas(16) float4 {
  float x, y, z, w;
};

using cudaStream_t = struct CUstream_st*;
enum cudaError_t { cudaSuccess = 0, cudaErrorInvalidConfiguration = 9, cudaErrorLaunchFailure = 719 };
struct cudaFuncAttributes {
  int numRegs = 0;
};

namespace temper::emulation {

inline cudaError_t& LastError() {
  thread_local cudaError_t error = cudaSuccess;
  return error;
}
inline uint3 ToUint3(Extent e) { return {e.x, e.y, e.z}; }
inline Extent ToExtent(dim3 d) { return {d.x, d.y, d.z}; }

// `kernel<<<grid, block, shared, stream>>>(args)` as launch_syntax.pl rewrites it.
template <typename Kernel>
class Launch {
 public:
  Launch(Kernel kernel, dim3 grid, dim3 block) : kernel_(kernel), grid_(grid), block_(block) {}
  template <typename... Args>
  void operator()(Args&&... args) {
    std::string error;
    if (!RunGrid(
            ToExtent(grid_), ToExtent(block_), [&] { kernel_(args...); }, &error)) {
      std::fprintf(stderr, "emulated launch failed: %s\n", error.c_str());
      LastError() = error.rfind("invalid launch", 0) == 0 ? cudaErrorInvalidConfiguration : cudaErrorLaunchFailure;
    }
  }

 private:
  Kernel kernel_;
  dim3 grid_, block_;
};
template <typename Kernel>
Launch<Kernel> Launcher(Kernel kernel, dim3 grid, dim3 block, size_t /*shared*/ = 0,
                        cudaStream_t /*stream*/ = nullptr) {
  return Launch<Kernel>(kernel, grid, block);
}

}  // namespace temper::emulation

#define threadIdx (::temper::emulation::ToUint3(::temper::emulation::ThreadIdx()))
#define blockIdx (::temper::emulation::ToUint3(::temper::emulation::BlockIdx()))
#define blockDim (::temper::emulation::ToUint3(::temper::emulation::BlockDim()))
#define gridDim (::temper::emulation::ToUint3(::temper::emulation::GridDim()))

inline cudaError_t cudaGetLastError() {
  const cudaError_t e = ::temper::emulation::LastError();
  ::temper::emulation::LastError() = cudaSuccess;
  return e;
}
inline const char* cudaGetErrorName(cudaError_t e) {
  return e == cudaSuccess                     ? "cudaSuccess"
         : e == cudaErrorInvalidConfiguration ? "cudaErrorInvalidConfiguration"
                                              : "cudaErrorLaunchFailure";
}
inline const char* cudaGetErrorString(cudaError_t e) { return cudaGetErrorName(e); }
inline cudaError_t cudaFuncGetAttributes(cudaFuncAttributes*, const void*) { return cudaSuccess; }
// No GPU here: the emulator is not one.
inline cudaError_t cudaGetDeviceCount(int* n) {
  *n = 0;
  return cudaSuccess;
}

// Device memory is host memory.
enum cudaMemcpyKind { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2 };
inline cudaError_t cudaMalloc(void** p, size_t bytes) {
  *p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  return *p ? cudaSuccess : cudaErrorLaunchFailure;
}
inline cudaError_t cudaFree(void* p) {
  std::free(p);
  return cudaSuccess;
}
inline cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind /*kind*/) {
  std::memcpy(dst, src, bytes);
  return cudaSuccess;
}
inline cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }

inline void __syncthreads() { ::temper::emulation::SyncThreads(); }
// A warp's barrier: every unfinished lane of the warp meets there, as at a shuffle (whose thread
// orders it shares, so a lane that reads what another wrote without one between them shows up).
inline void __syncwarp(unsigned /*mask*/ = 0xffffffffu) {
  ::temper::emulation::WarpExchange(0, static_cast<int>(::temper::emulation::ThreadIdx().x % 32));
}
template <typename T>
T __shfl_sync(unsigned /*mask*/, T value, int source_lane) {
  static_assert(sizeof(T) <= 8, "a shuffle moves at most 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof value);
  bits = ::temper::emulation::WarpExchange(bits, source_lane % 32);
  T out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T value, int lane_mask) {
  const int lane = static_cast<int>(::temper::emulation::ThreadIdx().x % 32);
  return __shfl_sync(mask, value, lane ^ lane_mask);
}
inline float __uint_as_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
inline uint32_t __float_as_uint(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
template <typename T>
T __ldg(const T* p) {
  return *p;
}
template <typename T>
T __ldcs(const T* p) {
  return *p;
}
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
