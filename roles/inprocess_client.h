// InprocessClient: a ModelClient served by temper's own engine (Gemma 4 or Gemma 3) in this process —
// the `inprocess` endpoint of models.yaml. It loads the model directory once (engine/loaded_model.h),
// runs it on the CPU backend, and answers every Chat() through one engine::ChatEngine, whose
// scheduler batches concurrent requests and whose prefix cache serves the part of a prompt an
// earlier request of the same conversation already computed (reported as cached prompt tokens).
//
// One client per endpoint: the client owns the loaded weights, the KV cache and the scheduler, so
// the orchestrator builds it once per endpoint name and shares it among every role mapped to that
// endpoint (a second client of the same endpoint would load a second copy of the model).
//
// Request conversion (ToEngineRequest): system, user and assistant messages map one to one; an
// assistant message's tool calls keep their arguments (JSON text that must hold an object); a
// tool message becomes a tool response on the assistant message whose call it answers (found by
// tool_call_id, else by name), its content a JSON object when it parses as one and text otherwise —
// Gemma renders tool results inside the model turn that asked for them. Errors from rendering
// that name `messages[N]` count such an assistant message and its tool results as one message.
// Thinking is off (the roles' protocol has no place for it). A request without a sampling seed
// gets a fresh random one per call. Answer schemas and required tool calls are enforced by
// grammar-constrained decoding unless the endpoint turns it off (constrained_decoding: false), and
// so are Gemma 3's JSON tool calls when the reply may be text or a call.
//
// Reply conversion: visible text and thinking stream to StreamCallbacks as the engine produces
// them; tool calls arrive already parsed from the model's format (Gemma 4's native calls, Gemma 3's
// JSON, engine/tokenizer/chat_format.h) and get ids "call_0", "call_1", ... within the response
// (ToolCallsFromEngine); finish reasons stop / length / tool_calls map one to one; usage carries
// the prompt, cached prompt and completion tokens.
//
// Errors name the endpoint and the role: "endpoint 'local' (inprocess, worker role): ...". A reply
// the chat format cannot parse (a malformed native tool call) is InvalidArgument "malformed model
// reply: ..." with the byte offset — the model's failure, not the transport's; a cancelled request
// is Cancelled; engine failures keep the engine's code.
//
// Thread safety: Chat() may be called from any number of threads at once; each call blocks until
// its request finishes, and the scheduler runs the calls in one batch. Callbacks run on the
// calling thread. Ownership: the client owns the model, backend and engine and borrows the logger;
// it must outlive every Chat() call (destruction cancels requests still queued).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/log.h"
#include "common/status.h"
#include "engine/backend.h"
#include "engine/loaded_model.h"
#include "engine/serve/chat_engine.h"
#include "roles/endpoint_config.h"
#include "roles/model_client.h"

namespace temper {

// How the backend and scheduler are sized. models.yaml does not set these; the defaults suit the
// roles' load (a few rules in flight, each with an Architect, Worker and Reflector).
struct InprocessClientOptions {
  int cpu_threads = 0;             // CPU backend: in all, split over the tp ranks; 0: one per hardware thread
  int max_sequences = 8;           // requests decoded at once; the rest wait in the scheduler's queue
  int max_snapshots = 32;          // conversation prefixes the prefix cache may pin (at most 8 on GPUs,
                                   // where each holds a copy of every sliding layer's window)
  int64_t kv_tokens = 0;           // CPU backend: paged KV pool in tokens; 0: 4 × the context limit (on GPUs
                                   // the memory plan sizes it from kv_memory_fraction)
  int64_t max_batch_tokens = 512;  // tokens per forward pass
};

class InprocessClient final : public ModelClient {
 public:
  // Loads `endpoint.model_dir` (config.json, safetensors, tokenizer.json) and starts the engine,
  // with `endpoint.max_context` as the longest sequence (lowered, with a warning, to the model's
  // max_position_embeddings): on the CUDA backend, one rank per GPU of `endpoint.gpus`, or with
  // none listed on `endpoint.tp` CPU tensor-parallel ranks.
  // Errors, each naming the endpoint: InvalidArgument for an empty model_dir or a max_context of
  // 0; LoadModel's errors naming the file (missing directory, config.json, tokenizer.json,
  // weights; a tokenizer of another model); engine::OpenBackend's, naming the model and the tp or
  // GPUs (a tp that cannot split the heads; Unimplemented in a build without CUDA, no such GPU,
  // out of memory); ChatEngine::Create's (a tokenizer without Gemma 4's or Gemma 3's control tokens).
  static Result<std::unique_ptr<InprocessClient>> Create(std::string endpoint_name, const InprocessEndpoint& endpoint,
                                                         const Logger& logger, InprocessClientOptions options = {});
  InprocessClient(const InprocessClient&) = delete;
  InprocessClient& operator=(const InprocessClient&) = delete;

  Result<ChatResponse> Chat(const ChatRequest& request, const StreamCallbacks* stream) override;
  const std::string& endpoint_name() const override { return name_; }

  // For prompt token counts (RenderPrompt) and serving metrics (KV use, prefix-cache hit rate).
  const engine::ChatEngine& engine() const { return *engine_; }
  // Message text counted with the model's tokenizer (ChatEngine::CountTokens).
  const TokenEstimator* token_counter() const override { return counter_.get(); }
  std::optional<engine::SchedulerMetrics> serving_metrics() const override { return engine_->metrics(); }

 private:
  InprocessClient(std::string name, std::string model_name, engine::LoadedModel model, const Logger& logger);

  const std::string name_;
  const std::string model_name_;  // the model directory's name, reported as ChatResponse::model
  bool constrain_ = true;         // InprocessEndpoint::constrained_decoding
  const Logger& logger_;
  engine::LoadedModel model_;                   // config, weights and the tokenizer the engine borrows
  std::unique_ptr<engine::Backend> backend_;    // borrowed by the engine
  std::unique_ptr<engine::ChatEngine> engine_;  // destroyed after the counter, before what it borrows
  std::unique_ptr<TokenEstimator> counter_;     // counts with engine_
};

// The engine's form of `request`. `seed_if_unset` seeds sampling when request.sampling.seed is
// empty. Errors: InvalidArgument naming the message, e.g. "messages[3] (tool): tool_call_id 'x'
// names no tool call of the assistant message before it", "messages[2] (assistant).tool_calls[0]
// 'run_command': arguments are not a JSON object".
// With `constrain` off, answer_schema and require_tool_call are left to the caller's checks.
Result<engine::ChatRequest> ToEngineRequest(const ChatRequest& request, uint64_t seed_if_unset, bool constrain = true);

// The roles' form of the tool calls the engine parsed: ids "call_0", "call_1", ... in order, and
// the arguments as compact JSON text (bytes that are not UTF-8 become U+FFFD).
std::vector<ToolCall> ToolCallsFromEngine(std::span<const engine::ToolCall> calls);

}  // namespace temper
