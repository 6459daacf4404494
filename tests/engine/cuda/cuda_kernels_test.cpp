// The CUDA kernels against plain C++ references of engine/cpu/forward.cpp's math, on random inputs
// at several shapes, with |got - ref| <= abs + |ref| · rel. Every case SKIPs (passes with a message)
// when no CUDA device is present, so CI without a GPU stays green; ctest labels them `gpu`.
#include <cuda_runtime_api.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "engine/model/bf16.h"
#include "engine/cuda/kernel_math.h"
#include "engine/cuda/kernels.h"
#include "engine/cuda_test_support.h"
#include "engine/cuda/reference_ops.h"

namespace temper::engine::cuda {
namespace {

using testing::HaveGpu;
using testing::Near;
using testing::RandomBf16;

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

std::vector<float> Random(size_t n, uint32_t seed, float scale = 1.0f) { return testing::RandomFloats(n, seed, scale); }

TEST_CASE("GEMV bf16 equals the fp32 dot products (1-8 rows, aligned and unaligned)") {
  if (!HaveGpu()) return;
  for (int rows : {1, 3, 8}) {
    for (auto [in, out] : {std::pair{128, 320}, std::pair{5376, 64}, std::pair{77, 5}}) {
      const auto x = Random(static_cast<size_t>(rows) * in, 1);
      const auto w = RandomBf16(static_cast<size_t>(out) * in, 2, 0.05f);
      std::vector<float> want(static_cast<size_t>(rows) * out);
      for (int r = 0; r < rows; ++r)
        for (int o = 0; o < out; ++o) {
          double s = 0;
          for (int i = 0; i < in; ++i) s += double(x[r * in + i]) * Bf16ToFloat(w[size_t(o) * in + i]);
          want[r * out + o] = static_cast<float>(s);
        }
      DeviceVec dx(x);
      DeviceVec dw(w);
      DeviceVec dy(std::vector<float>(want.size()));
      REQUIRE(LaunchGemvBf16(dx.get(), in, dw.get(), in, dy.get(), out, rows, in, out, nullptr).ok());
      Near(dy.Read(), want, 1e-4f, 1e-4f);
    }
  }
}

TEST_CASE("RMSNorm with RoPE, and the sandwich-norm residual update") {
  if (!HaveGpu()) return;
  const int heads = 4, hd = 64, angles = 8, positions_n = 2;
  const auto x = Random(size_t(positions_n) * heads * hd, 3, 3.0f);
  const auto w = RandomBf16(hd, 4);
  std::vector<float> cos(100 * angles), sin(100 * angles);
  for (int p = 0; p < 100; ++p)
    for (int j = 0; j < angles; ++j) {
      cos[p * angles + j] = std::cos(p * 0.1f * (j + 1));
      sin[p * angles + j] = std::sin(p * 0.1f * (j + 1));
    }
  const std::vector<int64_t> pos = {5, 99};
  std::vector<float> want(x.size());
  for (int r = 0; r < positions_n * heads; ++r) {
    double ss = 0;
    for (int i = 0; i < hd; ++i) ss += double(x[r * hd + i]) * x[r * hd + i];
    const float inv = 1.0f / std::sqrt(float(ss / hd) + 1e-6f);
    for (int i = 0; i < hd; ++i) want[r * hd + i] = x[r * hd + i] * inv * Bf16ToFloat(w[i]);
    const int64_t p = pos[r / heads];
    for (int j = 0; j < angles; ++j) math::RopePair(want[r * hd + j], want[r * hd + j + hd / 2], cos[p * angles + j], sin[p * angles + j]);
  }
  DeviceVec dx(x);
  DeviceVec dw(w);
  DeviceVec dc(cos);
  DeviceVec ds(sin);
  DeviceVec dp(pos);
  REQUIRE(LaunchNormRope(dx.get(), dx.get(), dw.get(), positions_n * heads, hd, 1e-6f,
                         RopeView{dc.get(), ds.get(), angles}, dp.get(), heads, nullptr).ok());
  Near(dx.Read(), want, 1e-5f, 1e-5f);

  const auto res = Random(x.size(), 5), branch = Random(x.size(), 6, 10.0f);
  std::vector<float> want_res(res.size());
  for (int r = 0; r < positions_n * heads; ++r) {
    double ss = 0;
    for (int i = 0; i < hd; ++i) ss += double(branch[r * hd + i]) * branch[r * hd + i];
    const float inv = 1.0f / std::sqrt(float(ss / hd) + 1e-6f);
    for (int i = 0; i < hd; ++i) want_res[r * hd + i] = (res[r * hd + i] + branch[r * hd + i] * inv * Bf16ToFloat(w[i])) * 0.5f;
  }
  DeviceVec dr(res);
  DeviceVec db(branch);
  REQUIRE(LaunchNormResidual(dr.get(), db.get(), dw.get(), positions_n * heads, hd, 1e-6f, 0.5f, nullptr).ok());
  Near(dr.Read(), want_res, 1e-5f, 1e-5f);
}

TEST_CASE("GeGLU is gelu_tanh(gate) * up") {
  if (!HaveGpu()) return;
  const auto gate = Random(10007, 7, 2.0f), up = Random(10007, 8);
  std::vector<float> want(gate.size());
  for (size_t i = 0; i < gate.size(); ++i) want[i] = math::GeluTanh(gate[i]) * up[i];
  DeviceVec dg(gate);
  DeviceVec du(up);
  REQUIRE(LaunchGeglu(dg.get(), du.get(), static_cast<int64_t>(gate.size()), nullptr).ok());
  Near(dg.Read(), want, 1e-6f, 1e-5f);
}

// One sequence (ring slot 1, block table {3, 0, 2}) at `pos`, every earlier key in the cache.
void CheckDecodeAttention(bool sliding, int hd, int64_t pos, int splits) {
  const int window = 16, bt = 8, kv_heads = 2, q_heads = 4, group = 2, angles = hd / 8;
  const int width = kv_heads * hd;
  const int64_t cache_rows = sliding ? 2 * window : 4 * bt;
  const std::vector<int32_t> blocks = {3, 0, 2, 1};
  const std::vector<int32_t> slots = {1};
  auto v = RandomBf16(static_cast<size_t>(cache_rows) * width, 9);
  auto k = RandomBf16(v.size(), 10);
  const auto k_norm = RandomBf16(hd, 11);
  const auto q = Random(static_cast<size_t>(q_heads) * hd, 12);
  std::vector<float> cos((pos + 1) * angles), sin(cos.size());
  for (int64_t p = 0; p <= pos; ++p)
    for (int j = 0; j < angles; ++j) {
      cos[p * angles + j] = std::cos(p * std::pow(1e4f, -2.0f * j / hd));
      sin[p * angles + j] = std::sin(p * std::pow(1e4f, -2.0f * j / hd));
    }
  std::vector<float> want(q.size());
  for (int h = 0; h < q_heads; ++h) {
    const int kvh = h / group;
    const int64_t lo = math::WindowStart(pos, window, sliding);
    std::vector<float> scores, vals;
    for (int64_t p = lo; p <= pos; ++p) {
      const int64_t row = math::KvRow(p, sliding, window, 1, blocks.data(), bt);
      std::vector<float> key(hd);
      for (int d = 0; d < hd; ++d) {
        const float vd = Bf16ToFloat(v[row * width + kvh * hd + d]);
        key[d] = sliding ? Bf16ToFloat(k[row * width + kvh * hd + d]) : vd * Bf16ToFloat(k_norm[d]);
        vals.push_back(vd);
      }
      if (!sliding)
        for (int j = 0; j < angles; ++j) math::RopePair(key[j], key[j + hd / 2], cos[p * angles + j], sin[p * angles + j]);
      float s = 0;
      for (int d = 0; d < hd; ++d) s += q[h * hd + d] * key[d];
      scores.push_back(s);
    }
    float max = scores[0], sum = 0;
    for (float s : scores) max = std::max(max, s);
    for (float& s : scores) sum += (s = std::exp(s - max));
    for (size_t i = 0; i < scores.size(); ++i)
      for (int d = 0; d < hd; ++d) want[h * hd + d] += scores[i] / sum * vals[i * hd + d];
  }
  DeviceVec dv(v);
  DeviceVec dk(k);
  DeviceVec dkn(k_norm);
  DeviceVec dq(q);
  DeviceVec dc(cos);
  DeviceVec ds(sin);
  // Slot 1's block table is the second of two rows.
  std::vector<int32_t> tables(8, 0);
  std::copy(blocks.begin(), blocks.end(), tables.begin() + 4);
  DeviceVec dbl(tables);
  DeviceVec dsl(slots);
  DeviceVec dpos(std::vector<int64_t>{pos});
  DeviceVec dstart(std::vector<int64_t>{pos + 1});  // every key from the cache
  DeviceVec dfirst(std::vector<int32_t>{0});
  DeviceVec dend(std::vector<int64_t>{pos + 1});
  DeviceVec dout(std::vector<float>(q.size()));
  DeviceVec dpart(std::vector<float>(size_t(q_heads) * splits * (hd + 2)));
  KvLayerView kv{.k = sliding ? dk.get() : nullptr, .v = dv.get(), .k_norm = dkn.get(), .sliding = sliding,
                 .window = window, .kv_heads = kv_heads, .head_dim = hd, .block_tokens = bt,
                 .rope = RopeView{dc.get(), ds.get(), angles}};
  const RowTables t{.positions = dpos.get(), .slots = dsl.get(), .chunk_start = dstart.get(), .first_row = dfirst.get(),
                    .chunk_end = dend.get(), .blocks = dbl.get(), .max_blocks = 4};
  REQUIRE(LaunchAttention(kv, dq.get(), nullptr, nullptr, dout.get(), 1, t, HeadRange{q_heads, 0, group, 0}, splits,
                          dpart.get(), nullptr).ok());
  Near(dout.Read(), want, 1e-4f, 1e-3f);
}

TEST_CASE("split-KV decode attention: sliding ring with K, and global layers rebuilding K from V") {
  if (!HaveGpu()) return;
  for (int splits : {1, 5, 16}) {
    CheckDecodeAttention(true, 32, 3, splits);
    CheckDecodeAttention(true, 256, 40, splits);
    CheckDecodeAttention(false, 64, 20, splits);
    CheckDecodeAttention(false, 512, 31, splits);
  }
}

// Sampling candidates: the chunk sorts must give exactly the reference's (value, id) lists, also
// where ties straddle the k-th place across chunks and rounds, with -inf entries and rows, row
// lengths that are not a multiple of the chunk, k = n, and a row stride past n (whose padding,
// +inf, must never be read); max exactly, mass within fp32 summation.
TEST_CASE("top candidates equal ReferenceTopCandidates (ties, -inf, odd lengths, k = n)") {
  if (!HaveGpu()) return;
  const float inf = std::numeric_limits<float>::infinity();
  struct Shape {
    int n, k;
  };
  for (const Shape s : {Shape{65536, 1}, Shape{65536, 64}, Shape{65536, 256}, Shape{262144, 64}, Shape{512, 7},
                        Shape{512, 256}, Shape{5000, 100}, Shape{2049, 64}, Shape{200, 200}}) {
    for (int pattern = 0; pattern < 3; ++pattern) {
      INFO("n " << s.n << ", k " << s.k << ", pattern " << pattern);
      const int rows = 5;
      const int64_t ld = s.n + 3;
      std::vector<float> host(static_cast<size_t>(rows * ld), inf);
      std::mt19937 rng(40 + pattern);
      std::normal_distribution<float> normal(0.0f, 3.0f);
      std::uniform_int_distribution<int> level(-6, 6);
      for (int r = 0; r < rows; ++r) {
        for (int i = 0; i < s.n; ++i) {
          float& x = host[static_cast<size_t>(r * ld + i)];
          if (pattern == 0) x = normal(rng);                                // distinct values
          if (pattern == 1) x = 0.5f * static_cast<float>(level(rng));      // 13 values: ties everywhere
          if (pattern == 2) x = i % 4 == 1 || r == 4 ? -inf : normal(rng);  // -inf entries, row 4 all -inf
        }
      }
      const std::vector<float> temperatures = {1.0f, 0.0f, 0.7f, 1.5f, 1.0f};
      std::vector<float> want_vals(static_cast<size_t>(rows * s.k)), want_max(rows), want_mass(rows);
      std::vector<int32_t> want_ids(want_vals.size());
      ReferenceTopCandidates(host.data(), ld, rows, s.n, s.k, 777, temperatures.data(), want_vals.data(),
                             want_ids.data(), want_max.data(), want_mass.data());
      DeviceVec logits(host);
      DeviceVec temps(temperatures);
      DeviceVec vals(std::vector<float>(want_vals.size(), 12345.0f));  // poisoned
      DeviceVec ids(std::vector<int32_t>(want_ids.size(), -7));
      DeviceVec max(std::vector<float>(rows, 12345.0f));
      DeviceVec mass(std::vector<float>(rows, 12345.0f));
      DeviceVec scratch(std::vector<char>(std::max<size_t>(1, TopCandidatesScratchBytes(rows, s.n, s.k))));
      REQUIRE(LaunchTopCandidates(logits.get(), ld, rows, s.n, s.k, 777, temps.get(), vals.get(), ids.get(), max.get(),
                                  mass.get(), scratch.get(), nullptr)
                  .ok());
      CHECK(vals.Read() == want_vals);
      CHECK(ids.Read() == want_ids);
      CHECK(max.Read() == want_max);
      Near(mass.Read(), want_mass, 0, 1e-4f);
    }
  }
}

TEST_CASE("top candidates refuse k beyond 256 or n") {
  if (!HaveGpu()) return;
  DeviceVec logits(std::vector<float>(600, 1.0f));
  DeviceVec temps(std::vector<float>{1.0f});
  DeviceVec vals(std::vector<float>(600));
  DeviceVec ids(std::vector<int32_t>(600));
  DeviceVec one(std::vector<float>(1));
  DeviceVec scratch(std::vector<char>(TopCandidatesScratchBytes(1, 600, 300)));
  CHECK(LaunchTopCandidates(logits.get(), 600, 1, 600, 257, 0, temps.get(), vals.get(), ids.get(), one.get(),
                            one.get(), scratch.get(), nullptr)
            .code() == StatusCode::kInvalidArgument);
  CHECK(LaunchTopCandidates(logits.get(), 600, 1, 100, 101, 0, temps.get(), vals.get(), ids.get(), one.get(),
                            one.get(), scratch.get(), nullptr)
            .code() == StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace temper::engine::cuda
