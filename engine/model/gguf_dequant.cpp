#include "engine/model/gguf_dequant.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "engine/model/bf16.h"

namespace temper::engine {
namespace {

// Block sizes and layouts: ggml-common.h's block_* structs.
constexpr int kQK = 32;    // QK4_0 = QK4_1 = QK5_0 = QK5_1 = QK8_0
constexpr int kQKK = 256;  // QK_K

uint16_t LoadU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

float LoadHalf(const uint8_t* p) { return HalfToFloat(LoadU16(p)); }

// block_q4_0 {half d; uint8 qs[16]}: low nibbles are values 0..15, high nibbles 16..31.
void Q4_0(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < kQK / 2; ++j) {
    const int x0 = (qs[j] & 0x0F) - 8;
    const int x1 = (qs[j] >> 4) - 8;
    y[j] = x0 * d;
    y[j + kQK / 2] = x1 * d;
  }
}

// block_q4_1 {half d; half m; uint8 qs[16]}.
void Q4_1(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  const float m = LoadHalf(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < kQK / 2; ++j) {
    const int x0 = qs[j] & 0x0F;
    const int x1 = qs[j] >> 4;
    y[j] = x0 * d + m;
    y[j + kQK / 2] = x1 * d + m;
  }
}

// block_q5_0 {half d; uint8 qh[4]; uint8 qs[16]}: qh's bit j is value j's fifth bit.
void Q5_0(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  uint32_t qh;
  std::memcpy(&qh, b + 2, 4);
  const uint8_t* qs = b + 6;
  for (int j = 0; j < kQK / 2; ++j) {
    const uint8_t xh_0 = ((qh >> (j + 0)) << 4) & 0x10;
    const uint8_t xh_1 = ((qh >> (j + 12))) & 0x10;
    const int32_t x0 = ((qs[j] & 0x0F) | xh_0) - 16;
    const int32_t x1 = ((qs[j] >> 4) | xh_1) - 16;
    y[j] = x0 * d;
    y[j + kQK / 2] = x1 * d;
  }
}

// block_q5_1 {half d; half m; uint8 qh[4]; uint8 qs[16]}.
void Q5_1(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  const float m = LoadHalf(b + 2);
  uint32_t qh;
  std::memcpy(&qh, b + 4, 4);
  const uint8_t* qs = b + 8;
  for (int j = 0; j < kQK / 2; ++j) {
    const uint8_t xh_0 = ((qh >> (j + 0)) << 4) & 0x10;
    const uint8_t xh_1 = ((qh >> (j + 12))) & 0x10;
    const int x0 = (qs[j] & 0x0F) | xh_0;
    const int x1 = (qs[j] >> 4) | xh_1;
    y[j] = x0 * d + m;
    y[j + kQK / 2] = x1 * d + m;
  }
}

// block_q8_0 {half d; int8 qs[32]}.
void Q8_0(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  for (int j = 0; j < kQK; ++j) y[j] = static_cast<int8_t>(b[2 + j]) * d;
}

// The 6-bit scale and min of sub-block j of a Q4_K/Q5_K block's 12 packed bytes (get_scale_min_k4).
void ScaleMinK4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4);
  }
}

// block_q4_K {half d; half dmin; uint8 scales[12]; uint8 qs[128]}: 8 sub-blocks of 32.
void Q4_K(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  const float min = LoadHalf(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* q = b + 16;
  int is = 0;
  uint8_t sc, m;
  for (int j = 0; j < kQKK; j += 64) {
    ScaleMinK4(is + 0, scales, &sc, &m);
    const float d1 = d * sc;
    const float m1 = min * m;
    ScaleMinK4(is + 1, scales, &sc, &m);
    const float d2 = d * sc;
    const float m2 = min * m;
    for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
    q += 32;
    is += 2;
  }
}

// block_q5_K {half d; half dmin; uint8 scales[12]; uint8 qh[32]; uint8 qs[128]}.
void Q5_K(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  const float min = LoadHalf(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* ql = b + 48;
  int is = 0;
  uint8_t sc, m;
  uint8_t u1 = 1, u2 = 2;
  for (int j = 0; j < kQKK; j += 64) {
    ScaleMinK4(is + 0, scales, &sc, &m);
    const float d1 = d * sc;
    const float m1 = min * m;
    ScaleMinK4(is + 1, scales, &sc, &m);
    const float d2 = d * sc;
    const float m2 = min * m;
    for (int l = 0; l < 32; ++l) *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
    ql += 32;
    is += 2;
    u1 <<= 2;
    u2 <<= 2;
  }
}

// block_q6_K {uint8 ql[128]; uint8 qh[64]; int8 scales[16]; half d}.
void Q6_K(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = LoadHalf(b + 208);
  for (int n = 0; n < kQKK; n += 128) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int8_t q1 = static_cast<int8_t>((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int8_t q2 = static_cast<int8_t>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int8_t q3 = static_cast<int8_t>((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int8_t q4 = static_cast<int8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l + 0] = d * sc[is + 0] * q1;
      y[l + 32] = d * sc[is + 2] * q2;
      y[l + 64] = d * sc[is + 4] * q3;
      y[l + 96] = d * sc[is + 6] * q4;
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

using BlockFn = void (*)(const uint8_t*, float*);

BlockFn BlockDequantizer(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0:
      return Q4_0;
    case GgmlType::kQ4_1:
      return Q4_1;
    case GgmlType::kQ5_0:
      return Q5_0;
    case GgmlType::kQ5_1:
      return Q5_1;
    case GgmlType::kQ8_0:
      return Q8_0;
    case GgmlType::kQ4_K:
      return Q4_K;
    case GgmlType::kQ5_K:
      return Q5_K;
    case GgmlType::kQ6_K:
      return Q6_K;
    default:
      return nullptr;
  }
}

}  // namespace

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in fp32.
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

bool CanDequantize(GgmlType type) {
  return type == GgmlType::kF32 || type == GgmlType::kF16 || type == GgmlType::kBF16 ||
         BlockDequantizer(type) != nullptr;
}

Status DequantizeToF32(GgmlType type, std::span<const uint8_t> data, std::span<float> out) {
  const std::optional<GgmlTypeTraits> traits = GgmlTypeInfo(static_cast<uint32_t>(type));
  if (!traits || !CanDequantize(type)) {
    return Status::Unimplemented(
        fmt::format("cannot dequantize ggml type {}", traits ? traits->name : std::string_view("?")));
  }
  const uint64_t n = out.size();
  if (n % traits->block_elements != 0) {
    return Status::InvalidArgument(
        fmt::format("{} values are not a whole number of {} blocks of {}", n, traits->name, traits->block_elements));
  }
  const uint64_t blocks = n / traits->block_elements;
  if (data.size() != blocks * traits->block_bytes) {
    return Status::InvalidArgument(fmt::format("{} values of {} take {} bytes, not {}", n, traits->name,
                                               blocks * traits->block_bytes, data.size()));
  }
  const uint8_t* p = data.data();
  float* y = out.data();
  switch (type) {
    case GgmlType::kF32:
      std::memcpy(y, p, n * 4);
      return Status::OK();
    case GgmlType::kF16:
      for (uint64_t i = 0; i < n; ++i) y[i] = LoadHalf(p + 2 * i);
      return Status::OK();
    case GgmlType::kBF16:
      for (uint64_t i = 0; i < n; ++i) y[i] = Bf16ToFloat(LoadU16(p + 2 * i));
      return Status::OK();
    default:
      break;
  }
  const BlockFn fn = BlockDequantizer(type);
  for (uint64_t i = 0; i < blocks; ++i) fn(p + i * traits->block_bytes, y + i * traits->block_elements);
  return Status::OK();
}

Status DequantizeToBf16(GgmlType type, std::span<const uint8_t> data, std::span<uint16_t> out, float subtract) {
  const std::optional<GgmlTypeTraits> traits = GgmlTypeInfo(static_cast<uint32_t>(type));
  if (!traits || !CanDequantize(type)) {
    return Status::Unimplemented(
        fmt::format("cannot dequantize ggml type {}", traits ? traits->name : std::string_view("?")));
  }
  const uint64_t n = out.size();
  if (n % traits->block_elements != 0 || data.size() != n / traits->block_elements * traits->block_bytes) {
    return Status::InvalidArgument(fmt::format("{} bytes do not hold {} values of {}", data.size(), n, traits->name));
  }
  // 64 K values at a time (a multiple of every block size): 256 KiB of fp32, in cache.
  constexpr uint64_t kChunk = 1 << 16;
  std::vector<float> buffer(std::min<uint64_t>(kChunk, n));
  const uint64_t chunk_bytes = kChunk / traits->block_elements * traits->block_bytes;
  for (uint64_t begin = 0, byte = 0; begin < n; begin += kChunk, byte += chunk_bytes) {
    const uint64_t count = std::min<uint64_t>(kChunk, n - begin);
    const uint64_t bytes = count / traits->block_elements * traits->block_bytes;
    std::span<float> values(buffer.data(), count);
    TEMPER_RETURN_IF_ERROR(DequantizeToF32(type, data.subspan(byte, bytes), values));
    for (uint64_t i = 0; i < count; ++i) out[begin + i] = FloatToBf16(values[i] - subtract);
  }
  return Status::OK();
}

}  // namespace temper::engine
