// MatMulBf16's paths (four x rows at a time, one at a time, and the 16-wide and scalar tails)
// must agree bit for bit: incremental decode (rows = 1) is checked
// against full recompute (rows = T) elsewhere, and that only holds if no path sums differently.
#include "engine/cpu/matmul.h"

#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

namespace temper::engine::cpu {
namespace {

uint16_t ToBf16(float f) { return static_cast<uint16_t>(std::bit_cast<uint32_t>(f) >> 16); }
float FromBf16(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

struct Problem {
  int rows, out, cols;
  std::vector<float> x;
  std::vector<uint16_t> w;
  Problem(int rows_, int out_, int cols_, uint32_t seed) : rows(rows_), out(out_), cols(cols_) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    x.resize(size_t(rows) * cols);
    w.resize(size_t(out) * cols);
    for (float& v : x) v = dist(rng);
    for (uint16_t& v : w) v = ToBf16(dist(rng));
  }
  Bf16Matrix Matrix() const { return {w.data(), out, cols, cols}; }
  std::vector<float> Run(WorkerGroup& pool, int first_row, int n_rows) const {
    std::vector<float> y(size_t(n_rows) * out);
    MatMulBf16(pool, x.data() + size_t(first_row) * cols, n_rows, cols, Matrix(), y.data(), out);
    return y;
  }
};

TEST_CASE("every row of a batched matmul equals the same row computed alone, bit for bit") {
  WorkerGroup pool(2);
  // 70 columns: two 32-wide pairs, then a scalar tail; 50: one pair, a 16-wide tail, a scalar tail.
  for (int cols : {64, 70, 50, 2048}) {
    // 7 rows: one block of four and three rows alone; 13 outputs split unevenly over the threads.
    Problem p(7, 13, cols, 42u + cols);
    std::vector<float> all = p.Run(pool, 0, p.rows);
    for (int r = 0; r < p.rows; ++r) {
      std::vector<float> alone = p.Run(pool, r, 1);
      for (int o = 0; o < p.out; ++o) {
        INFO("cols " << cols << " row " << r << " output " << o);
        CHECK(std::bit_cast<uint32_t>(all[size_t(r) * p.out + o]) == std::bit_cast<uint32_t>(alone[o]));
      }
    }
  }
}

TEST_CASE("matmul matches a double-precision reference") {
  WorkerGroup pool(3);
  Problem p(5, 37, 300, 7u);
  std::vector<float> y = p.Run(pool, 0, p.rows);
  for (int r = 0; r < p.rows; ++r) {
    for (int o = 0; o < p.out; ++o) {
      double ref = 0, magnitude = 0;
      for (int i = 0; i < p.cols; ++i) {
        double term = double(p.x[size_t(r) * p.cols + i]) * FromBf16(p.w[size_t(o) * p.cols + i]);
        ref += term;
        magnitude += std::fabs(term);
      }
      CHECK(std::fabs(y[size_t(r) * p.out + o] - ref) <= 1e-6 * magnitude + 1e-6);
    }
  }
}

TEST_CASE("the result does not depend on the thread count") {
  Problem p(1, 29, 96, 3u);
  WorkerGroup one(1), three(3);
  std::vector<float> a = p.Run(one, 0, 1), b = p.Run(three, 0, 1);
  for (int o = 0; o < p.out; ++o) CHECK(std::bit_cast<uint32_t>(a[o]) == std::bit_cast<uint32_t>(b[o]));
}

}  // namespace
}  // namespace temper::engine::cpu
