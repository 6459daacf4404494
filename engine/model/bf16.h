// bfloat16 <-> float conversion. Checkpoints store weights as bf16 (the top 16 bits of an IEEE
// float); the CPU backend widens them to fp32 as it reads them, which is exact.
#pragma once

#include <bit>
#include <cstdint>

namespace temper::engine {

inline float Bf16ToFloat(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

// Round to nearest, ties to even (what torch's `.to(torch.bfloat16)` does); NaN stays NaN.
inline uint16_t FloatToBf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float RoundToBf16(float f) { return Bf16ToFloat(FloatToBf16(f)); }

}  // namespace temper::engine
