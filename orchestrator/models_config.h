// ModelsConfig: models.yaml, which maps each role (architect, worker, reflector) to an endpoint and
// its sampling and context limits. Endpoints are named so several roles can share one: one in-process
// engine instance serves every role mapped to it.
//
//   endpoints:
//     local:  {type: inprocess, model_dir: /var/lib/temper/models/gemma-4-31b-it, tp: 4, gpus: [0,1,2,3]}
//     remote: {type: openai, base_url: http://gpu:8000/v1, model: google/gemma-4-31b-it, api_key_env: KEY}
//     tape:   {type: replay, transcript: transcripts/run1.jsonl}
//   roles:
//     architect: {endpoint: local, temperature: 0.3, max_output_tokens: 2048, context_tokens: 16384}
//
// Every error names file:line:column and the field; unknown keys are errors.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "common/status.h"

namespace temper {

struct InprocessEndpoint {
  std::string model_dir;
  uint32_t tp = 1;                 // tensor-parallel ranks
  std::vector<uint32_t> gpus;      // CUDA device ordinals, one per rank; may repeat for testing
  double kv_memory_fraction = 0.9; // of the memory left after weights, for the KV pool
  uint32_t max_context = 32768;    // tokens per sequence
};

struct OpenAIEndpoint {
  std::string base_url;     // up to and including /v1
  std::string model;
  std::string api_key_env;  // the variable holding the key; or
  std::string api_key_file; // a file holding it (never both; neither for servers without auth)
  std::chrono::seconds timeout{300};
  uint32_t max_retries = 4;  // on 429 and 5xx, with exponential backoff
};

struct ReplayEndpoint {
  std::string transcript;  // JSONL of recorded request/response pairs
};

struct EndpointConfig {
  std::string name;
  std::variant<InprocessEndpoint, OpenAIEndpoint, ReplayEndpoint> spec;
};

struct SamplingConfig {
  double temperature = 0.0;  // 0 = greedy
  double top_p = 1.0;
  uint32_t top_k = 0;        // 0 = off
  double min_p = 0.0;
  std::optional<uint64_t> seed;
};

struct RoleConfig {
  std::string role;
  std::string endpoint;
  SamplingConfig sampling;
  uint32_t max_output_tokens = 4096;  // per call
  uint32_t context_tokens = 32768;    // prompt + output budget per call
};

struct ModelsConfig {
  std::string source;
  std::map<std::string, EndpointConfig> endpoints;
  std::map<std::string, RoleConfig> roles;  // every name in kRoleNames, nothing else

  static constexpr const char* kRoleNames[] = {"architect", "worker", "reflector"};
};

Result<ModelsConfig> LoadModelsConfig(const std::string& path);
Result<ModelsConfig> ParseModelsConfig(const std::string& text, const std::string& source_name);

}  // namespace temper
