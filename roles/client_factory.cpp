#include "roles/client_factory.h"

#include <fmt/format.h>

#include "roles/inprocess_client.h"
#include "roles/openai_client.h"
#include "roles/replay_client.h"

namespace temper {

Result<std::unique_ptr<ModelClient>> MakeModelClient(const EndpointConfig& endpoint, const Logger& logger,
                                                     const std::string& record_to) {
  std::unique_ptr<ModelClient> client;
  if (const auto* o = std::get_if<OpenAIEndpoint>(&endpoint.spec)) {
    TEMPER_ASSIGN_OR_RETURN(client, OpenAIClient::Create(endpoint.name, *o, logger));
  } else if (const auto* r = std::get_if<ReplayEndpoint>(&endpoint.spec)) {
    if (!record_to.empty() && record_to == r->transcript) {
      return Status::InvalidArgument(
          fmt::format("endpoint '{}': cannot record into the transcript {} that it replays", endpoint.name, record_to));
    }
    TEMPER_ASSIGN_OR_RETURN(client, ReplayClient::Open(endpoint.name, r->transcript));
  } else {
    const auto& inprocess = std::get<InprocessEndpoint>(endpoint.spec);
    TEMPER_ASSIGN_OR_RETURN(client, InprocessClient::Create(endpoint.name, inprocess, logger));
  }
  if (record_to.empty()) return client;
  TEMPER_ASSIGN_OR_RETURN(auto recording, RecordingClient::Create(std::move(client), record_to));
  return std::unique_ptr<ModelClient>(std::move(recording));
}

}  // namespace temper
