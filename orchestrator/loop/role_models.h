// RoleModels: the three roles and the model clients that serve them, built once from models.yaml.
// One client per endpoint, shared by every role mapped to it (an in-process engine is loaded
// once); clients allow concurrent Chat(), so the loops of several targets call them at once.
// Thread safety: immutable after Create; the roles' methods are const.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "common/log.h"
#include "common/status.h"
#include "orchestrator/config/models_config.h"
#include "orchestrator/config/parallel_attempts.h"
#include "roles/architect.h"
#include "roles/model_client.h"
#include "roles/prompt_library.h"
#include "roles/reflector.h"
#include "roles/token_estimator.h"
#include "roles/worker.h"

namespace temper {

class RoleModels {
 public:
  // `log` must outlive the result. Errors: the client factory's, naming the endpoint.
  static Result<std::unique_ptr<RoleModels>> Create(const ModelsConfig& config, const Logger& log);
  RoleModels(const RoleModels&) = delete;
  RoleModels& operator=(const RoleModels&) = delete;

  const Architect& architect() const { return *architect_; }
  const Reflector& reflector() const { return *reflector_; }
  // A Worker with this attempt's budget.
  Worker MakeWorker(const WorkerBudget& budget) const;

  ModelClient& architect_client() const { return Client("architect"); }
  ModelClient& worker_client() const { return Client("worker"); }
  ModelClient& reflector_client() const { return Client("reflector"); }

  // Each role's endpoint name ("architect" → "local"), and the clients by endpoint name.
  const std::map<std::string, std::string>& endpoint_of() const { return endpoint_of_; }
  const std::map<std::string, std::unique_ptr<ModelClient>>& clients() const { return clients_; }
  // The Worker role's endpoint and the requests it decodes at once: an inprocess endpoint's
  // scheduler's (InprocessClientOptions::max_sequences), an openai endpoint's max_seqs when
  // models.yaml states it; nullopt otherwise. What loop.parallel_attempts: auto sizes from.
  EndpointCapacity worker_capacity() const;

 private:
  RoleModels() = default;
  ModelClient& Client(const std::string& role) const { return *clients_.at(endpoint_of_.at(role)); }
  // The role's endpoint's own token counter, else the byte estimate.
  const TokenEstimator& CounterFor(const std::string& role) const;

  ModelsConfig config_;
  PromptLibrary prompts_ = PromptLibrary::Embedded();
  BytesTokenEstimator estimator_;                                // for endpoints without a tokenizer
  std::map<std::string, std::unique_ptr<ModelClient>> clients_;  // by endpoint name
  std::map<std::string, std::string> endpoint_of_;               // role → endpoint
  std::unique_ptr<Architect> architect_;
  std::unique_ptr<Reflector> reflector_;
};

}  // namespace temper
