// Safetensors parsing: a valid file round-trips, and each kind of malformed file gets its own
// DataLoss error naming the file and the tensor.
#include <cstring>
#include <string>

#include <catch2/catch.hpp>

#include "engine/model/safetensors.h"
#include "engine/temp_dir.h"

namespace temper::engine::testing {
namespace {

// A file made of an explicit header text and `data_bytes` bytes of data.
std::string RawFile(const std::string& header, size_t data_bytes, uint64_t claimed_length = UINT64_MAX) {
  const uint64_t n = claimed_length == UINT64_MAX ? header.size() : claimed_length;
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(n >> (8 * i));
  out += header;
  out.append(data_bytes, '\x01');
  return out;
}

Status ParseError(const std::string& file) {
  auto bytes = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(file.data()), file.size());
  auto h = ParseSafetensorsHeader(bytes, "bad.safetensors");
  REQUIRE_FALSE(h.ok());
  CHECK(h.status().code() == StatusCode::kDataLoss);
  CHECK(h.status().message().rfind("bad.safetensors: ", 0) == 0);
  return h.status();
}

void ExpectError(const std::string& file, const std::string& needle) {
  const Status s = ParseError(file);
  INFO(s.ToString());
  CHECK(s.message().find(needle) != std::string::npos);
}

TEST_CASE("safetensors round-trips through WriteSafetensors and SafetensorsFile", "[engine][safetensors]") {
  TempDir dir;
  const float f[6] = {1, 2, 3, 4, 5, 6};
  const int32_t ids[3] = {7, 8, 9};
  const TensorToWrite tensors[] = {
      {"a", DType::kF32, {2, 3}, {reinterpret_cast<const uint8_t*>(f), sizeof f}},
      {"b.ids", DType::kI32, {3}, {reinterpret_cast<const uint8_t*>(ids), sizeof ids}},
      {"empty", DType::kBF16, {0, 4}, {}},
  };
  const auto path = dir.path() / "t.safetensors";
  REQUIRE(WriteSafetensors(path, tensors, {{"format", "pt"}}).ok());
  auto file = SafetensorsFile::Open(path);
  REQUIRE(file.ok());
  CHECK(file->header().data_offset % 8 == 0);
  CHECK(file->header().metadata.at("format") == "pt");
  const TensorInfo* a = file->Find("a");
  REQUIRE(a != nullptr);
  CHECK(a->shape == std::vector<int64_t>{2, 3});
  CHECK(a->dtype == DType::kF32);
  CHECK(std::memcmp(file->Data(*a).data(), f, sizeof f) == 0);
  const TensorInfo* b = file->Find("b.ids");
  REQUIRE(b != nullptr);
  CHECK(std::memcmp(file->Data(*b).data(), ids, sizeof ids) == 0);
  CHECK(file->Find("empty")->NumElements() == 0);
  CHECK(file->Find("missing") == nullptr);

  const TensorToWrite wrong[] = {{"w", DType::kF32, {4}, {reinterpret_cast<const uint8_t*>(f), 8}}};
  CHECK(WriteSafetensors(dir.path() / "w.safetensors", wrong).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("safetensors names each malformed header", "[engine][safetensors]") {
  const std::string good = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  {
    auto ok = RawFile(good, 8);
    auto h = ParseSafetensorsHeader({reinterpret_cast<const uint8_t*>(ok.data()), ok.size()}, "ok");
    REQUIRE(h.ok());
    CHECK(h->tensors.size() == 1);
  }
  SECTION("truncated header") { ExpectError(std::string("\x10\x00\x00", 3), "truncated header"); }
  SECTION("header length past EOF") { ExpectError(RawFile(good, 8, 1000), "runs past the end of the file"); }
  SECTION("huge header length") { ExpectError(RawFile(good, 8, UINT64_MAX - 1), "runs past the end of the file"); }
  SECTION("bad JSON") { ExpectError(RawFile(R"({"x":{"dtype":"F32",)", 8), "bad JSON"); }
  SECTION("not an object") { ExpectError(RawFile("[1,2]", 0), "not an object"); }
  SECTION("unknown dtype") {
    ExpectError(RawFile(R"({"x":{"dtype":"F12","shape":[2],"data_offsets":[0,8]}})", 8),
                "tensor 'x': unknown dtype 'F12'");
  }
  SECTION("missing dtype") { ExpectError(RawFile(R"({"x":{"shape":[2],"data_offsets":[0,8]}})", 8), "'dtype'"); }
  SECTION("negative dimension") {
    ExpectError(RawFile(R"({"x":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8), "not a non-negative integer");
  }
  SECTION("offsets out of range") {
    ExpectError(RawFile(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 8), "out of range");
  }
  SECTION("begin after end") {
    ExpectError(RawFile(R"({"x":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})", 8), "begin after end");
  }
  SECTION("size disagrees with shape") {
    ExpectError(RawFile(R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8), "needs 12");
  }
  SECTION("element count overflows") {
    ExpectError(RawFile(R"({"x":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8),
                "overflows");
  }
  SECTION("byte size overflows") {
    ExpectError(RawFile(R"({"x":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,8]}})", 8), "overflows");
  }
  SECTION("overlapping tensors") {
    ExpectError(RawFile(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                        R"("y":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                        12),
                "tensors 'x' [0, 8] and 'y' [4, 12] overlap");
  }
  SECTION("bad data_offsets") {
    ExpectError(RawFile(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", 8), "'data_offsets'");
  }
  SECTION("metadata not strings") {
    ExpectError(RawFile(R"({"__metadata__":{"a":1},"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8),
                "'__metadata__'");
  }
}

TEST_CASE("every truncation of a valid file is rejected cleanly", "[engine][safetensors]") {
  const std::string file = RawFile(R"({"x":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,8]},)"
                                   R"("y":{"dtype":"U8","shape":[3],"data_offsets":[8,11]}})",
                                   11);
  for (size_t n = 0; n < file.size(); ++n) {
    auto h = ParseSafetensorsHeader({reinterpret_cast<const uint8_t*>(file.data()), n}, "cut");
    INFO("prefix of " << n << " bytes");
    CHECK(h.status().code() == StatusCode::kDataLoss);
  }
}

TEST_CASE("opening a missing file is an IOError naming it", "[engine][safetensors]") {
  auto f = SafetensorsFile::Open("/nonexistent/model.safetensors");
  CHECK(f.status().code() == StatusCode::kIOError);
  CHECK(f.status().message().find("/nonexistent/model.safetensors") != std::string::npos);
}

}  // namespace
}  // namespace temper::engine::testing
