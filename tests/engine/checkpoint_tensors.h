// A checkpoint's tensors as TensorToWrite views into its map (kept open here), for tests that
// write a copy with one tensor missing, misshapen or added and expect the load to name it.
#pragma once

#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "engine/model/checkpoint.h"

namespace temper::engine::testing {

struct CheckpointTensors {
  SafetensorsFile file;
  std::vector<TensorToWrite> tensors;

  static CheckpointTensors Load(const std::filesystem::path& safetensors) {
    auto f = SafetensorsFile::Open(safetensors);
    REQUIRE(f.ok());
    CheckpointTensors t{std::move(*f), {}};
    for (const TensorInfo& info : t.file.header().tensors) {
      t.tensors.push_back({info.name, info.dtype, info.shape, t.file.Data(info)});
    }
    return t;
  }
  TensorToWrite* Find(const std::string& name) {
    for (auto& t : tensors) {
      if (t.name == name) return &t;
    }
    FAIL("no tensor " << name);
    return nullptr;
  }
  void Remove(const std::string& name) {
    std::erase_if(tensors, [&](const TensorToWrite& t) { return t.name == name; });
  }
};

}  // namespace temper::engine::testing
