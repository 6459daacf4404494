// libFuzzer entry point for the safetensors header parser, the first code that touches a
// downloaded checkpoint. Any input must yield either a header whose every tensor lies inside the
// input, or a DataLoss error; never a crash, a leak or an out-of-bounds read (ASan/UBSan watch).
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "engine/model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto header = temper::engine::ParseSafetensorsHeader({data, size}, "fuzz");
  if (header.ok()) {
    for (const auto& t : header->tensors) {
      if (header->data_offset + t.end > size || t.begin > t.end) std::abort();
    }
  } else if (header.status().code() != temper::StatusCode::kDataLoss) {
    std::abort();
  }
  return 0;
}
