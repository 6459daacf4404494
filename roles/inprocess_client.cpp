#include "roles/inprocess_client.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <random>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/open_backend.h"

namespace temper {

namespace {

// Message text as the engine will count it: encoded as ChatFormat encodes content.
class EngineTokenCounter final : public TokenEstimator {
 public:
  explicit EngineTokenCounter(const engine::ChatEngine& engine) : engine_(engine) {}
  size_t Count(std::string_view text) const override { return static_cast<size_t>(engine_.CountTokens(text)); }

 private:
  const engine::ChatEngine& engine_;
};

constexpr int kGpuMaxSnapshots = 8;

using nlohmann::json;

// A tool call's arguments as the engine wants them: an object. Accepts JSON text encoded once
// more as a JSON string, as ResolveToolCalls does (some models double-encode).
std::optional<json> ArgumentsObject(const std::string& text) {
  if (text.empty()) return json::object();
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_string()) j = json::parse(j.get<std::string>(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

engine::ChatRole EngineRole(ChatRole role) {
  switch (role) {
    case ChatRole::kSystem:
      return engine::ChatRole::kSystem;
    case ChatRole::kAssistant:
      return engine::ChatRole::kModel;
    case ChatRole::kUser:
    case ChatRole::kTool:
      break;
  }
  return engine::ChatRole::kUser;
}

}  // namespace

Result<engine::ChatRequest> ToEngineRequest(const ChatRequest& request, uint64_t seed_if_unset, bool constrain) {
  engine::ChatRequest out;
  engine::Conversation& conv = out.conversation;
  // The request's index of the assistant message that tool messages answer: the last message
  // before them, which is also the last of conv.messages. kNoCaller when there is none.
  constexpr size_t kNoCaller = SIZE_MAX;
  size_t caller = kNoCaller;
  for (size_t i = 0; i < request.messages.size(); ++i) {
    const ChatMessage& m = request.messages[i];
    const std::string field = fmt::format("messages[{}] ({})", i, ChatRoleName(m.role));
    if (m.role == ChatRole::kTool) {
      if (caller == kNoCaller || request.messages[caller].tool_calls.empty()) {
        return Status::InvalidArgument(
            fmt::format("{}: a tool message must follow an assistant message with tool calls", field));
      }
      const ChatMessage& asked = request.messages[caller];
      std::string name;
      if (!m.tool_call_id.empty()) {
        auto it = std::find_if(asked.tool_calls.begin(), asked.tool_calls.end(),
                               [&](const ToolCall& c) { return c.id == m.tool_call_id; });
        if (it == asked.tool_calls.end()) {
          return Status::InvalidArgument(
              fmt::format("{}: tool_call_id '{}' names no tool call of messages[{}]", field, m.tool_call_id, caller));
        }
        if (!m.name.empty() && m.name != it->name) {
          return Status::InvalidArgument(fmt::format("{}: name '{}' differs from '{}', the tool that call '{}' called",
                                                     field, m.name, it->name, m.tool_call_id));
        }
        name = it->name;
      } else if (!m.name.empty()) {
        name = m.name;
      } else {
        return Status::InvalidArgument(fmt::format("{}: needs a tool_call_id or a name", field));
      }
      json parsed = json::parse(m.content, nullptr, /*allow_exceptions=*/false);
      conv.messages.back().tool_responses.push_back(
          {std::move(name), !parsed.is_discarded() && parsed.is_object() ? std::move(parsed) : json(m.content)});
      continue;
    }
    engine::ChatMessage e{.role = EngineRole(m.role), .content = m.content};
    if (!m.tool_calls.empty() && m.role != ChatRole::kAssistant) {
      return Status::InvalidArgument(fmt::format("{}: only assistant messages carry tool calls", field));
    }
    for (size_t j = 0; j < m.tool_calls.size(); ++j) {
      const ToolCall& call = m.tool_calls[j];
      std::optional<json> arguments = ArgumentsObject(call.arguments);
      if (!arguments) {
        return Status::InvalidArgument(
            fmt::format("{}.tool_calls[{}] '{}': arguments are not a JSON object", field, j, call.name));
      }
      e.tool_calls.push_back({call.name, std::move(*arguments)});
    }
    conv.messages.push_back(std::move(e));
    caller = m.role == ChatRole::kAssistant ? i : kNoCaller;
  }
  for (const ToolDeclaration& t : request.tools) conv.tools.push_back({t.name, t.description, t.parameters});
  conv.enable_thinking = false;

  const SamplingConfig& s = request.sampling;
  out.sampling.temperature = static_cast<float>(s.temperature);
  out.sampling.top_p = static_cast<float>(s.top_p);
  out.sampling.top_k = static_cast<int>(std::min<uint32_t>(s.top_k, INT_MAX));
  out.sampling.min_p = static_cast<float>(s.min_p);
  out.sampling.seed = s.seed.value_or(seed_if_unset);
  out.max_tokens = request.max_tokens;
  out.stop_strings = request.stop;
  // Gemma 3's calls are JSON: under the grammar by default even when the reply may be text.
  out.constrain_auto_tool_calls = constrain;
  if (!constrain) return out;
  out.answer_schema = request.answer_schema;  // the engine compiles it, naming what it cannot honour
  if (request.require_tool_call) out.tool_choice = engine::ToolChoice::kRequired;
  return out;
}

std::vector<ToolCall> ToolCallsFromEngine(std::span<const engine::ToolCall> calls) {
  std::vector<ToolCall> out;
  out.reserve(calls.size());
  for (size_t i = 0; i < calls.size(); ++i) {
    // A model can write bytes that are not UTF-8 into an argument; dump() would throw on them.
    std::string arguments = calls[i].arguments.dump(-1, ' ', false, json::error_handler_t::replace);
    out.push_back({fmt::format("call_{}", i), calls[i].name, std::move(arguments)});
  }
  return out;
}

InprocessClient::InprocessClient(std::string name, std::string model_name, engine::LoadedModel model,
                                 const Logger& logger)
    : name_(std::move(name)), model_name_(std::move(model_name)), logger_(logger), model_(std::move(model)) {}

Result<std::unique_ptr<InprocessClient>> InprocessClient::Create(std::string endpoint_name,
                                                                 const InprocessEndpoint& endpoint,
                                                                 const Logger& logger, InprocessClientOptions options) {
  const std::string who = fmt::format("endpoint '{}' (inprocess)", endpoint_name);
  if (endpoint.model_dir.empty()) return Status::InvalidArgument(fmt::format("{}: model_dir is empty", who));
  if (endpoint.max_context == 0) return Status::InvalidArgument(fmt::format("{}: max_context must be at least 1", who));

  const auto start = std::chrono::steady_clock::now();
  Result<engine::LoadedModel> loaded =
      engine::LoadModel(engine::ModelSource{.dir = endpoint.model_dir,
                                            .tokenizer_need = engine::TokenizerNeed::kRequired,
                                            .drafter_dir = endpoint.drafter_dir});
  if (!loaded.ok()) return loaded.status().WithContext(who);
  const engine::ModelConfig& config = loaded->config;

  int64_t max_context = endpoint.max_context;
  if (max_context > config.max_position_embeddings) {
    logger.Warning(
        "{}: max_context {} is beyond the model's {} positions (config.json max_position_embeddings); "
        "sequences are limited to {} tokens",
        who, endpoint.max_context, config.max_position_embeddings, config.max_position_embeddings);
    max_context = config.max_position_embeddings;
  }
  engine::BackendSpec spec;
  spec.devices.assign(endpoint.gpus.begin(), endpoint.gpus.end());
  spec.tp = static_cast<int>(endpoint.tp);
  spec.threads = options.cpu_threads;
  spec.max_context = max_context;
  spec.kv.max_sequences = options.max_sequences;
  spec.kv.max_snapshots = options.max_snapshots;
  spec.kv.max_tokens = options.kv_tokens > 0 ? options.kv_tokens : 4 * max_context;
  // A pinned prefix copies every sliding layer's window: 210 MB per snapshot per GPU for the
  // 31B model at tp 4, so an L4 holds a handful next to the weights, not the CPU's 32.
  spec.device_max_snapshots = kGpuMaxSnapshots;
  spec.max_rows = static_cast<int>(options.max_batch_tokens);
  spec.kv_memory_fraction = endpoint.kv_memory_fraction;
  spec.model_name = endpoint.model_dir;

  const std::string model_name = std::filesystem::path(endpoint.model_dir).lexically_normal().filename().string();
  std::unique_ptr<InprocessClient> client(new InprocessClient(
      std::move(endpoint_name), model_name.empty() ? endpoint.model_dir : model_name, std::move(*loaded), logger));
  client->constrain_ = endpoint.constrained_decoding;
  Result<std::unique_ptr<engine::Backend>> backend = engine::OpenBackend(spec, client->model_);
  if (!backend.ok()) return backend.status().WithContext(who);
  client->backend_ = std::move(*backend);
  engine::SchedulerOptions scheduler;
  scheduler.max_batch_tokens = options.max_batch_tokens;
  Result<std::unique_ptr<engine::ChatEngine>> chat =
      engine::ChatEngine::Create(*client->backend_, *client->model_.tokenizer, scheduler, logger);
  if (!chat.ok()) return chat.status().WithContext(fmt::format("{}: model {}", who, endpoint.model_dir));
  client->engine_ = std::move(*chat);
  client->counter_ = std::make_unique<EngineTokenCounter>(*client->engine_);

  const engine::KvUsage usage = client->backend_->kv_usage();
  logger.Info(
      "{}: loaded {} on {} in {:.1f} s (context {} tokens, KV pool {} tokens for {} sequences, {} cached "
      "prefixes; drafts from {})",
      who, endpoint.model_dir, engine::BackendDescription(spec),
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
      client->backend_->context_limit(), usage.total_blocks * usage.block_tokens, usage.max_sequences,
      usage.max_snapshots,
      client->backend_->has_drafter() ? fmt::format("the MTP drafter in {}", endpoint.drafter_dir) : "prompt lookup");
  return client;
}

Result<ChatResponse> InprocessClient::Chat(const ChatRequest& request, const StreamCallbacks* stream) {
  const auto start = std::chrono::steady_clock::now();
  const std::string who = fmt::format("endpoint '{}' (inprocess, {} role)", name_,
                                      request.role_name.empty() ? "unnamed" : request.role_name);
  uint64_t seed = 0;
  if (!request.sampling.seed && request.sampling.temperature > 0) {
    std::random_device device;
    seed = (static_cast<uint64_t>(device()) << 32) ^ device();
  }
  Result<engine::ChatRequest> converted = ToEngineRequest(request, seed, constrain_);
  if (!converted.ok()) return converted.status().WithContext(who);
  Result<std::shared_ptr<engine::ChatStream>> submitted = engine_->Submit(std::move(*converted));
  if (!submitted.ok()) return submitted.status().WithContext(who);

  ChatResponse out;
  out.model = model_name_;
  std::vector<engine::ToolCall> calls;
  engine::ChatFinish finish = engine::ChatFinish::kNone;
  Status error;
  engine::RequestUsage usage;
  while (std::optional<engine::ChatEvent> e = (*submitted)->Next()) {
    if (!e->thinking.empty()) {
      out.reasoning += e->thinking;
      if (stream != nullptr && stream->on_reasoning) stream->on_reasoning(e->thinking);
    }
    if (!e->content.empty()) {
      out.text += e->content;
      if (stream != nullptr && stream->on_text) stream->on_text(e->content);
    }
    for (engine::ToolCall& call : e->tool_calls) calls.push_back(std::move(call));
    if (e->finish != engine::ChatFinish::kNone) {
      finish = e->finish;
      error = e->error;
      usage = e->usage;
      out.malformed_reply = e->parse_error;
    }
  }
  switch (finish) {
    case engine::ChatFinish::kStop:
      out.finish_reason = FinishReason::kStop;
      break;
    case engine::ChatFinish::kLength:
      out.finish_reason = FinishReason::kLength;
      break;
    case engine::ChatFinish::kToolCalls:
      out.finish_reason = FinishReason::kToolCalls;
      break;
    case engine::ChatFinish::kCancelled:
      return Status::Cancelled(fmt::format("{}: the engine cancelled the request (it is shutting down)", who));
    case engine::ChatFinish::kError:
      return error.WithContext(who);
    case engine::ChatFinish::kNone:
      return Status::Internal(fmt::format("{}: the engine's stream ended without a finish reason", who));
  }
  out.tool_calls = ToolCallsFromEngine(calls);
  out.usage.prompt_tokens = static_cast<uint64_t>(usage.prompt_tokens);
  out.usage.cached_prompt_tokens = static_cast<uint64_t>(usage.cached_prompt_tokens);
  out.usage.completion_tokens = static_cast<uint64_t>(usage.completion_tokens);
  out.latency = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  logger_.Debug("{}: {} prompt tokens ({} cached), {} generated, {}, {} ms", who, usage.prompt_tokens,
                usage.cached_prompt_tokens, usage.completion_tokens, FinishReasonName(out.finish_reason),
                out.latency.count());
  return out;
}

}  // namespace temper
