#include "orchestrator/loop/role_models.h"

#include <fmt/format.h>

#include "roles/client_factory.h"
#include "roles/inprocess_client.h"

namespace temper {

Result<std::unique_ptr<RoleModels>> RoleModels::Create(const ModelsConfig& config, const Logger& log) {
  std::unique_ptr<RoleModels> models(new RoleModels());
  models->config_ = config;
  for (const auto& [role, role_config] : config.roles) {
    auto endpoint = config.endpoints.find(role_config.endpoint);
    if (endpoint == config.endpoints.end()) {
      return Status::InvalidArgument(fmt::format("{}: roles.{}.endpoint '{}' is not defined under endpoints",
                                                 config.source, role, role_config.endpoint));
    }
    models->endpoint_of_[role] = role_config.endpoint;
    if (models->clients_.contains(role_config.endpoint)) continue;
    Result<std::unique_ptr<ModelClient>> client = MakeModelClient(endpoint->second, log);
    if (!client.ok())
      return client.status().WithContext(fmt::format("{}: endpoint {}", config.source, endpoint->first));
    models->clients_[role_config.endpoint] = std::move(*client);
  }
  for (const char* role : ModelsConfig::kRoleNames) {
    if (!models->endpoint_of_.contains(role)) {
      return Status::InvalidArgument(fmt::format("{}: no model for role {}", config.source, role));
    }
  }
  models->architect_ =
      std::make_unique<Architect>(models->prompts_, config.roles.at("architect"), models->CounterFor("architect"));
  models->reflector_ =
      std::make_unique<Reflector>(models->prompts_, config.roles.at("reflector"), models->CounterFor("reflector"));
  return models;
}

Worker RoleModels::MakeWorker(const WorkerBudget& budget) const {
  return Worker(prompts_, config_.roles.at("worker"), CounterFor("worker"), budget);
}

const TokenEstimator& RoleModels::CounterFor(const std::string& role) const {
  const TokenEstimator* own = Client(role).token_counter();
  return own != nullptr ? *own : estimator_;
}

EndpointCapacity RoleModels::worker_capacity() const {
  const std::string& name = endpoint_of_.at("worker");
  EndpointCapacity out{name, std::nullopt};
  const EndpointConfig& endpoint = config_.endpoints.at(name);
  if (const auto* openai = std::get_if<OpenAIEndpoint>(&endpoint.spec)) {
    out.max_seqs = openai->max_seqs;
  } else if (std::holds_alternative<InprocessEndpoint>(endpoint.spec)) {
    // MakeModelClient starts every inprocess endpoint with the default options.
    out.max_seqs = static_cast<uint32_t>(InprocessClientOptions{}.max_sequences);
  }
  return out;
}

}  // namespace temper
