// Endpoint and role settings as plain values: which model server a role talks to, how it samples
// and how many tokens it may spend. orchestrator/models_config parses them from models.yaml; roles/
// builds model clients from them. They live here, not in orchestrator/, because dependencies flow
// orchestrator → roles and the client factory needs them.
//
// Thread safety: plain values.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace temper {

struct InprocessEndpoint {
  std::string model_dir;
  // Gemma 4's MTP drafter for the model (a "-assistant" checkpoint directory), or empty: drafts
  // for speculative decoding then come from prompt lookup.
  std::string drafter_dir;
  uint32_t tp = 1;                  // tensor-parallel ranks
  std::vector<uint32_t> gpus;       // CUDA device ordinals, one per rank (may repeat for testing); empty: CPU
  double kv_memory_fraction = 0.9;  // of the memory left after weights, for the KV pool
  uint32_t max_context = 32768;     // tokens per sequence
  // Enforce the roles' answer schemas and required tool calls with grammar-constrained decoding
  // (engine/constrain/). Off, the model's replies are only checked after the fact, as with a remote
  // server: for comparison runs, or a model the grammars do not suit.
  bool constrained_decoding = true;
};

struct OpenAIEndpoint {
  std::string base_url;  // up to and including /v1
  std::string model;
  std::string api_key_env;   // the variable holding the key; or
  std::string api_key_file;  // a file holding it (never both; neither for servers without auth)
  std::chrono::seconds timeout{300};
  uint32_t max_retries = 4;  // on 429 and 5xx, with exponential backoff
  // Requests the server decodes at once (vLLM's --max-num-seqs), when the operator states it; the
  // loop sizes loop.parallel_attempts: auto from it (orchestrator/config/parallel_attempts.h).
  std::optional<uint32_t> max_seqs;
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
  uint32_t top_k = 0;  // 0 = off
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

}  // namespace temper
