// The config.json reading that the target's config (model_config.h) and the MTP drafter's
// (drafter_config.h) share: a key reader that applies transformers' defaults and names the file and
// the key in every error, and the parser of a Gemma4TextConfig object. Internal to engine/model.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/status.h"
#include "engine/model/model_config.h"

namespace temper::engine {

// Reads one key of a config object, applying transformers' default when the key is absent (or
// null, for the keys HF declares nullable). Errors name the file and the key.
class KeyReader {
 public:
  KeyReader(const nlohmann::json& obj, std::string source, std::string path_prefix)
      : obj_(obj), source_(std::move(source)), prefix_(std::move(path_prefix)) {}

  Status Error(std::string_view key, std::string_view what) const {
    return Status::InvalidArgument(fmt::format("{}: key '{}{}' {}", source_, prefix_, key, what));
  }
  Status Refuse(std::string_view key, std::string_view what) const {
    return Status::Unimplemented(fmt::format("{}: key '{}{}' {}", source_, prefix_, key, what));
  }
  bool Has(std::string_view key) const {
    auto it = obj_.find(key);
    return it != obj_.end() && !it->is_null();
  }
  const nlohmann::json* Find(std::string_view key) const {
    auto it = obj_.find(key);
    return it == obj_.end() || it->is_null() ? nullptr : &*it;
  }

  Result<int64_t> Int(std::string_view key, int64_t fallback) const {
    const nlohmann::json* v = Find(key);
    if (!v) return fallback;
    if (!v->is_number_integer()) return Error(key, fmt::format("must be an integer, got {}", v->dump()));
    return v->get<int64_t>();
  }
  // A positive integer that fits an int (sizes and counts).
  Result<int> Size(std::string_view key, int64_t fallback) const {
    TEMPER_ASSIGN_OR_RETURN(int64_t v, Int(key, fallback));
    if (v <= 0 || v > (int64_t{1} << 30)) return Error(key, fmt::format("must be in [1, 2^30], got {}", v));
    return static_cast<int>(v);
  }
  Result<double> Number(std::string_view key, double fallback) const {
    const nlohmann::json* v = Find(key);
    if (!v) return fallback;
    if (!v->is_number()) return Error(key, fmt::format("must be a number, got {}", v->dump()));
    return v->get<double>();
  }
  Result<bool> Bool(std::string_view key, bool fallback) const {
    const nlohmann::json* v = Find(key);
    if (!v) return fallback;
    if (!v->is_boolean()) return Error(key, fmt::format("must be true or false, got {}", v->dump()));
    return v->get<bool>();
  }
  Result<std::string> String(std::string_view key, std::string fallback) const {
    const nlohmann::json* v = Find(key);
    if (!v) return fallback;
    if (!v->is_string()) return Error(key, fmt::format("must be a string, got {}", v->dump()));
    return v->get<std::string>();
  }

  const std::string& source() const { return source_; }
  const std::string& prefix() const { return prefix_; }

 private:
  const nlohmann::json& obj_;
  std::string source_;
  std::string prefix_;
};

// Which decoder a Gemma4TextConfig object describes. A target decoder computes its own K and V on
// every layer (num_kv_shared_layers must be 0). An MTP drafter's decoder computes none: every layer
// reads the target's cache, so num_kv_shared_layers must equal num_hidden_layers (absent or 0
// means that, as Gemma4AssistantConfig's __post_init__ sets it).
enum class TextDecoderRole { kTarget, kDrafter };

// Parses a Gemma4TextConfig object. `r` carries the file name and the key path prefix. Errors:
// InvalidArgument for a bad value, Unimplemented for a refused feature, each naming the key.
Result<ModelConfig> ParseTextConfig(const KeyReader& r, const nlohmann::json& obj, TextDecoderRole role);

// The checkpoint's dtype: `dtype` (transformers 5) or `torch_dtype` (4.x), looked up in `first`
// (may be null) and then in `root`, with the key it was found under ("" when neither has it).
struct DTypeKey {
  std::string dtype;
  std::string key;
};
Result<DTypeKey> FindDType(const nlohmann::json* first, std::string_view first_prefix, const nlohmann::json& root,
                           std::string_view source);

}  // namespace temper::engine
