#include "engine/model/gguf_file.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <utility>

#include <fmt/format.h>

namespace temper::engine {

static_assert(std::endian::native == std::endian::little,
              "GGUF is little-endian; this reader copies bytes as they are");

namespace {

constexpr uint32_t kMaxDims = 4;  // GGML_MAX_DIMS

// Quotes a name from the file for an error message, cut short so a hostile file cannot make errors huge.
std::string Quote(std::string_view s) {
  constexpr size_t kMax = 64;
  if (s.size() <= kMax) return fmt::format("'{}'", s);
  return fmt::format("'{}...' ({} bytes)", s.substr(0, kMax), s.size());
}

size_t ScalarSize(GgufValueType type) {
  switch (type) {
    case GgufValueType::kU8:
    case GgufValueType::kI8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kU16:
    case GgufValueType::kI16:
      return 2;
    case GgufValueType::kU32:
    case GgufValueType::kI32:
    case GgufValueType::kF32:
      return 4;
    case GgufValueType::kU64:
    case GgufValueType::kI64:
    case GgufValueType::kF64:
      return 8;
    case GgufValueType::kString:
    case GgufValueType::kArray:
      return 0;
  }
  return 0;
}

bool KnownValueType(uint32_t t) { return t <= static_cast<uint32_t>(GgufValueType::kF64); }

}  // namespace

std::string_view GgufValueTypeName(GgufValueType type) {
  switch (type) {
    case GgufValueType::kU8:
      return "UINT8";
    case GgufValueType::kI8:
      return "INT8";
    case GgufValueType::kU16:
      return "UINT16";
    case GgufValueType::kI16:
      return "INT16";
    case GgufValueType::kU32:
      return "UINT32";
    case GgufValueType::kI32:
      return "INT32";
    case GgufValueType::kF32:
      return "FLOAT32";
    case GgufValueType::kBool:
      return "BOOL";
    case GgufValueType::kString:
      return "STRING";
    case GgufValueType::kArray:
      return "ARRAY";
    case GgufValueType::kU64:
      return "UINT64";
    case GgufValueType::kI64:
      return "INT64";
    case GgufValueType::kF64:
      return "FLOAT64";
  }
  return "?";
}

std::optional<GgmlTypeTraits> GgmlTypeInfo(uint32_t type) {
  // Block layouts from ggml's type_traits (ggml/src/ggml.c), as gguf-py's GGML_QUANT_SIZES lists them.
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kF32:
      return GgmlTypeTraits{"F32", 1, 4};
    case GgmlType::kF16:
      return GgmlTypeTraits{"F16", 1, 2};
    case GgmlType::kQ4_0:
      return GgmlTypeTraits{"Q4_0", 32, 18};
    case GgmlType::kQ4_1:
      return GgmlTypeTraits{"Q4_1", 32, 20};
    case GgmlType::kQ5_0:
      return GgmlTypeTraits{"Q5_0", 32, 22};
    case GgmlType::kQ5_1:
      return GgmlTypeTraits{"Q5_1", 32, 24};
    case GgmlType::kQ8_0:
      return GgmlTypeTraits{"Q8_0", 32, 34};
    case GgmlType::kQ8_1:
      return GgmlTypeTraits{"Q8_1", 32, 40};
    case GgmlType::kQ2_K:
      return GgmlTypeTraits{"Q2_K", 256, 84};
    case GgmlType::kQ3_K:
      return GgmlTypeTraits{"Q3_K", 256, 110};
    case GgmlType::kQ4_K:
      return GgmlTypeTraits{"Q4_K", 256, 144};
    case GgmlType::kQ5_K:
      return GgmlTypeTraits{"Q5_K", 256, 176};
    case GgmlType::kQ6_K:
      return GgmlTypeTraits{"Q6_K", 256, 210};
    case GgmlType::kQ8_K:
      return GgmlTypeTraits{"Q8_K", 256, 292};
    case GgmlType::kIQ2_XXS:
      return GgmlTypeTraits{"IQ2_XXS", 256, 66};
    case GgmlType::kIQ2_XS:
      return GgmlTypeTraits{"IQ2_XS", 256, 74};
    case GgmlType::kIQ3_XXS:
      return GgmlTypeTraits{"IQ3_XXS", 256, 98};
    case GgmlType::kIQ1_S:
      return GgmlTypeTraits{"IQ1_S", 256, 50};
    case GgmlType::kIQ4_NL:
      return GgmlTypeTraits{"IQ4_NL", 32, 18};
    case GgmlType::kIQ3_S:
      return GgmlTypeTraits{"IQ3_S", 256, 110};
    case GgmlType::kIQ2_S:
      return GgmlTypeTraits{"IQ2_S", 256, 82};
    case GgmlType::kIQ4_XS:
      return GgmlTypeTraits{"IQ4_XS", 256, 136};
    case GgmlType::kI8:
      return GgmlTypeTraits{"I8", 1, 1};
    case GgmlType::kI16:
      return GgmlTypeTraits{"I16", 1, 2};
    case GgmlType::kI32:
      return GgmlTypeTraits{"I32", 1, 4};
    case GgmlType::kI64:
      return GgmlTypeTraits{"I64", 1, 8};
    case GgmlType::kF64:
      return GgmlTypeTraits{"F64", 1, 8};
    case GgmlType::kIQ1_M:
      return GgmlTypeTraits{"IQ1_M", 256, 56};
    case GgmlType::kBF16:
      return GgmlTypeTraits{"BF16", 1, 2};
    case GgmlType::kTQ1_0:
      return GgmlTypeTraits{"TQ1_0", 256, 54};
    case GgmlType::kTQ2_0:
      return GgmlTypeTraits{"TQ2_0", 256, 66};
    case GgmlType::kMXFP4:
      return GgmlTypeTraits{"MXFP4", 32, 17};
  }
  return std::nullopt;
}

// Reads the file front to back; `pos_` is the offset of the next unread byte. Every read checks
// the bytes left first, and every error names what was being read and where it started.
class GgufParser {
 public:
  GgufParser(std::span<const uint8_t> bytes, std::string_view name) : bytes_(bytes), name_(name) {}

  Status Run(GgufFile& out) {
    out.name_ = std::string(name_);
    out.bytes_ = bytes_;
    if (bytes_.size() < 4 || std::memcmp(bytes_.data(), "GGUF", 4) != 0) {
      return Error(0, "the header", "does not start with the magic \"GGUF\"");
    }
    pos_ = 4;
    uint32_t version = 0;
    TEMPER_RETURN_IF_ERROR(Read(version, "the version"));
    if (version != 2 && version != 3) {
      if (version == 1)
        return Error(4, "the version", "is 1 (32-bit counts), which this reader does not take; use 2 or 3");
      if (__builtin_bswap32(version) == 2 || __builtin_bswap32(version) == 3) {
        return Error(4, "the version", "is big-endian; only little-endian files are read");
      }
      return Error(4, "the version", fmt::format("is {}; only 2 and 3 are known", version));
    }
    out.version_ = version;
    uint64_t tensor_count = 0, kv_count = 0;
    TEMPER_RETURN_IF_ERROR(Read(tensor_count, "the tensor count"));
    TEMPER_RETURN_IF_ERROR(Read(kv_count, "the metadata count"));

    // Each entry needs at least a key length, a type and a one-byte value; a count larger than
    // the file could hold is refused before anything is read for it.
    if (kv_count > Left() / (8 + 4 + 1)) {
      return Error(16, "the metadata count",
                   fmt::format("is {}, more entries than the {} bytes left can hold", kv_count, Left()));
    }
    for (uint64_t i = 0; i < kv_count; ++i) {
      const uint64_t key_at = pos_;
      std::string_view key;
      TEMPER_RETURN_IF_ERROR(ReadString(key, fmt::format("metadata entry {}'s key", i)));
      const std::string what = fmt::format("key {}", Quote(key));
      uint32_t type = 0;
      const uint64_t type_at = pos_;
      TEMPER_RETURN_IF_ERROR(Read(type, what + "'s value type"));
      if (!KnownValueType(type)) return Error(type_at, what, fmt::format("has unknown value type {}", type));
      GgufValue value;
      value.type = static_cast<GgufValueType>(type);
      value.offset = pos_;
      TEMPER_RETURN_IF_ERROR(ReadValue(value, what));
      if (!out.metadata_.emplace(std::string(key), std::move(value)).second) {
        return Error(key_at, what, "appears twice");
      }
    }

    if (const GgufValue* alignment = out.Find("general.alignment")) {
      if (alignment->type != GgufValueType::kU32) {
        return Error(alignment->offset, "key 'general.alignment'",
                     fmt::format("is a {}, not a UINT32", GgufValueTypeName(alignment->type)));
      }
      if (alignment->uint_value == 0 || !std::has_single_bit(alignment->uint_value)) {
        return Error(alignment->offset, "key 'general.alignment'",
                     fmt::format("is {}, not a power of two", alignment->uint_value));
      }
      out.alignment_ = alignment->uint_value;
    }

    // A tensor info is at least a name length, a dim count, one dim, a type and an offset.
    if (tensor_count > Left() / (8 + 4 + 8 + 4 + 8)) {
      return Error(8, "the tensor count",
                   fmt::format("is {}, more tensors than the {} bytes left can describe", tensor_count, Left()));
    }
    for (uint64_t i = 0; i < tensor_count; ++i) {
      GgufTensorInfo tensor;
      TEMPER_RETURN_IF_ERROR(ReadTensorInfo(i, tensor, out.alignment_));
      if (!out.tensor_index_.emplace(tensor.name, out.tensors_.size()).second) {
        return Error(tensor.info_offset, fmt::format("tensor {}", Quote(tensor.name)), "appears twice");
      }
      out.tensors_.push_back(std::move(tensor));
    }

    // The data section starts at the next multiple of the alignment.
    const uint64_t padding = (out.alignment_ - pos_ % out.alignment_) % out.alignment_;
    if (out.tensors_.empty()) {
      out.data_offset_ = std::min<uint64_t>(pos_ + padding, bytes_.size());
      return Status::OK();
    }
    if (padding > Left()) {
      return Error(
          pos_, "the data section",
          fmt::format("would start at {}, past the end of the file ({} bytes)", pos_ + padding, bytes_.size()));
    }
    out.data_offset_ = pos_ + padding;
    return CheckTensorPlacement(out);
  }

 private:
  uint64_t Left() const { return bytes_.size() - pos_; }

  Status Error(uint64_t at, std::string_view what, std::string_view problem) const {
    return Status::DataLoss(fmt::format("{}: {} at byte {} {}", name_, what, at, problem));
  }

  template <typename T>
  Status Read(T& out, std::string_view what) {
    if (Left() < sizeof(T)) {
      return Error(pos_, what, fmt::format("needs {} bytes but the file ends after {}", sizeof(T), Left()));
    }
    std::memcpy(&out, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return Status::OK();
  }

  // Reads a T and widens it into `out`.
  template <typename T, typename Wide>
  Status ReadInto(Wide& out, std::string_view what) {
    T value{};
    TEMPER_RETURN_IF_ERROR(Read(value, what));
    out = static_cast<Wide>(value);
    return Status::OK();
  }

  Status ReadString(std::string_view& out, std::string_view what) {
    const uint64_t at = pos_;
    uint64_t length = 0;
    TEMPER_RETURN_IF_ERROR(Read(length, what));
    if (length > Left()) {
      return Error(at, what, fmt::format("claims {} bytes but the file ends after {}", length, Left()));
    }
    out = std::string_view(reinterpret_cast<const char*>(bytes_.data() + pos_), length);
    pos_ += length;
    return Status::OK();
  }

  Status ReadScalar(GgufValue& v, GgufValueType type, std::string_view what) {
    const uint64_t at = pos_;
    switch (type) {
      case GgufValueType::kU8:
        return ReadInto<uint8_t>(v.uint_value, what);
      case GgufValueType::kU16:
        return ReadInto<uint16_t>(v.uint_value, what);
      case GgufValueType::kU32:
        return ReadInto<uint32_t>(v.uint_value, what);
      case GgufValueType::kU64:
        return ReadInto<uint64_t>(v.uint_value, what);
      case GgufValueType::kI8:
        return ReadInto<int8_t>(v.int_value, what);
      case GgufValueType::kI16:
        return ReadInto<int16_t>(v.int_value, what);
      case GgufValueType::kI32:
        return ReadInto<int32_t>(v.int_value, what);
      case GgufValueType::kI64:
        return ReadInto<int64_t>(v.int_value, what);
      case GgufValueType::kF32:
        return ReadInto<float>(v.float_value, what);
      case GgufValueType::kF64:
        return ReadInto<double>(v.float_value, what);
      case GgufValueType::kBool: {
        uint8_t x = 0;
        TEMPER_RETURN_IF_ERROR(Read(x, what));
        if (x > 1) return Error(at, what, fmt::format("is a BOOL holding {}, not 0 or 1", x));
        v.uint_value = x;
        break;
      }
      case GgufValueType::kString:
        return ReadString(v.string_value, what);
      case GgufValueType::kArray:
        return Error(at, what, "is an array where a single value belongs");
    }
    return Status::OK();
  }

  Status ReadValue(GgufValue& v, std::string_view what) {
    if (v.type != GgufValueType::kArray) return ReadScalar(v, v.type, what);
    uint32_t element_type = 0;
    const uint64_t type_at = pos_;
    TEMPER_RETURN_IF_ERROR(Read(element_type, fmt::format("{}'s array element type", what)));
    if (!KnownValueType(element_type)) {
      return Error(type_at, what, fmt::format("is an array of unknown value type {}", element_type));
    }
    v.element_type = static_cast<GgufValueType>(element_type);
    // llama.cpp's gguf.cpp has no nested arrays either.
    if (v.element_type == GgufValueType::kArray) return Error(type_at, what, "is an array of arrays");
    const uint64_t count_at = pos_;
    TEMPER_RETURN_IF_ERROR(Read(v.count, fmt::format("{}'s array count", what)));
    if (v.element_type == GgufValueType::kString) {
      if (v.count > Left() / 8) {
        return Error(count_at, what, fmt::format("claims {} strings but only {} bytes are left", v.count, Left()));
      }
      v.strings.resize(v.count);
      for (uint64_t i = 0; i < v.count; ++i) {
        TEMPER_RETURN_IF_ERROR(ReadString(v.strings[i], fmt::format("{}[{}]", what, i)));
      }
      return Status::OK();
    }
    const size_t size = ScalarSize(v.element_type);
    if (v.count > Left() / size) {
      return Error(count_at, what,
                   fmt::format("claims {} {} elements but only {} bytes are left", v.count,
                               GgufValueTypeName(v.element_type), Left()));
    }
    v.array_bytes = bytes_.subspan(pos_, v.count * size);
    if (v.element_type == GgufValueType::kBool) {
      for (uint64_t i = 0; i < v.count; ++i) {
        if (v.array_bytes[i] > 1) {
          return Error(pos_ + i, fmt::format("{}[{}]", what, i), fmt::format("is a BOOL holding {}", v.array_bytes[i]));
        }
      }
    }
    pos_ += v.count * size;
    return Status::OK();
  }

  Status ReadTensorInfo(uint64_t index, GgufTensorInfo& t, uint64_t alignment) {
    t.info_offset = pos_;
    std::string_view name;
    TEMPER_RETURN_IF_ERROR(ReadString(name, fmt::format("tensor {}'s name", index)));
    t.name = std::string(name);
    const std::string what = fmt::format("tensor {}", Quote(name));
    uint32_t n_dims = 0;
    const uint64_t dims_at = pos_;
    TEMPER_RETURN_IF_ERROR(Read(n_dims, what + "'s dimension count"));
    if (n_dims == 0 || n_dims > kMaxDims) {
      return Error(dims_at, what, fmt::format("has {} dimensions; 1 to {} are allowed", n_dims, kMaxDims));
    }
    int64_t elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t dim_at = pos_;
      uint64_t dim = 0;
      TEMPER_RETURN_IF_ERROR(Read(dim, fmt::format("{}'s dimension {}", what, d)));
      if (dim == 0 || dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Error(dim_at, what, fmt::format("has dimension {} = {}", d, dim));
      }
      if (static_cast<uint64_t>(elements) > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / dim) {
        return Error(dim_at, what, "has more elements than a 64-bit count holds (its dimensions' product overflows)");
      }
      elements *= static_cast<int64_t>(dim);
      t.dims.push_back(static_cast<int64_t>(dim));
    }
    t.elements = elements;
    uint32_t type = 0;
    const uint64_t type_at = pos_;
    TEMPER_RETURN_IF_ERROR(Read(type, what + "'s type"));
    const std::optional<GgmlTypeTraits> traits = GgmlTypeInfo(type);
    if (!traits) return Error(type_at, what, fmt::format("has unknown ggml type {}", type));
    t.type = static_cast<GgmlType>(type);
    if (t.dims[0] % traits->block_elements != 0) {
      return Error(dims_at, what,
                   fmt::format("has first dimension {}, not a multiple of {}'s block of {}", t.dims[0], traits->name,
                               traits->block_elements));
    }
    // elements / block_elements blocks of block_bytes each: at most elements * 4.5 bytes for the
    // widest small type, so check the product rather than trust it.
    const uint64_t blocks = static_cast<uint64_t>(elements / traits->block_elements);
    if (blocks > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(traits->block_bytes)) {
      return Error(dims_at, what, "has a byte size that overflows 64 bits");
    }
    t.bytes = blocks * static_cast<uint64_t>(traits->block_bytes);
    const uint64_t offset_at = pos_;
    TEMPER_RETURN_IF_ERROR(Read(t.offset, what + "'s offset"));
    if (t.offset % alignment != 0) {
      return Error(offset_at, what,
                   fmt::format("has data offset {}, not a multiple of the alignment {}", t.offset, alignment));
    }
    return Status::OK();
  }

  Status CheckTensorPlacement(const GgufFile& out) const {
    const uint64_t data_size = bytes_.size() - out.data_offset_;
    std::vector<const GgufTensorInfo*> by_offset;
    for (const GgufTensorInfo& t : out.tensors_) {
      if (t.offset > data_size || t.bytes > data_size - t.offset) {
        return Error(t.info_offset, fmt::format("tensor {}", Quote(t.name)),
                     fmt::format("has {} bytes at data offset {}, past the data section's {} bytes", t.bytes, t.offset,
                                 data_size));
      }
      by_offset.push_back(&t);
    }
    std::sort(by_offset.begin(), by_offset.end(),
              [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->offset < b->offset; });
    for (size_t i = 1; i < by_offset.size(); ++i) {
      const GgufTensorInfo& prev = *by_offset[i - 1];
      const GgufTensorInfo& cur = *by_offset[i];
      if (cur.offset < prev.offset + prev.bytes) {
        return Error(cur.info_offset, fmt::format("tensor {}", Quote(cur.name)),
                     fmt::format("at data offset {} overlaps tensor {} ({} bytes at {})", cur.offset, Quote(prev.name),
                                 prev.bytes, prev.offset));
      }
    }
    return Status::OK();
  }

  std::span<const uint8_t> bytes_;
  std::string_view name_;
  uint64_t pos_ = 0;
};

Result<GgufFile> GgufFile::Parse(std::span<const uint8_t> bytes, std::string_view name) {
  GgufFile file;
  GgufParser parser(bytes, name);
  TEMPER_RETURN_IF_ERROR(parser.Run(file));
  return file;
}

Result<GgufFile> GgufFile::Open(const std::filesystem::path& path) {
  TEMPER_ASSIGN_OR_RETURN(MappedFile map, MappedFile::Open(path));
  const std::span<const uint8_t> bytes = map.bytes();
  TEMPER_ASSIGN_OR_RETURN(GgufFile file, Parse(bytes, path.string()));
  file.map_.emplace(std::move(map));
  return file;
}

const GgufValue* GgufFile::Find(std::string_view key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const GgufTensorInfo* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::span<const uint8_t> GgufFile::TensorData(const GgufTensorInfo& tensor) const {
  return bytes_.subspan(data_offset_ + tensor.offset, tensor.bytes);
}

namespace {

Status WrongType(const GgufFile& file, std::string_view key, const GgufValue& v, std::string_view wanted) {
  std::string type(GgufValueTypeName(v.type));
  if (v.type == GgufValueType::kArray) type += fmt::format(" of {}", GgufValueTypeName(v.element_type));
  return Status::InvalidArgument(
      fmt::format("{}: key '{}' at byte {} is a {}, not {}", file.name(), key, v.offset, type, wanted));
}

// Element i of a little-endian array of T.
template <typename T>
T LoadLittle(const uint8_t* p, uint64_t i) {
  T value{};
  std::memcpy(&value, p + i * sizeof(T), sizeof(T));
  return value;
}

}  // namespace

#define TEMPER_GGUF_FIND(value, key)  \
  const GgufValue* value = Find(key); \
  if (value == nullptr) return Status::NotFound(fmt::format("{}: no key '{}'", name_, key))

Result<uint64_t> GgufFile::GetUint(std::string_view key) const {
  TEMPER_GGUF_FIND(v, key);
  switch (v->type) {
    case GgufValueType::kU8:
    case GgufValueType::kU16:
    case GgufValueType::kU32:
    case GgufValueType::kU64:
      return v->uint_value;
    case GgufValueType::kI8:
    case GgufValueType::kI16:
    case GgufValueType::kI32:
    case GgufValueType::kI64:
      if (v->int_value >= 0) return static_cast<uint64_t>(v->int_value);
      return Status::InvalidArgument(
          fmt::format("{}: key '{}' at byte {} is {}, not a count", name_, key, v->offset, v->int_value));
    default:
      return WrongType(*this, key, *v, "an unsigned integer");
  }
}

Result<double> GgufFile::GetFloat(std::string_view key) const {
  TEMPER_GGUF_FIND(v, key);
  if (v->type != GgufValueType::kF32 && v->type != GgufValueType::kF64) return WrongType(*this, key, *v, "a float");
  return v->float_value;
}

Result<bool> GgufFile::GetBool(std::string_view key) const {
  TEMPER_GGUF_FIND(v, key);
  if (v->type != GgufValueType::kBool) return WrongType(*this, key, *v, "a BOOL");
  return v->uint_value != 0;
}

Result<std::string_view> GgufFile::GetString(std::string_view key) const {
  TEMPER_GGUF_FIND(v, key);
  if (v->type != GgufValueType::kString) return WrongType(*this, key, *v, "a STRING");
  return v->string_value;
}

Result<std::span<const std::string_view>> GgufFile::GetStringArray(std::string_view key) const {
  TEMPER_GGUF_FIND(v, key);
  if (v->type != GgufValueType::kArray || v->element_type != GgufValueType::kString) {
    return WrongType(*this, key, *v, "an ARRAY of STRING");
  }
  return std::span<const std::string_view>(v->strings);
}

Result<std::vector<float>> GgufFile::GetF32Array(std::string_view key) const {
  TEMPER_GGUF_FIND(v, key);
  if (v->type != GgufValueType::kArray || v->element_type != GgufValueType::kF32) {
    return WrongType(*this, key, *v, "an ARRAY of FLOAT32");
  }
  std::vector<float> out(v->count);
  std::memcpy(out.data(), v->array_bytes.data(), v->array_bytes.size());
  return out;
}

Result<std::vector<int32_t>> GgufFile::GetI32Array(std::string_view key) const {
  TEMPER_GGUF_FIND(v, key);
  if (v->type != GgufValueType::kArray) return WrongType(*this, key, *v, "an ARRAY of integers");
  std::vector<int32_t> out(v->count);
  const uint8_t* p = v->array_bytes.data();
  for (uint64_t i = 0; i < v->count; ++i) {
    int64_t x = 0;
    switch (v->element_type) {
      case GgufValueType::kI8:
        x = LoadLittle<int8_t>(p, i);
        break;
      case GgufValueType::kU8:
        x = LoadLittle<uint8_t>(p, i);
        break;
      case GgufValueType::kI16:
        x = LoadLittle<int16_t>(p, i);
        break;
      case GgufValueType::kU16:
        x = LoadLittle<uint16_t>(p, i);
        break;
      case GgufValueType::kI32:
        x = LoadLittle<int32_t>(p, i);
        break;
      case GgufValueType::kU32:
        x = LoadLittle<uint32_t>(p, i);
        break;
      default:
        return WrongType(*this, key, *v, "an ARRAY of integers");
    }
    if (x > std::numeric_limits<int32_t>::max()) {
      return Status::InvalidArgument(fmt::format("{}: key '{}'[{}] is {}, past an int32", name_, key, i, x));
    }
    out[i] = static_cast<int32_t>(x);
  }
  return out;
}

#undef TEMPER_GGUF_FIND

}  // namespace temper::engine
