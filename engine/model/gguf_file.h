// GgufFile: a GGUF file (llama.cpp's model format, versions 2 and 3), read through a memory map.
//
// Layout (all little-endian): "GGUF", u32 version, u64 tensor count, u64 metadata count; then each
// metadata entry (string key, u32 value type, value); then each tensor's info (string name, u32 dim
// count, u64 dims innermost first, u32 ggml type, u64 offset into the data section); then padding to
// `general.alignment` (default 32); then the data section. A string is a u64 byte length and the
// bytes; an array is a u32 element type, a u64 count and the elements.
//
// The file is untrusted input. Every count and length is checked against the bytes left before it
// is used (nothing is reserved from a count alone), every tensor's element count and byte size are
// computed with overflow guards, and each tensor must lie inside the data section, start at a
// multiple of the alignment and overlap no other. Each refusal is a DataLoss naming the file, the
// key or tensor concerned and the byte offset where the bad field starts. Refused too, as llama.cpp's
// gguf.cpp refuses them: version 1 and big-endian files, value types and ggml tensor types GGUF does
// not define, arrays of arrays, duplicate keys and tensor names, a `general.alignment` that is not a
// u32 power of two, more than 4 dimensions, and a first dimension that is not a whole number of
// the type's blocks.
//
// Thread safety: immutable after Open; any number of threads may read it. Every string_view and
// span it hands out points into the map and is valid while the GgufFile lives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "engine/model/safetensors.h"

namespace temper::engine {

enum class GgufValueType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

std::string_view GgufValueTypeName(GgufValueType type);  // "UINT32", as gguf-py spells it

// ggml's tensor types (ggml.h's enum ggml_type; gguf-py's GGMLQuantizationType). Only those with a
// known block layout are listed; any other number is refused when the file is opened.
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
};

struct GgmlTypeTraits {
  std::string_view name;  // "Q4_K"
  int64_t block_elements = 0;
  int64_t block_bytes = 0;
};
// nullopt for a number ggml does not define (or this reader does not know the layout of).
std::optional<GgmlTypeTraits> GgmlTypeInfo(uint32_t type);

// One metadata value. Scalars are held by value; strings and numeric arrays point into the map.
struct GgufValue {
  GgufValueType type = GgufValueType::kU8;
  uint64_t offset = 0;            // file offset of the value (after the key and its type)
  uint64_t uint_value = 0;        // kU8, kU16, kU32, kU64, kBool
  int64_t int_value = 0;          // kI8, kI16, kI32, kI64
  double float_value = 0;         // kF32, kF64
  std::string_view string_value;  // kString
  // kArray: the element type, the count and (numeric or bool elements) their little-endian bytes,
  // or (string elements) each string.
  GgufValueType element_type = GgufValueType::kU8;
  uint64_t count = 0;
  std::span<const uint8_t> array_bytes;
  std::vector<std::string_view> strings;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> dims;  // innermost first, as GGUF stores them (HF's shape reversed)
  GgmlType type = GgmlType::kF32;
  uint64_t offset = 0;       // relative to the data section
  uint64_t info_offset = 0;  // file offset of the tensor's info, for errors
  int64_t elements = 0;
  uint64_t bytes = 0;
};

class GgufFile {
 public:
  // Maps and validates `path`. Errors: IOError when it cannot be read; DataLoss for every
  // malformed file (see the header comment), naming the path, the key or tensor and the offset.
  static Result<GgufFile> Open(const std::filesystem::path& path);
  // The same checks over bytes already in memory (tests, the fuzz target); `name` labels errors.
  // `bytes` must outlive the result.
  static Result<GgufFile> Parse(std::span<const uint8_t> bytes, std::string_view name);

  GgufFile(GgufFile&&) noexcept = default;
  GgufFile& operator=(GgufFile&&) noexcept = default;
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& name() const { return name_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  const std::map<std::string, GgufValue, std::less<>>& metadata() const { return metadata_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }

  const GgufValue* Find(std::string_view key) const;
  const GgufTensorInfo* FindTensor(std::string_view name) const;
  std::span<const uint8_t> TensorData(const GgufTensorInfo& tensor) const;

  // Typed reads of one key. NotFound naming the key when absent; InvalidArgument naming the key,
  // its type and its offset when the type does not fit (GetUint takes any unsigned integer type
  // and non-negative signed ones; GetFloat takes F32 and F64).
  Result<uint64_t> GetUint(std::string_view key) const;
  Result<double> GetFloat(std::string_view key) const;
  Result<bool> GetBool(std::string_view key) const;
  Result<std::string_view> GetString(std::string_view key) const;
  Result<std::span<const std::string_view>> GetStringArray(std::string_view key) const;
  Result<std::vector<float>> GetF32Array(std::string_view key) const;
  // Any integer element type, each value checked to fit an int32.
  Result<std::vector<int32_t>> GetI32Array(std::string_view key) const;

 private:
  GgufFile() = default;
  std::string name_;
  std::optional<MappedFile> map_;
  std::span<const uint8_t> bytes_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::map<std::string, GgufValue, std::less<>> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
  friend class GgufParser;
};

}  // namespace temper::engine
