#include "engine/model/gguf_dequant.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "engine/model/bf16.h"
#include "engine/model/gguf_file.h"
#include "engine/model/safetensors.h"

namespace temper::engine {
namespace {

const std::string kDir = std::string(TEMPER_TEST_DATA_DIR) + "/gguf";

// tests/data/gguf/types.gguf holds one tensor of each type; types-expected.safetensors holds what
// gguf-py's gguf.quants.dequantize makes of each (tools/reference/make_gguf_fixtures.py).
TEST_CASE("every GGUF type dequantizes bit for bit as gguf-py does", "[gguf]") {
  Result<GgufFile> file = GgufFile::Open(kDir + "/types.gguf");
  REQUIRE(file.ok());
  Result<SafetensorsFile> expected = SafetensorsFile::Open(kDir + "/types-expected.safetensors");
  REQUIRE(expected.ok());
  REQUIRE(file->tensors().size() == 11);
  for (const GgufTensorInfo& t : file->tensors()) {
    INFO("tensor " << t.name);
    const TensorInfo* want_info = expected->Find(t.name);
    REQUIRE(want_info != nullptr);
    REQUIRE(want_info->dtype == DType::kF32);
    REQUIRE(want_info->NumElements() == t.elements);
    std::vector<float> want(t.elements);
    std::memcpy(want.data(), expected->Data(*want_info).data(), want.size() * 4);

    std::vector<float> got(t.elements);
    REQUIRE(DequantizeToF32(t.type, file->TensorData(t), got).ok());
    int differing = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      if (std::bit_cast<uint32_t>(got[i]) != std::bit_cast<uint32_t>(want[i])) {
        if (differing++ < 3) UNSCOPED_INFO("value " << i << ": " << got[i] << " vs gguf-py " << want[i]);
      }
    }
    CHECK(differing == 0);

    std::vector<uint16_t> bf16(t.elements);
    REQUIRE(DequantizeToBf16(t.type, file->TensorData(t), bf16).ok());
    std::vector<uint16_t> offset(t.elements);
    REQUIRE(DequantizeToBf16(t.type, file->TensorData(t), offset, 1.0f).ok());
    int bf16_differing = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      if (bf16[i] != FloatToBf16(want[i]) || offset[i] != FloatToBf16(want[i] - 1.0f)) ++bf16_differing;
    }
    CHECK(bf16_differing == 0);
  }
}

TEST_CASE("dequantization refuses types it does not know and sizes that disagree", "[gguf]") {
  std::vector<uint8_t> bytes(144);
  std::vector<float> out(256);
  Status unknown = DequantizeToF32(GgmlType::kIQ2_XXS, bytes, out);
  CHECK(unknown.code() == StatusCode::kUnimplemented);
  CHECK_THAT(unknown.message(), Catch::Matchers::Contains("IQ2_XXS"));
  CHECK(DequantizeToF32(GgmlType::kQ4_K, std::span<const uint8_t>(bytes).first(143), out).code() ==
        StatusCode::kInvalidArgument);
  std::vector<float> partial(255);
  CHECK(DequantizeToF32(GgmlType::kQ4_K, bytes, partial).code() == StatusCode::kInvalidArgument);
  CHECK(DequantizeToF32(GgmlType::kQ4_K, bytes, out).ok());
}

TEST_CASE("HalfToFloat is exact on every half", "[gguf]") {
  // Every finite half is m * 2^e with an 11-bit m: check against ldexp, and the specials by bits.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint32_t exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
    const float sign = (h & 0x8000) ? -1.0f : 1.0f;
    const float got = HalfToFloat(static_cast<uint16_t>(h));
    if (exponent == 0x1f) {
      CHECK((mantissa == 0 ? std::isinf(got) : std::isnan(got)));
      continue;
    }
    const float want = exponent == 0 ? sign * std::ldexp(static_cast<float>(mantissa), -24)
                                     : sign * std::ldexp(static_cast<float>(mantissa | 0x400), int(exponent) - 25);
    if (std::bit_cast<uint32_t>(got) != std::bit_cast<uint32_t>(want))
      FAIL("half " << h << ": " << got << " vs " << want);
  }
}

}  // namespace
}  // namespace temper::engine
