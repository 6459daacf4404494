// ModelClient: one chat completion against whatever serves a role (a remote OpenAI-compatible
// server, recorded transcripts, or the in-process engine), in one vocabulary the roles share.
//
// The request carries the whole conversation (system, user, assistant and tool messages), the tools
// the model may call (each with a JSON schema for its arguments), sampling, and limits. The response
// carries the text, the tool calls the server recognised (OpenAI `tool_calls`; models that write
// calls as text are handled by roles/tool_call_parser), why generation stopped, token usage
// (including prompt tokens served from a prefix cache) and latency, which the orchestrator journals.
//
// Contract of Chat():
//   - returns a ChatResponse, or a Status naming the endpoint and what failed (HTTP status and a body
//     excerpt, a transport error, a malformed reply, a missing transcript entry); never throws;
//   - when `stream` is non-null the client streams and calls on_text / on_reasoning with each piece
//     as it arrives, on the calling thread, before Chat() returns; the final response still holds the
//     whole text;
//   - secrets (API keys) never appear in a Status or a log line.
// Thread safety: implementations document theirs; all of ours allow concurrent Chat() calls.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "engine/serve/scheduler.h"
#include "roles/endpoint_config.h"
#include "roles/token_estimator.h"
#include "roles/token_usage.h"

namespace temper {

enum class ChatRole { kSystem, kUser, kAssistant, kTool };
std::string_view ChatRoleName(ChatRole role);  // "system", "user", "assistant", "tool"

// A call the model asked for. `arguments` is the raw JSON text the model produced: it is validated
// against the tool's schema by the role, not by the transport, so a malformed call can be explained
// back to the model instead of failing the request.
struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;
};

struct ChatMessage {
  ChatRole role = ChatRole::kUser;
  std::string content;
  std::vector<ToolCall> tool_calls;  // assistant messages only
  std::string tool_call_id;          // tool messages only: the call this answers
  std::string name;                  // tool messages only: the tool's name
};

struct ToolDeclaration {
  std::string name;
  std::string description;
  nlohmann::json parameters;  // a JSON Schema object
};

struct ChatRequest {
  std::string role_name;  // "architect", "worker", "reflector": for errors and the journal
  std::vector<ChatMessage> messages;
  std::vector<ToolDeclaration> tools;
  SamplingConfig sampling;
  uint32_t max_tokens = 1024;
  std::vector<std::string> stop;
  // When not null: the JSON schema the answer is an instance of (the Architect's pick and
  // re-engagement). An endpoint that can enforce it constrains sampling to it (inprocess,
  // engine/constrain/); the others rely on the prompt, and the caller's parser checks either way.
  nlohmann::ordered_json answer_schema;
  // The answer must be tool calls (the Worker's protocol has no other answer). An endpoint that can
  // enforce it (inprocess) constrains sampling to calls of `tools` whose arguments keep to their
  // schemas, ending them within max_tokens; the others rely on the prompt, and the caller's checks
  // hold either way. Not together with answer_schema.
  bool require_tool_call = false;
};

enum class FinishReason { kStop, kLength, kToolCalls, kContentFilter, kOther };
std::string_view FinishReasonName(FinishReason reason);

struct ChatResponse {
  std::string text;
  std::string reasoning;  // thinking text the server separated from the answer, if any
  std::vector<ToolCall> tool_calls;
  // Set when the model's reply broke its own format (a native tool call that does not parse): why,
  // with where. The roles explain it back to the model like any unusable answer, rather than
  // ending the conversation; `text` holds the reply, verbatim from the point that broke.
  std::string malformed_reply;
  FinishReason finish_reason = FinishReason::kOther;
  TokenUsage usage;
  std::string model;                     // as the server named it
  std::chrono::milliseconds latency{0};  // wall time of Chat(), retries included
  uint32_t attempts = 1;                 // HTTP attempts made (1 = no retry)
};

struct StreamCallbacks {
  std::function<void(std::string_view)> on_text;
  std::function<void(std::string_view)> on_reasoning;
};

class ModelClient {
 public:
  virtual ~ModelClient() = default;
  virtual Result<ChatResponse> Chat(const ChatRequest& request, const StreamCallbacks* stream = nullptr) = 0;
  // The models.yaml name of the endpoint, for errors and the journal.
  virtual const std::string& endpoint_name() const = 0;
  // Counts text as this endpoint's model will: with its own tokenizer where the client has one
  // (inprocess). Null where it has none; prompts are then sized by BytesTokenEstimator's
  // deliberate over-count. Lives as long as the client.
  virtual const TokenEstimator* token_counter() const { return nullptr; }
  // The serving metrics of the engine behind the endpoint when it runs in this process
  // (inprocess: KV use, running sequences, tokens/s); nullopt for a remote server.
  virtual std::optional<engine::SchedulerMetrics> serving_metrics() const { return std::nullopt; }
};

}  // namespace temper
