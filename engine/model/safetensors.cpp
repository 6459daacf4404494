#include "engine/model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

namespace temper::engine {
namespace {

using nlohmann::json;

// The reference implementation refuses headers above 100 MB; so do we, before allocating.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct DTypeEntry {
  DType dtype;
  std::string_view name;
  size_t size;
};
constexpr DTypeEntry kDTypes[] = {
    {DType::kBool, "BOOL", 1}, {DType::kU8, "U8", 1},          {DType::kI8, "I8", 1},          {DType::kI16, "I16", 2},
    {DType::kU16, "U16", 2},   {DType::kF16, "F16", 2},        {DType::kBF16, "BF16", 2},      {DType::kI32, "I32", 4},
    {DType::kU32, "U32", 4},   {DType::kF32, "F32", 4},        {DType::kF64, "F64", 8},        {DType::kI64, "I64", 8},
    {DType::kU64, "U64", 8},   {DType::kF8E4M3, "F8_E4M3", 1}, {DType::kF8E5M2, "F8_E5M2", 1},
};

Status Corrupt(std::string_view file, std::string_view what) {
  return Status::DataLoss(fmt::format("{}: {}", file, what));
}

// Multiplies with an overflow check against `limit`.
bool CheckedMul(uint64_t a, uint64_t b, uint64_t limit, uint64_t* out) {
  if (a != 0 && b > limit / a) return false;
  *out = a * b;
  return true;
}

Result<TensorInfo> ParseTensorEntry(std::string_view file, const std::string& name, const json& entry,
                                    uint64_t data_size) {
  auto bad = [&](std::string_view what) { return Corrupt(file, fmt::format("tensor '{}': {}", name, what)); };
  if (!entry.is_object()) return bad("entry is not a JSON object");
  TensorInfo t;
  t.name = name;

  auto dtype_it = entry.find("dtype");
  if (dtype_it == entry.end() || !dtype_it->is_string()) return bad("missing string field 'dtype'");
  const std::string& dtype_name = dtype_it->get_ref<const std::string&>();
  const DTypeEntry* dt = nullptr;
  for (const DTypeEntry& e : kDTypes) {
    if (e.name == dtype_name) dt = &e;
  }
  if (!dt) return bad(fmt::format("unknown dtype '{}'", dtype_name.substr(0, 32)));
  t.dtype = dt->dtype;

  auto shape_it = entry.find("shape");
  if (shape_it == entry.end() || !shape_it->is_array()) return bad("missing array field 'shape'");
  if (shape_it->size() > 16) return bad(fmt::format("shape has {} dimensions (at most 16)", shape_it->size()));
  // Bytes cannot exceed the data section, so that bounds every product below.
  uint64_t elements = 1;
  for (const json& d : *shape_it) {
    if (!d.is_number_unsigned()) return bad("shape holds a value that is not a non-negative integer");
    const uint64_t dim = d.get<uint64_t>();
    if (!CheckedMul(elements, dim, uint64_t{1} << 62, &elements)) return bad("shape's element count overflows");
    t.shape.push_back(static_cast<int64_t>(dim));
  }
  uint64_t bytes = 0;
  if (!CheckedMul(elements, dt->size, uint64_t{1} << 62, &bytes)) return bad("shape's byte size overflows");

  auto off_it = entry.find("data_offsets");
  if (off_it == entry.end() || !off_it->is_array() || off_it->size() != 2 || !(*off_it)[0].is_number_unsigned() ||
      !(*off_it)[1].is_number_unsigned()) {
    return bad("'data_offsets' must be two non-negative integers [begin, end]");
  }
  t.begin = (*off_it)[0].get<uint64_t>();
  t.end = (*off_it)[1].get<uint64_t>();
  if (t.begin > t.end) return bad(fmt::format("data_offsets [{}, {}] has begin after end", t.begin, t.end));
  if (t.end > data_size) {
    return bad(
        fmt::format("data_offsets [{}, {}] out of range: the data section has {} bytes", t.begin, t.end, data_size));
  }
  if (t.end - t.begin != bytes) {
    return bad(fmt::format("data_offsets [{}, {}] hold {} bytes but shape {} of {} needs {}", t.begin, t.end,
                           t.end - t.begin, fmt::join(t.shape, "x"), dt->name, bytes));
  }
  return t;
}

}  // namespace

std::string_view DTypeName(DType dtype) {
  for (const DTypeEntry& e : kDTypes) {
    if (e.dtype == dtype) return e.name;
  }
  return "?";
}

size_t DTypeSize(DType dtype) {
  for (const DTypeEntry& e : kDTypes) {
    if (e.dtype == dtype) return e.size;
  }
  return 0;
}

int64_t TensorInfo::NumElements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Result<SafetensorsHeader> ParseSafetensorsHeader(std::span<const uint8_t> file, std::string_view file_name) {
  if (file.size() < 8) {
    return Corrupt(
        file_name,
        fmt::format("truncated header: the file has {} bytes, fewer than the 8-byte header length", file.size()));
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | file[i];
  const uint64_t after = file.size() - 8;
  if (n > after) {
    return Corrupt(file_name,
                   fmt::format("header length {} runs past the end of the file ({} bytes follow it)", n, after));
  }
  if (n > kMaxHeaderBytes) return Corrupt(file_name, fmt::format("header length {} exceeds the 100 MB limit", n));

  const char* text = reinterpret_cast<const char*>(file.data() + 8);
  json root = json::parse(text, text + n, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return Corrupt(file_name, "bad JSON in the header");
  if (!root.is_object()) return Corrupt(file_name, "bad JSON in the header: the top level is not an object");

  SafetensorsHeader h;
  h.data_offset = 8 + n;
  const uint64_t data_size = after - n;
  for (auto it = root.begin(); it != root.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) return Corrupt(file_name, "'__metadata__' is not an object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string())
          return Corrupt(file_name, fmt::format("'__metadata__' value of '{}' is not a string", m.key()));
        h.metadata[m.key()] = m->get<std::string>();
      }
      continue;
    }
    TEMPER_ASSIGN_OR_RETURN(TensorInfo t, ParseTensorEntry(file_name, it.key(), *it, data_size));
    h.tensors.push_back(std::move(t));
  }

  // No two tensors may share bytes (empty tensors occupy none).
  std::vector<const TensorInfo*> by_offset;
  for (const TensorInfo& t : h.tensors) {
    if (t.end > t.begin) by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo& a = *by_offset[i - 1];
    const TensorInfo& b = *by_offset[i];
    if (b.begin < a.end) {
      return Corrupt(file_name, fmt::format("tensors '{}' [{}, {}] and '{}' [{}, {}] overlap", a.name, a.begin, a.end,
                                            b.name, b.begin, b.end));
    }
  }
  return h;
}

Result<MappedFile> MappedFile::Open(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, fmt::format("cannot open {}", path.string()));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::FromErrno(err, fmt::format("cannot stat {}", path.string()));
  }
  const size_t size = static_cast<size_t>(st.st_size);
  void* data = nullptr;
  if (size > 0) {
    data = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (data == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return Status::FromErrno(err, fmt::format("cannot mmap {}", path.string()));
    }
  }
  ::close(fd);  // the mapping keeps the file alive
  return MappedFile(static_cast<const uint8_t*>(data), size);
}

Result<MappedFile> MappedFile::Anonymous(size_t size) {
  if (size == 0) return MappedFile(nullptr, 0, true);
  void* data = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (data == MAP_FAILED) {
    return Status::ResourceExhausted(fmt::format("cannot map {} bytes of memory: {}", size, std::strerror(errno)));
  }
  return MappedFile(static_cast<const uint8_t*>(data), size, true);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(other.data_), size_(other.size_), writable_(other.writable_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
    data_ = other.data_;
    size_ = other.size_;
    writable_ = other.writable_;
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

SafetensorsFile::SafetensorsFile(std::filesystem::path path, MappedFile map, SafetensorsHeader header)
    : path_(std::move(path)), map_(std::move(map)), header_(std::move(header)) {
  for (size_t i = 0; i < header_.tensors.size(); ++i) index_.emplace(header_.tensors[i].name, i);
}

Result<SafetensorsFile> SafetensorsFile::Open(const std::filesystem::path& path) {
  TEMPER_ASSIGN_OR_RETURN(MappedFile map, MappedFile::Open(path));
  TEMPER_ASSIGN_OR_RETURN(SafetensorsHeader header, ParseSafetensorsHeader(map.bytes(), path.string()));
  return SafetensorsFile(path, std::move(map), std::move(header));
}

Result<SafetensorsFile> SafetensorsFile::FromMemory(std::filesystem::path label, MappedFile map,
                                                    std::vector<TensorInfo> tensors) {
  SafetensorsHeader header;
  for (const TensorInfo& t : tensors) {
    const uint64_t bytes = static_cast<uint64_t>(t.NumElements()) * DTypeSize(t.dtype);
    if (t.begin > t.end || t.end > map.bytes().size() || t.end - t.begin != bytes) {
      return Status::DataLoss(fmt::format("{}: tensor '{}' at [{}, {}) does not fit {} bytes of memory as {} bytes",
                                          label.string(), t.name, t.begin, t.end, map.bytes().size(), bytes));
    }
  }
  header.tensors = std::move(tensors);
  return SafetensorsFile(std::move(label), std::move(map), std::move(header));
}

const TensorInfo* SafetensorsFile::Find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &header_.tensors[it->second];
}

std::span<const uint8_t> SafetensorsFile::Data(const TensorInfo& tensor) const {
  return map_.bytes().subspan(header_.data_offset + tensor.begin, tensor.end - tensor.begin);
}

Status WriteSafetensors(const std::filesystem::path& path, std::span<const TensorToWrite> tensors,
                        const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const TensorToWrite& t : tensors) {
    uint64_t n = 1;
    for (int64_t d : t.shape) n *= static_cast<uint64_t>(d);
    if (n * DTypeSize(t.dtype) != t.data.size()) {
      return Status::InvalidArgument(fmt::format("tensor '{}': {} bytes of data for shape {} of {}", t.name,
                                                 t.data.size(), fmt::join(t.shape, "x"), DTypeName(t.dtype)));
    }
    header[t.name] = {{"dtype", DTypeName(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.data.size()}}};
    offset += t.data.size();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Status::FromErrno(errno, fmt::format("cannot create {}", path.string()));
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const TensorToWrite& t : tensors) {
    out.write(reinterpret_cast<const char*>(t.data.data()), static_cast<std::streamsize>(t.data.size()));
  }
  out.flush();
  if (!out) return Status::FromErrno(errno, fmt::format("cannot write {}", path.string()));
  return Status::OK();
}

}  // namespace temper::engine
