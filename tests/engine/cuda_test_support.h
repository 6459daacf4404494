// Helpers the GPU test suites share: the skip when no CUDA device is present (so CI without a GPU
// stays green and ctest counts the cases as skipped), seeded random inputs (never zeros), the
// element-wise tolerance check, device copies of host vectors and the GEMV's products in double.
#pragma once

#include <cuda_runtime_api.h>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "engine/model/bf16.h"
#include "skip.h"

namespace temper::engine::cuda::testing {

// Whether a CUDA device is usable.
inline bool HaveGpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

// GPU cases start with this: without a usable CUDA device they end as skipped (skip.h).
#define TEMPER_SKIP_WITHOUT_GPU()                                                           \
  do {                                                                                      \
    if (!::temper::engine::cuda::testing::HaveGpu()) TEMPER_SKIP("no CUDA device present"); \
  } while (0)

inline std::vector<float> RandomFloats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

inline std::vector<uint16_t> RandomBf16(size_t n, uint32_t seed, float scale = 1.0f) {
  std::vector<uint16_t> v;
  for (float x : RandomFloats(n, seed, scale)) v.push_back(FloatToBf16(x));
  return v;
}

// |got − want| <= abs + rel · |want| element by element, and every value finite.
inline void Near(const std::vector<float>& got, const std::vector<float>& want, float abs, float rel) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": got " << got[i] << ", want " << want[i]);
    REQUIRE(std::isfinite(got[i]));
    REQUIRE(std::abs(got[i] - want[i]) <= abs + rel * std::abs(want[i]));
  }
}

// Device copy of a host vector, freed with the object.
template <typename T>
class DeviceVec {
 public:
  explicit DeviceVec(const std::vector<T>& host) : n_(host.size()) {
    REQUIRE(cudaMalloc(reinterpret_cast<void**>(&ptr_), n_ * sizeof(T)) == cudaSuccess);
    REQUIRE(cudaMemcpy(ptr_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
  }
  ~DeviceVec() { cudaFree(ptr_); }
  DeviceVec(const DeviceVec&) = delete;
  DeviceVec& operator=(const DeviceVec&) = delete;
  T* get() const { return ptr_; }
  std::vector<T> Read() const {
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    std::vector<T> host(n_);
    REQUIRE(cudaMemcpy(host.data(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
    return host;
  }

 private:
  size_t n_;
  T* ptr_ = nullptr;
};

// Σ_i x[r][i] · w[o][i] in double, [rows][out].
inline std::vector<float> Products(const std::vector<float>& x, const std::vector<uint16_t>& w, int rows, int in,
                                   int out) {
  std::vector<float> y(static_cast<size_t>(rows) * out);
  for (int r = 0; r < rows; ++r) {
    for (int o = 0; o < out; ++o) {
      double s = 0;
      for (int i = 0; i < in; ++i) s += double(x[size_t(r) * in + i]) * Bf16ToFloat(w[size_t(o) * in + i]);
      y[size_t(r) * out + o] = static_cast<float>(s);
    }
  }
  return y;
}

}  // namespace temper::engine::cuda::testing
