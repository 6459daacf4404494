// Builds the model client a models.yaml endpoint describes: `openai` → OpenAIClient, `replay` →
// ReplayClient, `inprocess` → InprocessClient (which loads the model and owns the engine serving it).
// With `record_to` non-empty, the client is wrapped in a RecordingClient appending to that file.
//
// Call it once per endpoint name and share the client among every role mapped to that endpoint:
// each call for an inprocess endpoint loads the model again, with its own weights, KV cache and
// scheduler, and every client serves concurrent Chat() calls (the in-process one batches them).
// Thread safety: the factory holds no state; see each client for its own. The logger is borrowed by
// the client and must outlive it.
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
