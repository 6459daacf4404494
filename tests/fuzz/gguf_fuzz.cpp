// libFuzzer entry point for the GGUF reader and dequantizers, the first code that touches a
// downloaded .gguf model. Any input must yield either a file whose every tensor lies inside the
// input (and dequantizes without error when its type is supported) and whose keys read back
// through every typed getter, or a DataLoss error; never a crash, a leak or an out-of-bounds read
// (ASan/UBSan watch).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "engine/model/gguf_dequant.h"
#include "engine/model/gguf_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using temper::engine::GgufFile;
  auto file = GgufFile::Parse({data, size}, "fuzz");
  if (!file.ok()) {
    if (file.status().code() != temper::StatusCode::kDataLoss) std::abort();
    return 0;
  }
  for (const auto& [key, value] : file->metadata()) {
    (void)file->GetUint(key);
    (void)file->GetFloat(key);
    (void)file->GetBool(key);
    (void)file->GetString(key);
    (void)file->GetStringArray(key);
    (void)file->GetF32Array(key);
    (void)file->GetI32Array(key);
  }
  for (const auto& t : file->tensors()) {
    if (file->data_offset() + t.offset + t.bytes > size) std::abort();
    // Small tensors only: a few bytes of input may describe gigabytes of zeros-free blocks.
    if (!temper::engine::CanDequantize(t.type) || t.elements > (1 << 16)) continue;
    std::vector<float> values(static_cast<size_t>(t.elements));
    if (!temper::engine::DequantizeToF32(t.type, file->TensorData(t), values).ok()) std::abort();
    std::vector<uint16_t> bf16(static_cast<size_t>(t.elements));
    if (!temper::engine::DequantizeToBf16(t.type, file->TensorData(t), bf16, 1.0f).ok()) std::abort();
  }
  return 0;
}
