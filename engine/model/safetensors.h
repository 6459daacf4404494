// Safetensors: the checkpoint format of Hugging Face models, read through a memory map.
//
// Layout: an 8-byte little-endian header length N, N bytes of JSON mapping each tensor name to
// {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the byte after the
// header) plus an optional "__metadata__" string map, then the data. The file is untrusted input:
// every size is checked with overflow guards, and each malformed file gets a DataLoss error that
// names the file, the tensor and the problem (truncated header, header length past EOF, bad JSON,
// unknown dtype, offsets out of range, overlapping tensors, byte size disagreeing with the shape).
//
// Thread safety: a parsed header and an open SafetensorsFile are immutable; any number of threads
// may read them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace temper::engine {

enum class DType { kBool, kU8, kI8, kI16, kU16, kF16, kBF16, kI32, kU32, kF32, kF64, kI64, kU64, kF8E4M3, kF8E5M2 };

std::string_view DTypeName(DType dtype);  // "BF16", as safetensors spells it
size_t DTypeSize(DType dtype);            // bytes per element

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offsets relative to the start of the data section
  uint64_t end = 0;
  int64_t NumElements() const;  // product of shape; fits (checked by the parser)
};

struct SafetensorsHeader {
  uint64_t data_offset = 0;         // 8 + N: where the data section starts in the file
  std::vector<TensorInfo> tensors;  // in header order
  std::map<std::string, std::string> metadata;
};

// Parses and validates the header of a whole safetensors file held in `file` (its full contents,
// so that offsets can be checked against the real size). `file_name` only labels errors.
// Errors: DataLoss for every malformed input. Never reads outside `file`.
Result<SafetensorsHeader> ParseSafetensorsHeader(std::span<const uint8_t> file, std::string_view file_name);

// A read-only memory map of a whole file. Movable, not copyable; unmaps on destruction.
class MappedFile {
 public:
  static Result<MappedFile> Open(const std::filesystem::path& path);
  // `size` zeroed bytes of private anonymous memory that the caller fills through mutable_bytes()
  // (a model dequantized from a GGUF), then hands to a SafetensorsFile like a file's map; pages are
  // only backed once written. ResourceExhausted when the memory cannot be mapped.
  static Result<MappedFile> Anonymous(size_t size);
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  // The bytes of an Anonymous map, writable; empty for a file's (read-only) map.
  std::span<uint8_t> mutable_bytes() {
    return writable_ ? std::span<uint8_t>(const_cast<uint8_t*>(data_), size_) : std::span<uint8_t>();
  }

 private:
  MappedFile(const uint8_t* data, size_t size, bool writable = false) : data_(data), size_(size), writable_(writable) {}
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool writable_ = false;
};

// One memory-mapped safetensors file with its validated header.
class SafetensorsFile {
 public:
  static Result<SafetensorsFile> Open(const std::filesystem::path& path);
  // Tensors already in memory: `tensors`' begin/end index `map` directly (there is no header).
  // `label` stands for the path in errors. DataLoss naming the tensor when one lies outside the
  // map or its byte size disagrees with its shape and dtype.
  static Result<SafetensorsFile> FromMemory(std::filesystem::path label, MappedFile map,
                                            std::vector<TensorInfo> tensors);

  const std::filesystem::path& path() const { return path_; }
  const SafetensorsHeader& header() const { return header_; }
  // nullptr when absent.
  const TensorInfo* Find(std::string_view name) const;
  // The tensor's bytes inside the map (valid while this object lives).
  std::span<const uint8_t> Data(const TensorInfo& tensor) const;

 private:
  SafetensorsFile(std::filesystem::path path, MappedFile map, SafetensorsHeader header);
  std::filesystem::path path_;
  MappedFile map_;
  SafetensorsHeader header_;
  std::map<std::string, size_t, std::less<>> index_;
};

// A tensor to write: `data` holds exactly NumElements(shape) * DTypeSize(dtype) bytes.
struct TensorToWrite {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::span<const uint8_t> data;
};

// Writes a safetensors file (header padded with spaces to 8 bytes, tensors in the given order).
// Errors: InvalidArgument if a tensor's data size disagrees with its shape; IOError on write.
Status WriteSafetensors(const std::filesystem::path& path, std::span<const TensorToWrite> tensors,
                        const std::map<std::string, std::string>& metadata = {});

}  // namespace temper::engine
