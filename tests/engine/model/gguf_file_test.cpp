#include "engine/model/gguf_file.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "engine/model/gguf_bytes.h"

namespace temper::engine {
namespace {

using Catch::Matchers::Contains;

const std::string kFixture = std::string(TEMPER_TEST_DATA_DIR) + "/gguf/types.gguf";

using testing::GgufBytes;

Result<GgufFile> ParseBytes(const GgufBytes& b) { return GgufFile::Parse(b.bytes, "hostile.gguf"); }

// A refusal: DataLoss, naming the file and each of `parts` (the key or tensor, the offset, the problem).
void RequireRefused(const GgufBytes& b, std::initializer_list<std::string> parts) {
  Result<GgufFile> file = ParseBytes(b);
  REQUIRE_FALSE(file.ok());
  INFO(file.status().ToString());
  CHECK(file.status().code() == StatusCode::kDataLoss);
  CHECK_THAT(file.status().message(), Contains("hostile.gguf"));
  for (const std::string& part : parts) CHECK_THAT(file.status().message(), Contains(part));
}

TEST_CASE("GgufFile reads every value type and the tensors gguf-py wrote", "[gguf]") {
  Result<GgufFile> opened = GgufFile::Open(kFixture);
  REQUIRE(opened.ok());
  const GgufFile& f = *opened;
  CHECK(f.version() == 3);
  CHECK(f.alignment() == 32);
  CHECK(*f.GetString("general.architecture") == "temper-fixture");
  CHECK(*f.GetUint("fixture.u8") == 200);
  CHECK(f.Find("fixture.i8")->int_value == -100);
  CHECK(*f.GetUint("fixture.u16") == 60000);
  CHECK(f.Find("fixture.i16")->int_value == -30000);
  CHECK(*f.GetUint("fixture.u32") == 4000000000u);
  CHECK(f.Find("fixture.i32")->int_value == -2000000000);
  CHECK(*f.GetFloat("fixture.f32") == 0.15625);
  CHECK(*f.GetBool("fixture.bool"));
  CHECK(*f.GetString("fixture.string") == "héllo ▁ world");
  CHECK(*f.GetUint("fixture.u64") == (uint64_t{1} << 63) + 5);
  CHECK(f.Find("fixture.i64")->int_value == -(int64_t{1} << 62));
  CHECK(*f.GetFloat("fixture.f64") == -2.5e-300);
  Result<std::span<const std::string_view>> strings = f.GetStringArray("fixture.strings");
  REQUIRE(strings.ok());
  CHECK(std::vector<std::string_view>(strings->begin(), strings->end()) ==
        std::vector<std::string_view>{"a", "", "▁b", "<0x0A>"});
  CHECK(*f.GetI32Array("fixture.i32s") == std::vector<int32_t>{1, -2, 3});
  CHECK(*f.GetF32Array("fixture.f32s") == std::vector<float>{0.5f, -1.0f});
  CHECK(f.Find("fixture.bools")->element_type == GgufValueType::kBool);

  SECTION("typed reads name the key and its type when it does not fit") {
    Result<std::string_view> s = f.GetString("fixture.u32");
    REQUIRE_FALSE(s.ok());
    CHECK_THAT(s.status().message(), Contains("'fixture.u32'") && Contains("UINT32") && Contains("not a STRING"));
    CHECK(f.GetUint("fixture.i8").status().code() == StatusCode::kInvalidArgument);
    CHECK(f.GetUint("no.such.key").status().code() == StatusCode::kNotFound);
    CHECK_THAT(f.GetF32Array("fixture.i32s").status().message(), Contains("ARRAY of INT32"));
  }

  const std::vector<std::string> names = {"f32",  "f16",  "bf16", "q4_0", "q4_1", "q5_0",
                                          "q5_1", "q8_0", "q4_k", "q5_k", "q6_k"};
  REQUIRE(f.tensors().size() == names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    const GgufTensorInfo& t = f.tensors()[i];
    CHECK(t.name == names[i]);
    CHECK(t.dims == std::vector<int64_t>{512, 3});
    CHECK(t.elements == 1536);
    CHECK(f.FindTensor(names[i]) == &t);
    CHECK(f.TensorData(t).size() == t.bytes);
  }
}

TEST_CASE("GgufFile refuses every prefix of a good file that cuts into a field or a tensor", "[gguf]") {
  Result<GgufFile> whole = GgufFile::Open(kFixture);
  REQUIRE(whole.ok());
  // gguf-py pads the last tensor to the alignment too; a prefix may drop that padding.
  uint64_t end = 0;
  for (const GgufTensorInfo& t : whole->tensors()) end = std::max(end, whole->data_offset() + t.offset + t.bytes);
  std::vector<uint8_t> bytes;
  {
    Result<MappedFile> map = MappedFile::Open(kFixture);
    REQUIRE(map.ok());
    bytes.assign(map->bytes().begin(), map->bytes().end());
  }
  REQUIRE(end <= bytes.size());
  for (size_t n = 0; n < end; ++n) {
    Result<GgufFile> cut = GgufFile::Parse(std::span<const uint8_t>(bytes.data(), n), "cut.gguf");
    INFO("prefix of " << n << " bytes");
    REQUIRE_FALSE(cut.ok());
    CHECK(cut.status().code() == StatusCode::kDataLoss);
  }
}

TEST_CASE("GgufFile refuses hostile headers, naming the field and its offset", "[gguf]") {
  SECTION("magic, version, byte order") {
    GgufBytes magic;
    magic.bytes = {'G', 'G', 'M', 'L', 3, 0, 0, 0};
    RequireRefused(magic, {"magic"});
    GgufBytes v1;
    v1.Header(0, 0, 1);
    RequireRefused(v1, {"version at byte 4", "is 1"});
    GgufBytes big;
    big.Header(0, 0, 0x03000000);
    RequireRefused(big, {"big-endian"});
    GgufBytes v9;
    v9.Header(0, 0, 9);
    RequireRefused(v9, {"is 9"});
  }
  SECTION("counts larger than the file") {
    GgufBytes kvs;
    kvs.Header(0, uint64_t{1} << 60);
    RequireRefused(kvs, {"metadata count at byte 16", "1152921504606846976"});
    GgufBytes tensors;
    tensors.Header(uint64_t{1} << 62, 0);
    RequireRefused(tensors, {"tensor count at byte 8"});
  }
  SECTION("a string length past the end of the file") {
    GgufBytes b;
    b.Header(0, 1).Put<uint64_t>(~uint64_t{0}).Put<uint64_t>(0).Put<uint64_t>(0);
    RequireRefused(b, {"metadata entry 0's key at byte 24", "claims 18446744073709551615 bytes"});
    GgufBytes value;
    value.Header(0, 1).Str("general.name").Put<uint32_t>(8).Put<uint64_t>(1000).Str("short");
    RequireRefused(value, {"key 'general.name' at byte 48", "claims 1000 bytes"});
  }
  SECTION("unknown value types, arrays of arrays, bad bools") {
    GgufBytes type;
    type.Header(0, 1).Str("x.key").Put<uint32_t>(13).Put<uint32_t>(0);
    RequireRefused(type, {"key 'x.key' at byte 37", "unknown value type 13"});
    GgufBytes element;
    element.Header(0, 1).Str("x.arr").Put<uint32_t>(9).Put<uint32_t>(99).Put<uint64_t>(0);
    RequireRefused(element, {"key 'x.arr'", "unknown value type 99"});
    GgufBytes nested;
    nested.Header(0, 1).Str("x.arr").Put<uint32_t>(9).Put<uint32_t>(9).Put<uint64_t>(0);
    RequireRefused(nested, {"key 'x.arr' at byte 41", "array of arrays"});
    GgufBytes boolean;
    boolean.Header(0, 1).Str("x.flag").Put<uint32_t>(7).Put<uint8_t>(2);
    RequireRefused(boolean, {"key 'x.flag' at byte 42", "BOOL holding 2"});
  }
  SECTION("an array count past the end of the file") {
    GgufBytes numbers;
    numbers.Header(0, 1).Str("x.scores").Put<uint32_t>(9).Put<uint32_t>(6).Put<uint64_t>(uint64_t{1} << 62);
    RequireRefused(numbers, {"key 'x.scores' at byte 48", "4611686018427387904 FLOAT32 elements"});
    GgufBytes strings;
    strings.Header(0, 1).Str("x.tokens").Put<uint32_t>(9).Put<uint32_t>(8).Put<uint64_t>(3).Str("a").Str("b");
    RequireRefused(strings, {"key 'x.tokens'", "claims 3 strings"});
  }
  SECTION("a key given twice") {
    GgufBytes b;
    b.Header(0, 2).KvU32("a.b", 1).KvU32("a.b", 2);
    RequireRefused(b, {"key 'a.b' at byte 43 appears twice"});
  }
  SECTION("general.alignment that is not a u32 power of two") {
    GgufBytes three;
    three.Header(0, 1).KvU32("general.alignment", 3);
    RequireRefused(three, {"'general.alignment'", "is 3, not a power of two"});
    GgufBytes zero;
    zero.Header(0, 1).KvU32("general.alignment", 0);
    RequireRefused(zero, {"is 0, not a power of two"});
    GgufBytes wide;
    wide.Header(0, 1).Str("general.alignment").Put<uint32_t>(10).Put<uint64_t>(64);
    RequireRefused(wide, {"'general.alignment'", "UINT64, not a UINT32"});
  }
}

TEST_CASE("GgufFile refuses hostile tensor infos, naming the tensor and its offset", "[gguf]") {
  SECTION("a good file of two tensors parses") {
    GgufBytes b;
    b.Header(2, 0).Tensor("a", {32, 2}, 8, 0).Tensor("b", {4}, 0, 96).Data(112);
    Result<GgufFile> f = ParseBytes(b);
    REQUIRE(f.ok());
    CHECK(f->tensors()[0].bytes == 68);
    CHECK(f->data_offset() % 32 == 0);
  }
  SECTION("dimensions: none, too many, zero, overflowing, not whole blocks") {
    GgufBytes none;
    none.Header(1, 0).Tensor("t", {}, 0, 0).Data(32);
    RequireRefused(none, {"tensor 't' at byte 33", "0 dimensions"});
    GgufBytes five;
    five.Header(1, 0).Tensor("t", {1, 1, 1, 1, 1}, 0, 0).Data(32);
    RequireRefused(five, {"tensor 't'", "5 dimensions"});
    GgufBytes zero;
    zero.Header(1, 0).Tensor("t", {4, 0}, 0, 0).Data(32);
    RequireRefused(zero, {"tensor 't' at byte 45", "dimension 1 = 0"});
    GgufBytes overflow;
    overflow.Header(1, 0).Tensor("t", {uint64_t{1} << 32, uint64_t{1} << 32}, 0, 0).Data(32);
    RequireRefused(overflow, {"tensor 't' at byte 45", "product overflows"});
    GgufBytes bytes_overflow;
    bytes_overflow.Header(1, 0).Tensor("t", {uint64_t{1} << 62}, 0, 0).Data(32);
    RequireRefused(bytes_overflow, {"tensor 't' at byte 33", "byte size that overflows 64 bits"});
    GgufBytes blocks;
    blocks.Header(1, 0).Tensor("t", {48, 2}, 12, 0).Data(1024);
    RequireRefused(blocks, {"tensor 't' at byte 33", "first dimension 48", "Q4_K's block of 256"});
  }
  SECTION("an unknown tensor type") {
    GgufBytes b;
    b.Header(1, 0).Tensor("w", {32}, 4, 0).Data(64);
    RequireRefused(b, {"tensor 'w' at byte 45", "unknown ggml type 4"});
    GgufBytes big;
    big.Header(1, 0).Tensor("w", {32}, 1000, 0).Data(64);
    RequireRefused(big, {"unknown ggml type 1000"});
  }
  SECTION("offsets misaligned, outside the data section, overlapping") {
    GgufBytes misaligned;
    misaligned.Header(1, 0).Tensor("w", {4}, 0, 8).Data(64);
    RequireRefused(misaligned, {"tensor 'w' at byte 49", "offset 8, not a multiple of the alignment 32"});
    GgufBytes outside;
    outside.Header(1, 0).Tensor("w", {16}, 0, 32).Data(64);
    RequireRefused(outside, {"tensor 'w' at byte 24", "64 bytes at data offset 32", "data section's 64 bytes"});
    GgufBytes huge_offset;
    huge_offset.Header(1, 0).Tensor("w", {4}, 0, ~uint64_t{0} - 31).Data(64);
    RequireRefused(huge_offset, {"tensor 'w'", "past the data section"});
    GgufBytes overlap;
    overlap.Header(2, 0).Tensor("a", {16}, 0, 0).Tensor("b", {4}, 0, 32).Data(128);
    RequireRefused(overlap, {"tensor 'b' at byte", "overlaps tensor 'a' (64 bytes at 0)"});
    GgufBytes no_data;
    no_data.Header(1, 0).Tensor("w", {4}, 0, 0);
    RequireRefused(no_data, {"data section at byte 57", "past the end of the file"});
  }
  SECTION("a tensor name given twice") {
    GgufBytes b;
    b.Header(2, 0).Tensor("w", {4}, 0, 0).Tensor("w", {4}, 0, 32).Data(64);
    RequireRefused(b, {"tensor 'w' at byte 57 appears twice"});
  }
  SECTION("a custom alignment applies to offsets and the data section") {
    GgufBytes b;
    b.Header(1, 1).KvU32("general.alignment", 64).Tensor("w", {4}, 0, 0).Data(16, 64);
    Result<GgufFile> f = ParseBytes(b);
    REQUIRE(f.ok());
    CHECK(f->data_offset() % 64 == 0);
    GgufBytes bad;
    bad.Header(1, 1).KvU32("general.alignment", 64).Tensor("w", {4}, 0, 32).Data(128, 64);
    RequireRefused(bad, {"offset 32, not a multiple of the alignment 64"});
  }
}

}  // namespace
}  // namespace temper::engine
