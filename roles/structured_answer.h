// Asking a model for a structured answer (a JSON object) with a bounded number of corrections: when
// the answer does not parse, the model sees its own answer and the parser's message, and tries
// again. Never a crash, never a silent default: after the last retry the error is returned, naming
// the role and what was wrong.
// Thread safety: as the client's Chat().
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "roles/model_client.h"

namespace temper {

struct StructuredCall {
  std::vector<ChatResponse> responses;   // every response received, for the journal (usage, latency)
  std::vector<std::string> corrections;  // the error messages fed back
};

// Sends `request`; `parse` returns OK when the answer is acceptable (having stored what it needs)
// or InvalidArgument with a message for the model. Up to `max_corrections` retries. Transport
// errors from the client are returned at once.
Status AskStructured(ModelClient& client, ChatRequest request, const std::function<Status(const ChatResponse&)>& parse,
                     int max_corrections, StructuredCall* record);

}  // namespace temper
