#include "engine/serve/http_server.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <map>
#include <optional>

#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "common/process_metrics.h"
#include "engine/serve/http_listener.h"
#include "engine/serve/json_depth.h"
#include "engine/serve/openai_conversation.h"
#include "engine/serve/openai_parameters.h"
#include "engine/serve/openapi_document.h"
#include "engine/serve/scheduler_metrics_text.h"
#include "engine/serve/token_logprobs.h"

namespace temper::engine {

namespace {

using nlohmann::json;

// An OpenAI-style error response.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // empty: null
  std::string code;   // empty: null
};

json ErrorJson(const ApiError& e) {
  return {{"error",
           {{"message", e.message},
            {"type", e.type},
            {"param", e.param.empty() ? json(nullptr) : json(e.param)},
            {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}};
}

void SendError(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(ErrorJson(e).dump(), "application/json");
}

ApiError FromStatus(const Status& s) {
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
      return {400, s.message()};
    case StatusCode::kOutOfRange:
      return {400, s.message(), "invalid_request_error", "prompt", "context_length_exceeded"};
    case StatusCode::kResourceExhausted:
      return {429, s.message(), "server_error", "", "overloaded"};
    default:
      return {500, s.message(), "server_error"};
  }
}

// Reads an optional number field; a wrong type is an error naming it.
template <typename T>
std::optional<ApiError> ReadNumber(const json& body, const char* key, T& out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_number() || (std::is_integral_v<T> && !it->is_number_integer())) {
    return ApiError{
        400, fmt::format("'{}' must be {}, got {}", key, std::is_integral_v<T> ? "an integer" : "a number", it->dump()),
        "invalid_request_error", key};
  }
  out = it->get<T>();
  return std::nullopt;
}

// Sampling parameters, `n` and `stop_token_ids`, shared by both APIs.
std::optional<ApiError> ReadSampling(const json& body, SamplingParams& sampling) {
  if (auto e = ReadNumber(body, "temperature", sampling.temperature)) return e;
  if (auto e = ReadNumber(body, "top_p", sampling.top_p)) return e;
  if (auto e = ReadNumber(body, "top_k", sampling.top_k)) return e;
  if (auto e = ReadNumber(body, "min_p", sampling.min_p)) return e;
  if (auto e = ReadNumber(body, "seed", sampling.seed)) return e;
  int64_t n = 1;
  if (auto e = ReadNumber(body, "n", n)) return e;
  if (n != 1) return ApiError{400, fmt::format("'n' must be 1, got {}", n), "invalid_request_error", "n"};
  if (sampling.temperature > 2) {
    return ApiError{400, fmt::format("'temperature' must be in [0, 2], got {}", sampling.temperature),
                    "invalid_request_error", "temperature"};
  }
  if (auto s = body.find("stop_token_ids"); s != body.end() && !s->is_null()) {
    if (!s->is_array() || !std::all_of(s->begin(), s->end(), [](const json& x) { return x.is_number_integer(); })) {
      return ApiError{400, "'stop_token_ids' must be an array of integers", "invalid_request_error", "stop_token_ids"};
    }
    for (const json& x : *s) sampling.stop_tokens.push_back(x.get<int32_t>());
  }
  return std::nullopt;
}

std::optional<ApiError> ReadStops(const json& body, std::vector<std::string>& stops) {
  if (auto s = body.find("stop"); s != body.end() && !s->is_null()) {
    if (s->is_string()) {
      stops.push_back(s->get<std::string>());
    } else if (s->is_array() && s->size() <= 4 &&
               std::all_of(s->begin(), s->end(), [](const json& x) { return x.is_string(); })) {
      for (const json& x : *s) stops.push_back(x.get<std::string>());
    } else {
      return ApiError{400, "'stop' must be a string or an array of at most 4 strings", "invalid_request_error", "stop"};
    }
  }
  return std::nullopt;
}

std::optional<ApiError> ReadStreamFlags(const json& body, bool& stream, bool& include_usage) {
  if (auto s = body.find("stream"); s != body.end() && !s->is_null()) {
    if (!s->is_boolean()) return ApiError{400, "'stream' must be a boolean", "invalid_request_error", "stream"};
    stream = s->get<bool>();
  }
  if (auto s = body.find("stream_options"); s != body.end() && !s->is_null()) {
    auto usage = s->is_object() ? s->find("include_usage") : s->end();
    if (!s->is_object() || (usage != s->end() && !usage->is_null() && !usage->is_boolean())) {
      return ApiError{400, "'stream_options' must be an object whose 'include_usage' is a boolean",
                      "invalid_request_error", "stream_options"};
    }
    include_usage = usage != s->end() && usage->is_boolean() && usage->get<bool>();
  }
  return std::nullopt;
}

// Chat's `logprobs` (a boolean) and `top_logprobs` (0..kMaxTopLogprobs, with logprobs true) as
// GenerateRequest::logprobs.
std::optional<ApiError> ReadChatLogprobs(const json& body, int& logprobs) {
  bool wanted = false;
  if (auto l = body.find("logprobs"); l != body.end() && !l->is_null()) {
    if (!l->is_boolean()) return ApiError{400, "'logprobs' must be a boolean", "invalid_request_error", "logprobs"};
    wanted = l->get<bool>();
  }
  int64_t top = 0;
  if (auto e = ReadNumber(body, "top_logprobs", top)) return e;
  if (top < 0 || top > kMaxTopLogprobs) {
    return ApiError{400, fmt::format("'top_logprobs' must be in [0, {}], got {}", kMaxTopLogprobs, top),
                    "invalid_request_error", "top_logprobs"};
  }
  if (top > 0 && !wanted) {
    return ApiError{400, "'top_logprobs' needs 'logprobs': true", "invalid_request_error", "top_logprobs"};
  }
  logprobs = wanted ? static_cast<int>(top) : -1;
  return std::nullopt;
}

// Completions' `logprobs`: how many of each row's most likely tokens to report, 0..kMaxTopLogprobs.
std::optional<ApiError> ReadCompletionLogprobs(const json& body, int& logprobs) {
  int64_t top = -1;
  if (auto e = ReadNumber(body, "logprobs", top)) return e;
  if (top != -1 && (top < 0 || top > kMaxTopLogprobs)) {
    return ApiError{400, fmt::format("'logprobs' must be in [0, {}], got {}", kMaxTopLogprobs, top),
                    "invalid_request_error", "logprobs"};
  }
  logprobs = static_cast<int>(top);
  return std::nullopt;
}

struct ParsedRequest {
  GenerateRequest request;
  bool stream = false;
  bool include_usage = false;
};

// The model check, shared by both APIs.
std::optional<ApiError> CheckModel(const json& body, const std::string& model) {
  if (!body.is_object()) return ApiError{400, "the request body must be a JSON object"};
  auto m = body.find("model");
  if (m == body.end() || !m->is_string())
    return ApiError{400, "'model' is required and must be a string", "invalid_request_error", "model"};
  if (m->get<std::string>() != model) {
    return ApiError{404,
                    fmt::format("The model '{}' does not exist; this server serves '{}'", m->get<std::string>(), model),
                    "invalid_request_error", "model", "model_not_found"};
  }
  return std::nullopt;
}

ApiError BadParam(std::string param, std::string message) {
  return ApiError{400, std::move(message), "invalid_request_error", std::move(param)};
}

// Every parameter of `body` is one `endpoint` implements, or one it accepts at its neutral value.
std::optional<ApiError> CheckParameters(OpenAiEndpoint endpoint, const json& body) {
  if (std::optional<ParamError> e = CheckOpenAiParameters(endpoint, body)) {
    return BadParam(std::move(e->param), std::move(e->message));
  }
  return std::nullopt;
}

// `tokenizer` (null when the server has none) encodes a prompt given as text.
std::optional<ApiError> ParseCompletion(const json& body, const std::string& model, const Tokenizer* tokenizer,
                                        ParsedRequest& p) {
  if (auto e = CheckModel(body, model)) return e;
  if (auto e = CheckParameters(OpenAiEndpoint::kCompletions, body)) return e;
  auto prompt = body.find("prompt");
  if (prompt == body.end()) return ApiError{400, "'prompt' is required", "invalid_request_error", "prompt"};
  const json* ids = &*prompt;
  if (ids->is_array() && ids->size() == 1 && ((*ids)[0].is_array() || (*ids)[0].is_string())) ids = &(*ids)[0];
  if (ids->is_array() && !ids->empty() && (*ids)[0].is_string()) {
    return ApiError{400, "'prompt' as a list of several texts is not supported; send one text or one list of token ids",
                    "invalid_request_error", "prompt"};
  }
  if (ids->is_string()) {
    if (tokenizer == nullptr) {
      return ApiError{400, "'prompt' as text needs a tokenizer, which this server does not have; send token ids",
                      "invalid_request_error", "prompt"};
    }
    // As OpenAI-compatible servers do: with the model's special tokens (Gemma: <bos> first), and
    // control tokens written in the text read as such.
    p.request.prompt = tokenizer->Encode(ids->get<std::string>(), EncodeOptions{.add_special_tokens = true});
  } else if (!ids->is_array()) {
    return ApiError{400, "'prompt' must be a text or an array of token ids", "invalid_request_error", "prompt"};
  }
  for (size_t i = 0; ids->is_array() && i < ids->size(); ++i) {
    const json& id = (*ids)[i];
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
      return ApiError{400, fmt::format("'prompt'[{}] must be a non-negative integer token id, got {}", i, id.dump()),
                      "invalid_request_error", "prompt"};
    }
    p.request.prompt.push_back(id.get<int32_t>());
  }
  GenerateRequest& r = p.request;
  r.max_tokens = 16;  // OpenAI's default for completions
  r.sampling.temperature = 1.0f;
  if (auto e = ReadNumber(body, "max_tokens", r.max_tokens)) return e;
  if (auto e = ReadSampling(body, r.sampling)) return e;
  if (auto e = ReadStops(body, r.stop_strings)) return e;
  if (auto e = ReadStreamFlags(body, p.stream, p.include_usage)) return e;
  if (auto e = ReadCompletionLogprobs(body, r.logprobs)) return e;
  return std::nullopt;
}

struct ParsedChat {
  ChatRequest request;
  bool stream = false;
  bool include_usage = false;
};

// response_format: "text" (or absent), "json_object" (any object), or "json_schema" with the schema the
// reply must keep to, which the chat engine compiles to a grammar the sampler enforces (a schema it
// cannot honour comes back from Submit, see ServeChat). The schema is read from the raw body as
// ordered JSON: its properties are generated in the order the client wrote them.
std::optional<ApiError> ReadResponseFormat(const std::string& raw_body, ChatRequest& r) {
  const nlohmann::ordered_json body = nlohmann::ordered_json::parse(raw_body, nullptr, false);
  auto format = body.find("response_format");
  if (format == body.end() || format->is_null()) return std::nullopt;
  if (!format->is_object() || !format->contains("type") || !(*format)["type"].is_string()) {
    return BadParam("response_format", "'response_format' must be an object with a 'type'");
  }
  const std::string type = (*format)["type"].get<std::string>();
  nlohmann::ordered_json& schema = r.answer_schema;
  if (type == "text") return std::nullopt;
  if (type == "json_object") {
    schema = {{"type", "object"}};
  } else if (type == "json_schema") {
    auto spec = format->find("json_schema");
    if (spec == format->end() || !spec->is_object() || !spec->contains("schema")) {
      return BadParam("response_format.json_schema",
                      "'response_format.json_schema' must be an object with the 'schema' the reply keeps to");
    }
    schema = (*spec)["schema"];
    // A null answer_schema would mean no schema at all, so it is refused here as the grammar would.
    if (schema.is_null()) {
      return BadParam("response_format.json_schema.schema",
                      "'response_format.json_schema': schema: a schema must be an object");
    }
  } else {
    return BadParam("response_format.type",
                    fmt::format("'response_format.type' must be text, json_object or json_schema, got '{}'", type));
  }
  return std::nullopt;
}

std::optional<ApiError> ParseChat(const json& body, const std::string& raw_body, const std::string& model,
                                  ParsedChat& p) {
  if (auto e = CheckModel(body, model)) return e;
  if (auto e = CheckParameters(OpenAiEndpoint::kChatCompletions, body)) return e;
  RequestedToolChoice tool_choice;
  if (std::optional<ParamError> e = ReadConversation(body, p.request.conversation, tool_choice)) {
    return BadParam(std::move(e->param), std::move(e->message));
  }
  if (tool_choice.required) {
    p.request.tool_choice = ToolChoice::kRequired;
    p.request.required_function = tool_choice.function;
  }
  if (auto parallel = body.find("parallel_tool_calls"); parallel != body.end() && !parallel->is_null()) {
    if (!parallel->is_boolean()) return BadParam("parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
    p.request.parallel_tool_calls = parallel->get<bool>();
  }

  ChatRequest& r = p.request;
  r.max_tokens = 0;  // up to the context limit, as OpenAI does
  r.sampling.temperature = 1.0f;
  if (auto e = ReadNumber(body, "max_completion_tokens", r.max_tokens)) return e;
  if (auto e = ReadNumber(body, "max_tokens", r.max_tokens)) return e;
  if (body.contains("max_tokens") || body.contains("max_completion_tokens")) {
    if (r.max_tokens < 1) {
      const char* key = body.contains("max_tokens") ? "max_tokens" : "max_completion_tokens";
      return BadParam(key, fmt::format("'{}' must be at least 1, got {}", key, r.max_tokens));
    }
  }
  if (auto e = ReadSampling(body, r.sampling)) return e;
  if (auto e = ReadStops(body, r.stop_strings)) return e;
  if (auto e = ReadStreamFlags(body, p.stream, p.include_usage)) return e;
  if (auto e = ReadResponseFormat(raw_body, r)) return e;
  if (auto e = ReadChatLogprobs(body, r.logprobs)) return e;
  if (!r.answer_schema.is_null() && r.tool_choice == ToolChoice::kRequired) {
    return BadParam("response_format", "'response_format' and a required tool call ('tool_choice') cannot be combined");
  }
  return std::nullopt;
}

json UsageJson(const RequestUsage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_prompt_tokens}}},
          // Speculative decoding's drafts under a field of temper's own: OpenAI's
          // accepted/rejected_prediction_tokens count Predicted Outputs, which this server does not take.
          {"temper", {{"draft_tokens", u.draft_tokens}, {"accepted_draft_tokens", u.accepted_draft_tokens}}}};
}

// A token's text for logprobs: what the tokenizer decodes it to alone, or "token_id:N" (as vLLM
// writes it) on a server without a tokenizer.
std::string TokenText(const Tokenizer* tokenizer, int32_t id) {
  if (tokenizer != nullptr) {
    const int32_t ids[] = {id};
    if (Result<std::string> text = tokenizer->Decode(ids); text.ok()) return *text;
  }
  return fmt::format("token_id:{}", id);
}

// A token's text as JSON can carry it: a piece of a UTF-8 character (byte fallback) shows as U+FFFD.
std::string Shown(const std::string& text) {
  return json::parse(json(text).dump(-1, ' ', false, json::error_handler_t::replace));
}

// OpenAI's form of one token's logprob: the token as text, and its exact bytes.
json ChatTokenLogprob(const Tokenizer* tokenizer, int32_t id, float logprob) {
  const std::string text = TokenText(tokenizer, id);
  json bytes = json::array();
  for (unsigned char b : text) bytes.push_back(b);
  return {{"token", Shown(text)}, {"logprob", logprob}, {"bytes", std::move(bytes)}};
}

// Chat's `logprobs`: {"content": [{token, logprob, bytes, top_logprobs: [...]}, ...], "refusal": null}.
json ChatLogprobsJson(const Tokenizer* tokenizer, const std::vector<TokenLogprobs>& tokens) {
  json content = json::array();
  for (const TokenLogprobs& t : tokens) {
    json entry = ChatTokenLogprob(tokenizer, t.token, t.logprob);
    json top = json::array();
    for (const auto& [id, logprob] : t.top) top.push_back(ChatTokenLogprob(tokenizer, id, logprob));
    entry["top_logprobs"] = std::move(top);
    content.push_back(std::move(entry));
  }
  return {{"content", std::move(content)}, {"refusal", nullptr}};
}

// Completions' legacy `logprobs`: parallel lists of tokens, their logprobs, the top alternatives as
// {token: logprob} maps (a token that reads like one before it keyed "token_id:N"), and each
// token's byte offset in the text, counted from `offset`.
json CompletionLogprobsJson(const Tokenizer* tokenizer, const std::vector<TokenLogprobs>& tokens, size_t offset) {
  json texts = json::array(), logprobs = json::array(), tops = json::array(), offsets = json::array();
  for (const TokenLogprobs& t : tokens) {
    const std::string text = TokenText(tokenizer, t.token);
    texts.push_back(Shown(text));
    logprobs.push_back(t.logprob);
    json top = json::object();
    for (const auto& [id, logprob] : t.top) {
      // Two tokens may read alike (pieces of UTF-8 characters both show as U+FFFD): keep both.
      std::string key = Shown(TokenText(tokenizer, id));
      if (top.contains(key)) key = fmt::format("token_id:{}", id);
      top[key] = logprob;
    }
    tops.push_back(std::move(top));
    offsets.push_back(offset);
    offset += text.size();
  }
  return {{"tokens", std::move(texts)},
          {"token_logprobs", std::move(logprobs)},
          {"top_logprobs", std::move(tops)},
          {"text_offset", std::move(offsets)}};
}

json FinishJson(FinishReason f) { return f == FinishReason::kNone ? json(nullptr) : json(FinishReasonName(f)); }

json ToolCallJson(const ToolCall& call, const std::string& id, size_t index, bool with_index) {
  json j = {{"id", id},
            {"type", "function"},
            {"function", {{"name", call.name}, {"arguments", call.arguments.dump()}}}};
  if (with_index) j["index"] = index;
  return j;
}

ApiError ChatError(const ChatEvent& e) {
  if (e.finish == ChatFinish::kCancelled) return ApiError{503, "the request was cancelled", "server_error"};
  return FromStatus(e.error);
}

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Parses a request body after checking its nesting depth, so nothing deeper than `max_depth` is
// ever built.
std::optional<ApiError> ParseBody(const std::string& text, int max_depth, json& body) {
  if (std::optional<size_t> at = FindNestingBeyond(text, max_depth)) {
    return ApiError{
        400,
        fmt::format("the request body nests JSON deeper than {} levels (at byte {}); this server accepts at most {}",
                    max_depth, *at, max_depth),
        "invalid_request_error", "", "json_too_deep"};
  }
  body = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return ApiError{400, "malformed JSON in the request body"};
  return std::nullopt;
}

json ModelJson(const std::string& id) {
  return {{"id", id}, {"object", "model"}, {"created", 0}, {"owned_by", "temper"}};
}

// The OpenAPI document as this server serves it: `model`, in requests and in /v1/models/{model},
// is the one model it serves, so a client generated from the document (or a fuzzer) names it.
std::string OpenApiDocumentFor(const std::string& model) {
  json document = json::parse(kOpenApiDocument);
  const json served = {{"type", "string"}, {"enum", {model}}};
  for (const char* request : {"ChatCompletionRequest", "CompletionRequest"}) {
    document["components"]["schemas"][request]["properties"]["model"] = served;
  }
  document["paths"]["/v1/models/{model}"]["get"]["parameters"][0]["schema"] = served;
  return document.dump();
}

// The routes, for errors: which method a path takes ("" for none), and all of them.
std::string_view AllowedMethod(std::string_view path) {
  if (path == "/v1/completions" || path == "/v1/chat/completions") return "POST";
  if (path == "/health" || path == "/metrics" || path == "/openapi.json" || path == "/v1/models" ||
      (path.starts_with("/v1/models/") && path.size() > std::string_view("/v1/models/").size())) {
    return "GET";
  }
  return "";
}
constexpr std::string_view kRouteList =
    "POST /v1/chat/completions, POST /v1/completions, GET /v1/models, GET /v1/models/{model}, GET /health, "
    "GET /metrics, GET /openapi.json";

// Equal keys, in a time that depends on the expected key's length only, not on how much of the
// given one matches (a byte-by-byte early exit would let a client find the key byte by byte).
bool SameKey(std::string_view given, std::string_view expected) {
  unsigned char diff = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    diff |= static_cast<unsigned char>(expected[i] ^ (i < given.size() ? given[i] : 0));
  }
  return diff == 0;
}

// The key of an "Authorization: Bearer <key>" header; empty when there is none.
std::string_view BearerKey(const std::string& header) {
  constexpr std::string_view kScheme = "bearer ";
  if (header.size() <= kScheme.size()) return {};
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(header[i])) != kScheme[i]) return {};
  }
  std::string_view key(header);
  key.remove_prefix(kScheme.size());
  while (!key.empty() && key.front() == ' ') key.remove_prefix(1);
  return key;
}

}  // namespace

HttpServer::HttpServer(Scheduler& scheduler, const HttpServerOptions& options, const Logger& log)
    : scheduler_(scheduler), options_(options), log_(log), router_(std::make_unique<HttpRouter>()) {}

HttpServer::~HttpServer() { Stop(); }

Result<std::unique_ptr<HttpServer>> HttpServer::Start(Scheduler& scheduler, const HttpServerOptions& options,
                                                      const Logger& log) {
  if (options.model_name.empty()) return Status::InvalidArgument("HTTP server: the model name is empty");
  if (options.max_json_depth < 1) return Status::InvalidArgument("HTTP server: max_json_depth must be at least 1");
  std::unique_ptr<HttpServer> s(new HttpServer(scheduler, options, log));
  TEMPER_ASSIGN_OR_RETURN(s->hosts_, HostAllowList::For(options.host, options.allowed_hosts));
  s->Route();
  HttpListenerOptions listen;
  listen.host = options.host;
  listen.port = options.port;
  listen.workers = options.threads;
  listen.max_connections = options.max_connections;
  listen.max_body_bytes = options.max_body_bytes;
  listen.header_timeout = options.header_timeout;
  listen.body_timeout = options.body_timeout;
  listen.idle_timeout = options.idle_timeout;
  listen.write_timeout = options.write_timeout;
  listen.error_body = [](int status, const std::string& message) {
    return ErrorJson({status, message, status == 503 ? "server_error" : "invalid_request_error"}).dump();
  };
  TEMPER_ASSIGN_OR_RETURN(s->listener_, HttpListener::Start(*s->router_, std::move(listen), log));
  return s;
}

int HttpServer::port() const { return listener_->port(); }

std::optional<StreamEvent> HttpServer::NextEvent(RequestStream& stream, const HttpConnection* client) {
  // Checked before every wait, tokens or not (a steady stream of tokens never leaves a wait empty),
  // and the wait is short, so neither Stop nor a client that hung up waits on a long generation.
  while (true) {
    if (stopping_.load() || (client != nullptr && client->ClientGone())) {
      stream.Cancel();
      return std::nullopt;
    }
    std::optional<StreamEvent> e = stream.NextFor(std::chrono::milliseconds(100));
    if (!e || e->finish != FinishReason::kNone || !e->tokens.empty()) return e;
  }
}

std::optional<ChatEvent> HttpServer::NextChatEvent(ChatStream& stream, const HttpConnection* client) {
  while (true) {
    if (stopping_.load() || (client != nullptr && client->ClientGone())) {
      stream.Cancel();
      return std::nullopt;
    }
    std::optional<ChatEvent> e = stream.NextFor(std::chrono::milliseconds(100));
    if (!e || !e->empty()) return e;
  }
}

namespace {

// The chat engine's refusal of a request, as the API names the field: the engine calls the schema
// its own field, the client wrote it as response_format's.
ApiError ChatSubmitError(const Status& refused) {
  ApiError e = FromStatus(refused);
  constexpr std::string_view kSchemaError = "answer_schema: ";
  if (refused.code() == StatusCode::kInvalidArgument && refused.message().starts_with(kSchemaError)) {
    e.param = "response_format.json_schema.schema";
    e.message = fmt::format("'response_format.json_schema': {}",
                            std::string_view(refused.message()).substr(kSchemaError.size()));
  } else if (refused.code() == StatusCode::kInvalidArgument && refused.message().starts_with("messages")) {
    e.param = "messages";
  } else if (refused.code() == StatusCode::kInvalidArgument && refused.message().starts_with("tools")) {
    e.param = "tools";
  } else if (refused.code() == StatusCode::kOutOfRange) {
    e.param = "messages";
  }
  return e;
}

}  // namespace

// A submitted chat request and what its reply is made with.
struct HttpServer::ChatReply {
  std::shared_ptr<ChatStream> stream;
  std::shared_ptr<const HttpConnection> client;
  uint64_t number;  // names the reply (chatcmpl-N) and its tool calls (call_N_i)
  std::string id;
  int64_t created;
  std::string model;
  bool with_logprobs;
  const Tokenizer* tokenizer;
  bool include_usage;
};

void HttpServer::ServeChat(const httplib::Request& req, httplib::Response& res) {
  if (options_.chat == nullptr) {
    SendError(res,
              {501,
               "/v1/chat/completions needs a tokenizer, and this server has none: start `temper-lm serve` with a "
               "model directory holding tokenizer.json, or pass --tokenizer FILE (/v1/completions takes token ids)",
               "server_error", "", "no_tokenizer"});
    return;
  }
  json body;
  if (std::optional<ApiError> e = ParseBody(req.body, options_.max_json_depth, body)) {
    SendError(res, *e);
    return;
  }
  ParsedChat parsed;
  if (std::optional<ApiError> e = ParseChat(body, req.body, options_.model_name, parsed)) {
    SendError(res, *e);
    return;
  }
  const bool with_logprobs = parsed.request.logprobs >= 0;
  const Tokenizer* tokenizer = &options_.chat->tokenizer();
  Result<std::shared_ptr<ChatStream>> submitted = options_.chat->Submit(std::move(parsed.request));
  if (!submitted.ok()) {
    SendError(res, ChatSubmitError(submitted.status()));
    return;
  }
  const uint64_t number = next_id_.fetch_add(1);
  const ChatReply reply{.stream = *submitted,
                        .client = listener_->ConnectionOf(req),
                        .number = number,
                        .id = fmt::format("chatcmpl-{}", number),
                        .created = UnixNow(),
                        .model = options_.model_name,
                        .with_logprobs = with_logprobs,
                        .tokenizer = tokenizer,
                        .include_usage = parsed.include_usage};
  if (parsed.stream) {
    ReplyChatStream(reply, res);
  } else {
    ReplyChatWhole(reply, res);
  }
}

// The whole reply at once, once the request has ended.
void HttpServer::ReplyChatWhole(const ChatReply& reply, httplib::Response& res) {
  const std::shared_ptr<ChatStream>& stream = reply.stream;
  const std::shared_ptr<const HttpConnection>& client = reply.client;
  const std::string& id = reply.id;
  const int64_t created = reply.created;
  const std::string& model = reply.model;
  const bool with_logprobs = reply.with_logprobs;
  const Tokenizer* tokenizer = reply.tokenizer;
  auto call_id = [number = reply.number](size_t i) { return fmt::format("call_{}_{}", number, i); };
  ChatEvent all;
  while (std::optional<ChatEvent> e = NextChatEvent(*stream, client.get())) all.Append(std::move(*e));
  if (all.finish == ChatFinish::kNone) all.finish = ChatFinish::kCancelled;  // the server stopped
  if (all.finish == ChatFinish::kError || all.finish == ChatFinish::kCancelled) {
    SendError(res, ChatError(all));
    return;
  }
  json message = {{"role", "assistant"},
                  {"content", all.content.empty() && !all.tool_calls.empty() ? json(nullptr) : json(all.content)}};
  if (!all.thinking.empty()) message["reasoning_content"] = all.thinking;
  if (!all.tool_calls.empty()) {
    json calls = json::array();
    for (size_t i = 0; i < all.tool_calls.size(); ++i)
      calls.push_back(ToolCallJson(all.tool_calls[i], call_id(i), i, false));
    message["tool_calls"] = std::move(calls);
  }
  json choice = {{"index", 0},
                 {"message", std::move(message)},
                 {"logprobs", with_logprobs ? ChatLogprobsJson(tokenizer, all.logprobs) : json(nullptr)},
                 {"finish_reason", ChatFinishName(all.finish)}};
  if (!all.parse_error.empty()) choice["parse_error"] = all.parse_error;
  json out = {{"id", id},
              {"object", "chat.completion"},
              {"created", created},
              {"model", model},
              {"choices", json::array({std::move(choice)})},
              {"usage", UsageJson(all.usage)}};
  res.set_content(out.dump(), "application/json");
}

// Server-sent events in OpenAI's chunk format: a first chunk with the role, one per batch of new
// text or per completed tool call, a last one with the finish reason, the usage chunk if asked,
// then `data: [DONE]`.
void HttpServer::ReplyChatStream(const ChatReply& reply, httplib::Response& res) {
  const std::shared_ptr<ChatStream>& stream = reply.stream;
  const std::shared_ptr<const HttpConnection>& client = reply.client;
  const std::string& id = reply.id;
  const int64_t created = reply.created;
  const std::string& model = reply.model;
  const bool with_logprobs = reply.with_logprobs;
  const Tokenizer* tokenizer = reply.tokenizer;
  auto call_id = [number = reply.number](size_t i) { return fmt::format("call_{}_{}", number, i); };
  const bool include_usage = reply.include_usage;
  auto chunk = [id, created, model](json delta, json finish, const std::string& parse_error = "",
                                    json logprobs = nullptr) {
    json choice = {{"index", 0},
                   {"delta", std::move(delta)},
                   {"logprobs", std::move(logprobs)},
                   {"finish_reason", std::move(finish)}};
    if (!parse_error.empty()) choice["parse_error"] = parse_error;
    json c = {{"id", id},
              {"object", "chat.completion.chunk"},
              {"created", created},
              {"model", model},
              {"choices", json::array({std::move(choice)})}};
    return "data: " + c.dump() + "\n\n";
  };
  auto started = std::make_shared<bool>(false);
  auto calls_sent = std::make_shared<size_t>(0);
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, stream, client, id, created, model, include_usage, chunk, started, calls_sent, call_id, with_logprobs,
       tokenizer](size_t, httplib::DataSink& sink) {
        std::string out;
        if (!*started) {
          *started = true;
          out += chunk({{"role", "assistant"}, {"content", ""}}, nullptr);
        }
        std::optional<ChatEvent> e = NextChatEvent(*stream, client.get());
        if (!e) {
          if (!out.empty()) sink.write(out.data(), out.size());
          sink.done();
          return true;
        }
        // This event's tokens' logprobs ride on its first chunk.
        json logprobs = with_logprobs && !e->logprobs.empty() ? ChatLogprobsJson(tokenizer, e->logprobs) : json();
        auto take_logprobs = [&logprobs] { return std::exchange(logprobs, json()); };
        if (!e->thinking.empty()) out += chunk({{"reasoning_content", e->thinking}}, nullptr, "", take_logprobs());
        if (!e->content.empty()) out += chunk({{"content", e->content}}, nullptr, "", take_logprobs());
        for (const ToolCall& call : e->tool_calls) {
          const size_t index = (*calls_sent)++;
          out += chunk({{"tool_calls", json::array({ToolCallJson(call, call_id(index), index, true)})}}, nullptr, "",
                       take_logprobs());
        }
        // Tokens with nothing to show yet (the inside of a tool call) still report theirs.
        if (!logprobs.is_null() && e->finish == ChatFinish::kNone) {
          out += chunk(json::object(), nullptr, "", take_logprobs());
        }
        if (e->finish == ChatFinish::kError || e->finish == ChatFinish::kCancelled) {
          out += "data: " + ErrorJson(ChatError(*e)).dump() + "\n\ndata: [DONE]\n\n";
        } else if (e->finish != ChatFinish::kNone) {
          out += chunk(json::object(), ChatFinishName(e->finish), e->parse_error, take_logprobs());
          if (include_usage) {
            json usage = {{"id", id},       {"object", "chat.completion.chunk"}, {"created", created},
                          {"model", model}, {"choices", json::array()},          {"usage", UsageJson(e->usage)}};
            out += "data: " + usage.dump() + "\n\n";
          }
          out += "data: [DONE]\n\n";
        }
        if (out.empty()) return true;
        // A failed write means the client went away: stop generating for it.
        if (!sink.write(out.data(), out.size())) {
          stream->Cancel();
          return false;
        }
        return true;
      },
      [stream](bool) { stream->Cancel(); });  // no-op once the stream has ended
}

void HttpServer::Stop() {
  stopping_.store(true);
  if (listener_) listener_->Stop();
}

// Before any route and before the body is read: the Host (a web page's DNS rebinding), the API
// key, the POST body's type (a web page's cross-origin POST), then the body's declared size. True
// when it answered the request (refused it).
bool HttpServer::RefuseBeforeRouting(const httplib::Request& req, httplib::Response& res) {
  const std::string host = req.get_header_value("Host");
  if (!hosts_.Allows(host)) {
    SendError(res, {421,
                    fmt::format("this server does not answer requests for Host '{}' (it answers {}); a web page "
                                "reaching it through DNS rebinding sends its own name. If clients reach the server "
                                "by this name, start it with --allowed-host NAME",
                                host.substr(0, 256), hosts_.Describe()),
                    "invalid_request_error", "", "host_not_allowed"});
    return true;
  }
  if (!options_.api_key.empty() && req.path != "/health") {
    const std::string header = req.get_header_value("Authorization");
    if (header.empty() || !SameKey(BearerKey(header), options_.api_key)) {
      SendError(res, {401,
                      header.empty() ? "no API key: send it as 'Authorization: Bearer <key>'"
                                     : "the API key in the Authorization header is not valid",
                      "invalid_request_error", "", "invalid_api_key"});
      res.set_header("WWW-Authenticate", "Bearer");
      return true;
    }
  }
  if (req.method == "POST" && !IsJsonContentType(req.get_header_value("Content-Type"))) {
    const std::string type = req.get_header_value("Content-Type");
    SendError(res, {415,
                    fmt::format("{} takes a JSON body sent as 'Content-Type: application/json', not {}", req.path,
                                type.empty() ? "a body without a Content-Type" : "'" + type.substr(0, 256) + "'"),
                    "invalid_request_error", "", "unsupported_media_type"});
    return true;
  }
  const std::string length = req.get_header_value("Content-Length");
  if (!length.empty()) {
    size_t bytes = 0;
    auto [end, ec] = std::from_chars(length.data(), length.data() + length.size(), bytes);
    if (ec == std::errc() && end == length.data() + length.size() && bytes > options_.max_body_bytes) {
      SendError(res, {413,
                      fmt::format("the request body is {} bytes; this server takes at most {}", bytes,
                                  options_.max_body_bytes),
                      "invalid_request_error", "", "request_too_large"});
      return true;
    }
  }
  return false;
}

// A submitted completion request and what its reply is made with.
struct HttpServer::CompletionReply {
  std::shared_ptr<RequestStream> stream;
  std::shared_ptr<const HttpConnection> client;
  std::string id;  // cmpl-N
  int64_t created;
  bool with_logprobs;
  const Tokenizer* tokenizer;  // null when the server has none: logprobs then name tokens token_id:N
  bool include_usage;
};

void HttpServer::ServeCompletion(const httplib::Request& req, httplib::Response& res) {
  json body;
  if (std::optional<ApiError> e = ParseBody(req.body, options_.max_json_depth, body)) {
    SendError(res, *e);
    return;
  }
  ParsedRequest parsed;
  const Tokenizer* tokenizer = options_.chat != nullptr ? &options_.chat->tokenizer() : nullptr;
  if (std::optional<ApiError> e = ParseCompletion(body, options_.model_name, tokenizer, parsed)) {
    SendError(res, *e);
    return;
  }
  const bool with_logprobs = parsed.request.logprobs >= 0;
  Result<std::shared_ptr<RequestStream>> submitted = scheduler_.Submit(std::move(parsed.request));
  if (!submitted.ok()) {
    SendError(res, FromStatus(submitted.status()));
    return;
  }
  const CompletionReply reply{.stream = *submitted,
                              .client = listener_->ConnectionOf(req),
                              .id = fmt::format("cmpl-{}", next_id_.fetch_add(1)),
                              .created = UnixNow(),
                              .with_logprobs = with_logprobs,
                              .tokenizer = tokenizer,
                              .include_usage = parsed.include_usage};
  if (parsed.stream) {
    ReplyCompletionStream(reply, res);
  } else {
    ReplyCompletionWhole(reply, res);
  }
}

// The whole reply at once, once the request has ended.
void HttpServer::ReplyCompletionWhole(const CompletionReply& reply, httplib::Response& res) {
  const std::shared_ptr<RequestStream>& stream = reply.stream;
  const std::shared_ptr<const HttpConnection>& client = reply.client;
  const std::string& id = reply.id;
  const int64_t created = reply.created;
  const bool with_logprobs = reply.with_logprobs;
  const Tokenizer* tokenizer = reply.tokenizer;
  StreamEvent all;
  while (std::optional<StreamEvent> e = NextEvent(*stream, client.get())) all.Append(std::move(*e));
  if (all.finish == FinishReason::kNone) all.finish = FinishReason::kCancelled;  // the server stopped
  if (all.finish == FinishReason::kError || all.finish == FinishReason::kCancelled) {
    SendError(res, all.finish == FinishReason::kError ? FromStatus(all.error)
                                                      : ApiError{503, "the server is shutting down", "server_error"});
    return;
  }
  json out = {
      {"id", id},
      {"object", "text_completion"},
      {"created", created},
      {"model", options_.model_name},
      {"choices",
       json::array({{{"index", 0},
                     {"text", all.text},
                     {"token_ids", all.tokens},
                     {"logprobs", with_logprobs ? CompletionLogprobsJson(tokenizer, all.logprobs, 0) : json(nullptr)},
                     {"finish_reason", FinishJson(all.finish)}}})},
      {"usage", UsageJson(all.usage)}};
  res.set_content(out.dump(), "application/json");
}

// Server-sent events: one `data:` line per batch of new tokens, then `data: [DONE]`.
void HttpServer::ReplyCompletionStream(const CompletionReply& reply, httplib::Response& res) {
  const std::shared_ptr<RequestStream>& stream = reply.stream;
  const std::shared_ptr<const HttpConnection>& client = reply.client;
  const std::string& id = reply.id;
  const int64_t created = reply.created;
  const bool with_logprobs = reply.with_logprobs;
  const Tokenizer* tokenizer = reply.tokenizer;
  const bool include_usage = reply.include_usage;
  const std::string model = options_.model_name;
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, stream, client, id, created, model, include_usage, with_logprobs, tokenizer,
       text_sent = std::make_shared<size_t>(0)](size_t, httplib::DataSink& sink) {
        std::optional<StreamEvent> e = NextEvent(*stream, client.get());
        if (!e) {
          sink.done();
          return true;
        }
        std::string out;
        if (e->finish == FinishReason::kError || e->finish == FinishReason::kCancelled) {
          const ApiError err = e->finish == FinishReason::kError
                                   ? FromStatus(e->error)
                                   : ApiError{503, "the request was cancelled", "server_error"};
          out = "data: " + ErrorJson(err).dump() + "\n\ndata: [DONE]\n\n";
        } else {
          json chunk = {
              {"id", id},
              {"object", "text_completion"},
              {"created", created},
              {"model", model},
              {"choices",
               json::array({{{"index", 0},
                             {"text", e->text},
                             {"token_ids", e->tokens},
                             {"logprobs", with_logprobs ? CompletionLogprobsJson(tokenizer, e->logprobs, *text_sent)
                                                        : json(nullptr)},
                             {"finish_reason", FinishJson(e->finish)}}})}};
          *text_sent += e->text.size();
          out = "data: " + chunk.dump() + "\n\n";
          if (e->finish != FinishReason::kNone) {
            if (include_usage) {
              json usage = {{"id", id},       {"object", "text_completion"}, {"created", created},
                            {"model", model}, {"choices", json::array()},    {"usage", UsageJson(e->usage)}};
              out += "data: " + usage.dump() + "\n\n";
            }
            out += "data: [DONE]\n\n";
          }
        }
        // A failed write means the client went away: stop generating for it.
        if (!sink.write(out.data(), out.size())) {
          stream->Cancel();
          return false;
        }
        return true;
      },
      [stream](bool) { stream->Cancel(); });  // no-op once the stream has ended
}

// A handler threw: logged, and answered as a 500 naming what was thrown.
void HttpServer::ReportException(const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
  std::string what = "unknown error";
  try {
    std::rethrow_exception(ep);
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
  }
  log_.Error("HTTP {} {}: {}", req.method, req.path, what);
  SendError(res, {500, "internal error: " + what, "server_error"});
}

void HttpServer::Route() {
  httplib::Server& srv = *router_;
  srv.set_payload_max_length(options_.max_body_bytes);

  srv.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    return RefuseBeforeRouting(req, res) ? httplib::Server::HandlerResponse::Handled
                                         : httplib::Server::HandlerResponse::Unhandled;
  });

  srv.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"status":"ok"})", "application/json");
  });

  srv.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    json body = {{"object", "list"}, {"data", json::array({ModelJson(options_.model_name)})}};
    res.set_content(body.dump(), "application/json");
  });

  // Model ids may hold '/' ("google/gemma-4-31b-it"), so the id is the rest of the path.
  srv.Get(R"(/v1/models/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string id = req.matches[1];
    if (id != options_.model_name) {
      SendError(res,
                {404, fmt::format("The model '{}' does not exist; this server serves '{}'", id, options_.model_name),
                 "invalid_request_error", "model", "model_not_found"});
      return;
    }
    res.set_content(ModelJson(id).dump(), "application/json");
  });

  srv.Get("/openapi.json",
          [document = OpenApiDocumentFor(options_.model_name)](const httplib::Request&, httplib::Response& res) {
            res.set_content(document, "application/json");
          });

  srv.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    PrometheusText text;
    AppendSchedulerMetrics(text, {{MetricLabels{}, scheduler_.metrics()}});
    AppendProcessMetrics(text);
    res.set_content(text.Take(), "text/plain; version=0.0.4");
  });

  srv.Post("/v1/completions",
           [this](const httplib::Request& req, httplib::Response& res) { ServeCompletion(req, res); });

  srv.Post("/v1/chat/completions",
           [this](const httplib::Request& req, httplib::Response& res) { ServeChat(req, res); });

  // Every error has a JSON body: a route's own errors already carry one; httplib's (no route, a
  // malformed request) and a route path asked with another method get one here.
  srv.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    ApiError e{res.status,
               fmt::format("{} {}: the request failed with HTTP status {}", req.method, req.path, res.status)};
    if (res.status == 404) {
      const std::string_view allowed = AllowedMethod(req.path);
      if (allowed.empty()) {
        e.message = fmt::format("no route {} {}; this server serves {}", req.method, req.path, kRouteList);
        e.code = "not_found";
      } else {
        res.status = e.status = 405;
        res.set_header("Allow", std::string(allowed));
        e.message = fmt::format("{} takes {}, not {}", req.path, allowed, req.method);
        e.code = "method_not_allowed";
      }
    }
    res.set_content(ErrorJson(e).dump(), "application/json");
    return httplib::Server::HandlerResponse::Handled;
  }));

  srv.set_exception_handler([this](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    ReportException(req, res, ep);
  });
}

}  // namespace temper::engine
