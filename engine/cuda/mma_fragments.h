// One warp-wide tensor-core product, mma.sync m16n8k16 with bf16 operands and fp32 accumulators,
// and the packing of its operands, for the attention kernel (attention_kernel.h). On a GPU it is
// the PTX instruction; in the SIMT emulator (temper_cuda_emulated_tests) the same product is
// gathered from the fragments with shuffles and summed in k order, so a kernel's fragment layout is
// checked on the CPU.
//
// Device code: included by .cu files only (and by the SIMT emulator's C++ build of them).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/cuda/kernel_math.h"

namespace temper::engine::cuda::mma {

// Two floats as one bf16 pair of an MMA operand, rounded to nearest even, `lo` in the low half.
__device__ __forceinline__ uint32_t PackBf16(float lo, float hi) {
#if defined(__CUDA_ARCH__)
  uint32_t word;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(word) : "f"(hi), "f"(lo));
  return word;
#else
  return uint32_t{math::FloatToBf16(lo)} | uint32_t{math::FloatToBf16(hi)} << 16;
#endif
}

// c += A · B for the warp: mma.sync m16n8k16, bf16 operands, fp32 accumulators. PTX's fragments,
// for lane 4g + t, two bf16 a word (the lower k in the low half): a0 = A[g][2t, 2t+1],
// a1 = A[g+8][2t, 2t+1], a2 = A[g][2t+8, 2t+9], a3 = A[g+8][2t+8, 2t+9]; b0 = B[2t, 2t+1][g],
// b1 = B[2t+8, 2t+9][g]; c = C[g][2t], C[g][2t+1], C[g+8][2t], C[g+8][2t+1].
__device__ __forceinline__ void Mma(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                    uint32_t b1) {
#if defined(__CUDA_ARCH__)
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#else
  // The SIMT emulator: the same product from the fragments, gathered with shuffles (lane 4n + s
  // holds k = 2s, 2s + 1, 2s + 8 and 2s + 9 of A's rows n and n + 8 and of B's column n), summed
  // over k in order.
  constexpr unsigned kAllLanes = 0xffffffffu;
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  float a[2][16], b[2][16];  // A's rows g and g + 8; B's columns 2t and 2t + 1
  auto unpack = [](float* to, int k, uint32_t low_pair, uint32_t high_pair) {
    to[k] = math::Bf16ToFloat(low_pair & 0xffffu);
    to[k + 1] = math::Bf16ToFloat(low_pair >> 16);
    to[k + 8] = math::Bf16ToFloat(high_pair & 0xffffu);
    to[k + 9] = math::Bf16ToFloat(high_pair >> 16);
  };
  for (int s = 0; s < 4; ++s) {
    const uint32_t row_g_low = __shfl_sync(kAllLanes, a0, 4 * g + s);
    const uint32_t row_g8_low = __shfl_sync(kAllLanes, a1, 4 * g + s);
    const uint32_t row_g_high = __shfl_sync(kAllLanes, a2, 4 * g + s);
    const uint32_t row_g8_high = __shfl_sync(kAllLanes, a3, 4 * g + s);
    unpack(a[0], 2 * s, row_g_low, row_g_high);
    unpack(a[1], 2 * s, row_g8_low, row_g8_high);
    for (int j = 0; j < 2; ++j) {
      const uint32_t low = __shfl_sync(kAllLanes, b0, 4 * (2 * t + j) + s);
      const uint32_t high = __shfl_sync(kAllLanes, b1, 4 * (2 * t + j) + s);
      unpack(b[j], 2 * s, low, high);
    }
  }
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) {
      float sum = c[2 * i + j];
      for (int k = 0; k < 16; ++k) sum += a[i][k] * b[j][k];
      c[2 * i + j] = sum;
    }
  }
#endif
}

}  // namespace temper::engine::cuda::mma
