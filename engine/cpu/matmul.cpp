#include "engine/cpu/matmul.h"

#include <bit>
#include <cstring>

namespace temper::engine::cpu {
namespace {

// GCC/Clang vector extensions: 16 fp32 lanes, lowered to one AVX-512 register, two AVX2 registers
// or four SSE registers depending on the clone being compiled.
typedef float F32x16 __attribute__((vector_size(64)));
typedef uint16_t U16x16 __attribute__((vector_size(32)));
typedef uint32_t U32x16 __attribute__((vector_size(64)));

[[gnu::always_inline]] inline F32x16 LoadBf16(const uint16_t* p) {
  U16x16 h;
  std::memcpy(&h, p, sizeof h);
  const U32x16 wide = __builtin_convertvector(h, U32x16) << 16;
  return std::bit_cast<F32x16>(wide);
}

[[gnu::always_inline]] inline F32x16 LoadF32(const float* p) {
  F32x16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

[[gnu::always_inline]] inline float Sum(F32x16 v) {
  // Pairwise, in a fixed order.
  float s8[8], s4[4];
  for (int i = 0; i < 8; ++i) s8[i] = v[i] + v[i + 8];
  for (int i = 0; i < 4; ++i) s4[i] = s8[i] + s8[i + 4];
  return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}

// Output columns [o_begin, o_end) for every row of x. Each dot product keeps two accumulators
// (even and odd 16-wide chunks) so consecutive adds do not wait on each other; the single-row and
// four-row paths sum in the same order, so a row's result does not depend on its neighbours.
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) void MatMulRange(
    const float* x, int64_t rows, int64_t x_stride, const Bf16Matrix& w, float* out, int64_t out_stride,
    int64_t o_begin, int64_t o_end) {
  const int64_t n = w.cols;
  const int64_t pair_end = n - n % 32, vec_end = n - n % 16;
  auto tail = [&](const uint16_t* wr, const float* xr, F32x16 even, F32x16 odd) {
    if (pair_end < vec_end) even += LoadBf16(wr + pair_end) * LoadF32(xr + pair_end);
    float s = Sum(even + odd);
    for (int64_t i = vec_end; i < n; ++i) s += std::bit_cast<float>(static_cast<uint32_t>(wr[i]) << 16) * xr[i];
    return s;
  };
  for (int64_t o = o_begin; o < o_end; ++o) {
    const uint16_t* wr = w.Row(static_cast<int>(o));
    int64_t r = 0;
    for (; r + 4 <= rows; r += 4) {
      const float* x0 = x + r * x_stride;
      const float* x1 = x0 + x_stride;
      const float* x2 = x1 + x_stride;
      const float* x3 = x2 + x_stride;
      F32x16 a0 = {}, a1 = {}, a2 = {}, a3 = {}, b0 = {}, b1 = {}, b2 = {}, b3 = {};
      for (int64_t i = 0; i < pair_end; i += 32) {
        const F32x16 wa = LoadBf16(wr + i), wb = LoadBf16(wr + i + 16);
        a0 += wa * LoadF32(x0 + i);
        b0 += wb * LoadF32(x0 + i + 16);
        a1 += wa * LoadF32(x1 + i);
        b1 += wb * LoadF32(x1 + i + 16);
        a2 += wa * LoadF32(x2 + i);
        b2 += wb * LoadF32(x2 + i + 16);
        a3 += wa * LoadF32(x3 + i);
        b3 += wb * LoadF32(x3 + i + 16);
      }
      out[r * out_stride + o] = tail(wr, x0, a0, b0);
      out[(r + 1) * out_stride + o] = tail(wr, x1, a1, b1);
      out[(r + 2) * out_stride + o] = tail(wr, x2, a2, b2);
      out[(r + 3) * out_stride + o] = tail(wr, x3, a3, b3);
    }
    for (; r < rows; ++r) {
      const float* x0 = x + r * x_stride;
      F32x16 a0 = {}, b0 = {};
      for (int64_t i = 0; i < pair_end; i += 32) {
        a0 += LoadBf16(wr + i) * LoadF32(x0 + i);
        b0 += LoadBf16(wr + i + 16) * LoadF32(x0 + i + 16);
      }
      out[r * out_stride + o] = tail(wr, x0, a0, b0);
    }
  }
}

}  // namespace

void MatMulBf16(WorkerGroup& pool, const float* x, int64_t rows, int64_t x_stride, const Bf16Matrix& w, float* out,
                int64_t out_stride) {
  pool.ParallelFor(w.rows, /*grain=*/8,
                   [&](int64_t begin, int64_t end) { MatMulRange(x, rows, x_stride, w, out, out_stride, begin, end); });
}

}  // namespace temper::engine::cpu
