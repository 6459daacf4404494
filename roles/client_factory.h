// Builds the model client a models.yaml endpoint describes: `openai` → OpenAIClient, `replay` →
// ReplayClient. `inprocess` needs the engine's in-process serving API, which is not part of this
// build yet: asking for it is an Unimplemented error that says what to use instead.
// With `record_to` non-empty, the client is wrapped in a RecordingClient appending to that file.
// Thread safety: the factory is a pure function; see each client for its own.
#pragma once

#include <memory>
#include <string>

#include "common/log.h"
#include "common/status.h"
#include "roles/endpoint_config.h"
#include "roles/model_client.h"

namespace temper {

Result<std::unique_ptr<ModelClient>> MakeModelClient(const EndpointConfig& endpoint, const Logger& logger,
                                                     const std::string& record_to = "");

}  // namespace temper
