// Test helpers for the tiny MTP drafter of the golden model (tests/data/gemma4-tiny-assistant,
// written with its reference drafts by make_reference.py there, independently of the engine).
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "engine/golden_fixture.h"
#include "engine/model/drafter_config.h"
#include "engine/model/drafter_weights.h"

namespace temper::engine::testing {

inline std::filesystem::path TinyDrafterDir() { return TestDataDir() / "gemma4-tiny-assistant"; }

inline std::shared_ptr<const DrafterWeights> TinyDrafter() {
  static const std::shared_ptr<const DrafterWeights> drafter = [] {
    auto config = LoadDrafterConfig(TinyDrafterDir() / "config.json", Tiny().config);
    if (!config.ok()) FAIL(config.status().ToString());
    auto weights = DrafterWeights::Load(TinyDrafterDir(), *config);
    if (!weights.ok()) FAIL(weights.status().ToString());
    return std::shared_ptr<const DrafterWeights>(std::move(*weights));
  }();
  return drafter;
}

// A tensor of the drafter's reference.safetensors (F32 -> float, I32 -> int32_t).
template <typename T>
std::vector<T> DrafterReference(const std::string& name, std::vector<int64_t>* shape = nullptr) {
  static const SafetensorsFile* file = [] {
    auto f = SafetensorsFile::Open(TinyDrafterDir() / "reference.safetensors");
    REQUIRE(f.ok());
    return new SafetensorsFile(std::move(*f));
  }();
  return TensorValues<T>(*file, name, shape);
}

}  // namespace temper::engine::testing
