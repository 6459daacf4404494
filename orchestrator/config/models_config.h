// ModelsConfig: models.yaml, which maps each role (architect, worker, reflector) to an endpoint and
// its sampling and context limits. Endpoints are named so several roles can share one: one in-process
// engine instance serves every role mapped to it.
//
//   endpoints:
//     local:  {type: inprocess, model_dir: /var/lib/temper/models/gemma-4-31b-it, tp: 4, gpus: [0,1,2,3]}
//     remote: {type: openai, base_url: http://gpu:8000/v1, model: google/gemma-4-31b-it, api_key_env: KEY,
//              max_seqs: 8}
//     tape:   {type: replay, transcript: transcripts/run1.jsonl}
//   roles:
//     architect: {endpoint: local, temperature: 0.3, max_output_tokens: 2048, context_tokens: 16384}
//
// Every error names file:line:column and the field; unknown keys are errors.
#pragma once

#include <map>
#include <string>

#include "common/status.h"
#include "roles/endpoint_config.h"

namespace temper {

struct ModelsConfig {
  std::string source;
  std::map<std::string, EndpointConfig> endpoints;
  std::map<std::string, RoleConfig> roles;  // every name in kRoleNames, nothing else

  static constexpr const char* kRoleNames[] = {"architect", "worker", "reflector"};
};

Result<ModelsConfig> LoadModelsConfig(const std::string& path);
Result<ModelsConfig> ParseModelsConfig(const std::string& text, const std::string& source_name);

}  // namespace temper
