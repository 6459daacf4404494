// Checkpoint: the tensors of a Hugging Face model directory, from one `model.safetensors` or from
// the shards listed in `model.safetensors.index.json`.
//
// Every shard is memory-mapped and validated (see safetensors.h). A sharded checkpoint must list
// each tensor in the index's `weight_map`, and that tensor must be in the shard the map names; a
// tensor found in two shards is an error.
//
// Thread safety: immutable after Open; concurrent reads are safe. Tensor spans stay valid while the
// Checkpoint lives.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "engine/model/safetensors.h"

namespace temper::engine {

class Checkpoint {
 public:
  struct Entry {
    const TensorInfo* info;
    const SafetensorsFile* file;
    std::span<const uint8_t> data;
  };

  // Opens DIR/model.safetensors.index.json if present, else DIR/model.safetensors.
  // Errors: NotFound when neither exists; DataLoss for a malformed index or shard; IOError.
  static Result<std::unique_ptr<Checkpoint>> Open(const std::filesystem::path& dir);
  // A checkpoint of one file already open (SafetensorsFile::FromMemory: a GGUF's weights in bf16).
  // DataLoss when the file holds two tensors of one name.
  static Result<std::unique_ptr<Checkpoint>> FromFile(SafetensorsFile file);

  Checkpoint(const Checkpoint&) = delete;
  Checkpoint& operator=(const Checkpoint&) = delete;

  // nullptr when absent.
  const Entry* Find(std::string_view name) const;
  // The data of BF16 tensor `name`, which must have exactly `shape`. DataLoss naming the file and
  // the tensor when it is missing, of another dtype (`config_dtype` is what config.json said) or
  // shape, or misaligned.
  Result<const uint16_t*> Bf16Tensor(std::string_view name, std::span<const int64_t> shape,
                                     std::string_view config_dtype) const;
  const std::map<std::string, Entry, std::less<>>& tensors() const { return tensors_; }

 private:
  Checkpoint() = default;
  Status Add(const SafetensorsFile& file);

  std::filesystem::path dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, Entry, std::less<>> tensors_;
};

}  // namespace temper::engine
