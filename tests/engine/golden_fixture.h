// Test helpers for the golden Gemma 4 fixture (tests/data/gemma4-tiny, see the README in
// ../shared/fixtures): loads the model and reads reference tensors.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "engine/cpu/cpu_backend.h"
#include "engine/model/model_config.h"
#include "engine/model/safetensors.h"
#include "engine/model/weights.h"

namespace temper::engine::testing {

// tests/data, or the directory $TEMPER_TEST_DATA names: binaries built here and run on another
// machine (a lent GPU, bench/gpu_bundle.sh) find their fixtures there.
inline std::filesystem::path TestDataDir() {
  const char* moved = std::getenv("TEMPER_TEST_DATA");
  return moved && *moved ? std::filesystem::path(moved) : std::filesystem::path(TEMPER_TEST_DATA_DIR);
}

inline std::filesystem::path TinyDir() { return TestDataDir() / "gemma4-tiny"; }

struct TinyModel {
  ModelConfig config;
  std::shared_ptr<const ModelWeights> weights;
};

inline const TinyModel& Tiny() {
  static const TinyModel model = [] {
    TinyModel m;
    auto config = LoadModelConfig(TinyDir() / "config.json");
    REQUIRE(config.ok());
    m.config = *config;
    auto weights = ModelWeights::Load(TinyDir(), m.config);
    if (!weights.ok()) FAIL(weights.status().ToString());
    m.weights = std::move(*weights);
    return m;
  }();
  return model;
}

inline std::unique_ptr<CpuBackend> TinyBackend(int tp = 1, int threads = 2,
                                               std::shared_ptr<const DrafterWeights> drafter = nullptr) {
  CpuBackendOptions options;
  options.drafter = std::move(drafter);
  options.tp = tp;
  options.threads = threads;
  options.max_context = 256;
  options.kv.max_tokens = 512;
  options.kv.block_tokens = 4;  // small blocks, so a prompt spans several
  auto backend = CpuBackend::Create(Tiny().config, Tiny().weights, options);
  if (!backend.ok()) FAIL(backend.status().ToString());
  return std::move(*backend);
}

// A tensor of `file` as a vector of T (F32 -> float, I32 -> int32_t), its shape in `shape`.
template <typename T>
std::vector<T> TensorValues(const SafetensorsFile& file, const std::string& name, std::vector<int64_t>* shape) {
  const TensorInfo* info = file.Find(name);
  REQUIRE(info != nullptr);
  REQUIRE(DTypeSize(info->dtype) == sizeof(T));
  if (shape) *shape = info->shape;
  std::vector<T> out(static_cast<size_t>(info->NumElements()));
  std::memcpy(out.data(), file.Data(*info).data(), out.size() * sizeof(T));
  return out;
}

// A tensor of the golden reference.safetensors.
template <typename T>
std::vector<T> Reference(const std::string& name, std::vector<int64_t>* shape = nullptr) {
  static const SafetensorsFile* file = [] {
    auto f = SafetensorsFile::Open(TinyDir() / "reference.safetensors");
    REQUIRE(f.ok());
    return new SafetensorsFile(std::move(*f));
  }();
  return TensorValues<T>(*file, name, shape);
}

inline float MaxAbsDiff(const float* a, const float* b, size_t n) {
  float m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

inline float MaxAbs(const float* a, size_t n) {
  float m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(a[i]));
  return m;
}

inline int32_t ArgMax(const float* row, int n) {
  int32_t best = 0;
  for (int i = 1; i < n; ++i) {
    if (row[i] > row[best]) best = i;
  }
  return best;
}

// The prompt followed by the first 15 greedy tokens: teacher-forcing it gives, at positions
// T-1 .. T+14, the rows of greedy_logits_J.
inline std::vector<int32_t> TeacherForcedIds(int prompt) {
  std::vector<int32_t> ids = Reference<int32_t>("input_ids_" + std::to_string(prompt));
  std::vector<int32_t> greedy = Reference<int32_t>("greedy_" + std::to_string(prompt));
  ids.insert(ids.end(), greedy.begin(), greedy.end() - 1);
  return ids;
}

}  // namespace temper::engine::testing
