// Test helper: GGUF bytes written field by field, so that a case can break exactly one field or
// make a file with only the keys it needs.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace temper::engine::testing {

struct GgufBytes {
  std::vector<uint8_t> bytes;

  template <typename T>
  GgufBytes& Put(T v) {
    const size_t at = bytes.size();
    bytes.resize(at + sizeof(T));
    std::memcpy(bytes.data() + at, &v, sizeof(T));
    return *this;
  }
  GgufBytes& Str(std::string_view s) {
    Put<uint64_t>(s.size());
    bytes.insert(bytes.end(), s.begin(), s.end());
    return *this;
  }
  GgufBytes& Header(uint64_t tensors, uint64_t kvs, uint32_t version = 3) {
    bytes.insert(bytes.end(), {'G', 'G', 'U', 'F'});
    return Put<uint32_t>(version).Put<uint64_t>(tensors).Put<uint64_t>(kvs);
  }
  GgufBytes& KvU32(std::string_view key, uint32_t v) { return Str(key).Put<uint32_t>(4).Put<uint32_t>(v); }
  GgufBytes& KvString(std::string_view key, std::string_view v) { return Str(key).Put<uint32_t>(8).Str(v); }
  GgufBytes& KvStrings(std::string_view key, const std::vector<std::string_view>& v) {
    Str(key).Put<uint32_t>(9).Put<uint32_t>(8).Put<uint64_t>(v.size());
    for (std::string_view s : v) Str(s);
    return *this;
  }
  GgufBytes& KvF32s(std::string_view key, const std::vector<float>& v) {
    Str(key).Put<uint32_t>(9).Put<uint32_t>(6).Put<uint64_t>(v.size());
    for (float x : v) Put<float>(x);
    return *this;
  }
  GgufBytes& KvI32s(std::string_view key, const std::vector<int32_t>& v) {
    Str(key).Put<uint32_t>(9).Put<uint32_t>(5).Put<uint64_t>(v.size());
    for (int32_t x : v) Put<int32_t>(x);
    return *this;
  }
  GgufBytes& Tensor(std::string_view name, std::vector<uint64_t> dims, uint32_t type, uint64_t offset) {
    Str(name).Put<uint32_t>(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) Put<uint64_t>(d);
    return Put<uint32_t>(type).Put<uint64_t>(offset);
  }
  // Pads to `alignment` and appends `n` data bytes.
  GgufBytes& Data(size_t n, size_t alignment = 32) {
    bytes.resize((bytes.size() + alignment - 1) / alignment * alignment + n, 0x11);
    return *this;
  }
};

}  // namespace temper::engine::testing
