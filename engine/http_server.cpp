#include "engine/http_server.h"

#include <chrono>
#include <optional>

#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

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
    case StatusCode::kInvalidArgument: return {400, s.message()};
    case StatusCode::kOutOfRange: return {400, s.message(), "invalid_request_error", "prompt", "context_length_exceeded"};
    case StatusCode::kResourceExhausted: return {429, s.message(), "server_error", "", "overloaded"};
    default: return {500, s.message(), "server_error"};
  }
}

// Reads an optional number field; a wrong type is an error naming it.
template <typename T>
std::optional<ApiError> ReadNumber(const json& body, const char* key, T& out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_number() || (std::is_integral_v<T> && !it->is_number_integer())) {
    return ApiError{400, fmt::format("'{}' must be {}, got {}", key, std::is_integral_v<T> ? "an integer" : "a number",
                                     it->dump()), "invalid_request_error", key};
  }
  out = it->get<T>();
  return std::nullopt;
}

struct ParsedRequest {
  GenerateRequest request;
  bool stream = false;
  bool include_usage = false;
};

std::optional<ApiError> ParseCompletion(const json& body, const std::string& model, ParsedRequest& p) {
  if (!body.is_object()) return ApiError{400, "the request body must be a JSON object"};
  auto m = body.find("model");
  if (m == body.end() || !m->is_string()) return ApiError{400, "'model' is required and must be a string", "invalid_request_error", "model"};
  if (m->get<std::string>() != model) {
    return ApiError{404, fmt::format("The model '{}' does not exist; this server serves '{}'", m->get<std::string>(), model),
                    "invalid_request_error", "model", "model_not_found"};
  }
  auto prompt = body.find("prompt");
  if (prompt == body.end()) return ApiError{400, "'prompt' is required", "invalid_request_error", "prompt"};
  const json* ids = &*prompt;
  if (ids->is_array() && ids->size() == 1 && (*ids)[0].is_array()) ids = &(*ids)[0];
  if (ids->is_string() || (ids->is_array() && !ids->empty() && (*ids)[0].is_string())) {
    return ApiError{400, "'prompt' as text needs a tokenizer, which this server does not have; send token ids",
                    "invalid_request_error", "prompt"};
  }
  if (!ids->is_array()) return ApiError{400, "'prompt' must be an array of token ids", "invalid_request_error", "prompt"};
  for (size_t i = 0; i < ids->size(); ++i) {
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
  if (auto e = ReadNumber(body, "temperature", r.sampling.temperature)) return e;
  if (auto e = ReadNumber(body, "top_p", r.sampling.top_p)) return e;
  if (auto e = ReadNumber(body, "top_k", r.sampling.top_k)) return e;
  if (auto e = ReadNumber(body, "min_p", r.sampling.min_p)) return e;
  if (auto e = ReadNumber(body, "seed", r.sampling.seed)) return e;
  int64_t n = 1;
  if (auto e = ReadNumber(body, "n", n)) return e;
  if (n != 1) return ApiError{400, fmt::format("'n' must be 1, got {}", n), "invalid_request_error", "n"};
  if (r.sampling.temperature > 2) {
    return ApiError{400, fmt::format("'temperature' must be in [0, 2], got {}", r.sampling.temperature), "invalid_request_error", "temperature"};
  }
  if (auto s = body.find("stop"); s != body.end() && !s->is_null()) {
    if (s->is_string()) {
      r.stop_strings.push_back(s->get<std::string>());
    } else if (s->is_array() && s->size() <= 4 && std::all_of(s->begin(), s->end(), [](const json& x) { return x.is_string(); })) {
      for (const json& x : *s) r.stop_strings.push_back(x.get<std::string>());
    } else {
      return ApiError{400, "'stop' must be a string or an array of at most 4 strings", "invalid_request_error", "stop"};
    }
  }
  if (auto s = body.find("stop_token_ids"); s != body.end() && !s->is_null()) {
    if (!s->is_array() || !std::all_of(s->begin(), s->end(), [](const json& x) { return x.is_number_integer(); })) {
      return ApiError{400, "'stop_token_ids' must be an array of integers", "invalid_request_error", "stop_token_ids"};
    }
    for (const json& x : *s) r.sampling.stop_tokens.push_back(x.get<int32_t>());
  }
  if (auto s = body.find("stream"); s != body.end() && !s->is_null()) {
    if (!s->is_boolean()) return ApiError{400, "'stream' must be a boolean", "invalid_request_error", "stream"};
    p.stream = s->get<bool>();
  }
  if (auto s = body.find("stream_options"); s != body.end() && s->is_object()) {
    p.include_usage = s->value("include_usage", false);
  }
  return std::nullopt;
}

json UsageJson(const RequestUsage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_prompt_tokens}}}};
}

json FinishJson(FinishReason f) { return f == FinishReason::kNone ? json(nullptr) : json(FinishReasonName(f)); }

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string Prometheus(const SchedulerMetrics& m) {
  std::string out;
  auto metric = [&](const char* name, const char* type, const char* help, double value) {
    out += fmt::format("# HELP temper_engine_{0} {1}\n# TYPE temper_engine_{0} {2}\ntemper_engine_{0} {3}\n", name, help, type, value);
  };
  const double used = static_cast<double>(m.kv.total_blocks - m.kv.free_blocks);
  metric("requests_waiting", "gauge", "Requests queued for admission.", static_cast<double>(m.waiting));
  metric("requests_running", "gauge", "Requests being prefilled or decoded.", static_cast<double>(m.running));
  metric("requests_finished_total", "counter", "Requests that ended, for any reason.", static_cast<double>(m.finished_requests));
  metric("kv_blocks_total", "gauge", "Paged KV blocks in the pool.", static_cast<double>(m.kv.total_blocks));
  metric("kv_blocks_used", "gauge", "KV blocks held by sequences or cached prefixes.", used);
  metric("kv_block_tokens", "gauge", "Tokens per KV block.", m.kv.block_tokens);
  metric("kv_pool_usage_ratio", "gauge", "Fraction of the KV pool in use.", m.kv.total_blocks > 0 ? used / static_cast<double>(m.kv.total_blocks) : 0);
  metric("prefix_cache_entries", "gauge", "Pinned prefixes in the prefix cache.", static_cast<double>(m.cache_entries));
  metric("prompt_tokens_total", "counter", "Prompt tokens requested.", static_cast<double>(m.prompt_tokens));
  metric("prompt_tokens_cached_total", "counter", "Prompt tokens served from the prefix cache.", static_cast<double>(m.cached_prompt_tokens));
  metric("prefix_cache_hit_rate", "gauge", "Prompt tokens reused over prompt tokens requested.", m.cache_hit_rate());
  metric("prefill_tokens_total", "counter", "Tokens prefilled.", static_cast<double>(m.prefilled_tokens));
  metric("generated_tokens_total", "counter", "Tokens generated.", static_cast<double>(m.generated_tokens));
  metric("generated_tokens_per_second", "gauge", "Generation rate over the last ten seconds.", m.generated_tokens_per_second);
  metric("preemptions_total", "counter", "Requests preempted for KV memory (recomputed later).", static_cast<double>(m.preemptions));
  metric("forward_passes_total", "counter", "Batched forward passes run.", static_cast<double>(m.forward_passes));
  return out;
}

}  // namespace

HttpServer::HttpServer(Scheduler& scheduler, const HttpServerOptions& options, const Logger& log)
    : scheduler_(scheduler), options_(options), log_(log), server_(std::make_unique<httplib::Server>()) {}

HttpServer::~HttpServer() { Stop(); }

Result<std::unique_ptr<HttpServer>> HttpServer::Start(Scheduler& scheduler, const HttpServerOptions& options,
                                                      const Logger& log) {
  if (options.model_name.empty()) return Status::InvalidArgument("HTTP server: the model name is empty");
  std::unique_ptr<HttpServer> s(new HttpServer(scheduler, options, log));
  s->Route();
  if (options.port == 0) {
    s->port_ = s->server_->bind_to_any_port(options.host);
  } else {
    s->port_ = s->server_->bind_to_port(options.host, options.port) ? options.port : -1;
  }
  if (s->port_ <= 0) {
    return Status::Unavailable(fmt::format("HTTP server: cannot bind {}:{}", options.host, options.port));
  }
  s->thread_ = std::thread([p = s.get()] { p->server_->listen_after_bind(); });
  return s;
}

std::optional<StreamEvent> HttpServer::NextEvent(RequestStream& stream) {
  // Poll, so that Stop never waits on a long generation.
  while (true) {
    std::optional<StreamEvent> e = stream.NextFor(std::chrono::milliseconds(100));
    if (!e || e->finish != FinishReason::kNone || !e->tokens.empty()) return e;
    if (stopping_.load()) {
      stream.Cancel();
      return std::nullopt;
    }
  }
}

void HttpServer::Stop() {
  if (!thread_.joinable()) return;
  stopping_.store(true);
  server_->stop();
  thread_.join();
}

void HttpServer::Route() {
  httplib::Server& srv = *server_;
  srv.set_payload_max_length(options_.max_body_bytes);
  const int threads = std::max(1, options_.threads);
  srv.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };

  srv.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"status":"ok"})", "application/json");
  });

  srv.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    json body = {{"object", "list"},
                 {"data", json::array({{{"id", options_.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "temper"}}})}};
    res.set_content(body.dump(), "application/json");
  });

  srv.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(Prometheus(scheduler_.metrics()), "text/plain; version=0.0.4");
  });

  srv.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded()) {
      SendError(res, {400, "malformed JSON in the request body"});
      return;
    }
    ParsedRequest parsed;
    if (std::optional<ApiError> e = ParseCompletion(body, options_.model_name, parsed)) {
      SendError(res, *e);
      return;
    }
    Result<std::shared_ptr<RequestStream>> submitted = scheduler_.Submit(std::move(parsed.request));
    if (!submitted.ok()) {
      SendError(res, FromStatus(submitted.status()));
      return;
    }
    std::shared_ptr<RequestStream> stream = *submitted;
    const std::string id = fmt::format("cmpl-{}", next_id_.fetch_add(1));
    const int64_t created = UnixNow();

    if (!parsed.stream) {
      StreamEvent all;
      while (std::optional<StreamEvent> e = NextEvent(*stream)) {
        all.tokens.insert(all.tokens.end(), e->tokens.begin(), e->tokens.end());
        all.text += e->text;
        all.finish = e->finish;
        all.error = e->error;
        all.usage = e->usage;
      }
      if (all.finish == FinishReason::kNone) all.finish = FinishReason::kCancelled;  // the server stopped
      if (all.finish == FinishReason::kError || all.finish == FinishReason::kCancelled) {
        SendError(res, all.finish == FinishReason::kError ? FromStatus(all.error)
                                                          : ApiError{503, "the server is shutting down", "server_error"});
        return;
      }
      json out = {{"id", id},
                  {"object", "text_completion"},
                  {"created", created},
                  {"model", options_.model_name},
                  {"choices", json::array({{{"index", 0},
                                            {"text", all.text},
                                            {"token_ids", all.tokens},
                                            {"logprobs", nullptr},
                                            {"finish_reason", FinishJson(all.finish)}}})},
                  {"usage", UsageJson(all.usage)}};
      res.set_content(out.dump(), "application/json");
      return;
    }

    // Server-sent events: one `data:` line per batch of new tokens, then `data: [DONE]`.
    const bool include_usage = parsed.include_usage;
    const std::string model = options_.model_name;
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, stream, id, created, model, include_usage](size_t, httplib::DataSink& sink) {
          std::optional<StreamEvent> e = NextEvent(*stream);
          if (!e) {
            sink.done();
            return true;
          }
          std::string out;
          if (e->finish == FinishReason::kError || e->finish == FinishReason::kCancelled) {
            const ApiError err = e->finish == FinishReason::kError ? FromStatus(e->error)
                                                                   : ApiError{503, "the request was cancelled", "server_error"};
            out = "data: " + ErrorJson(err).dump() + "\n\ndata: [DONE]\n\n";
          } else {
            json chunk = {{"id", id},
                          {"object", "text_completion"},
                          {"created", created},
                          {"model", model},
                          {"choices", json::array({{{"index", 0},
                                                    {"text", e->text},
                                                    {"token_ids", e->tokens},
                                                    {"logprobs", nullptr},
                                                    {"finish_reason", FinishJson(e->finish)}}})}};
            out = "data: " + chunk.dump() + "\n\n";
            if (e->finish != FinishReason::kNone) {
              if (include_usage) {
                json usage = {{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", model},
                              {"choices", json::array()}, {"usage", UsageJson(e->usage)}};
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
  });

  srv.set_exception_handler([this](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    log_.Error("HTTP {} {}: {}", req.method, req.path, what);
    SendError(res, {500, "internal error: " + what, "server_error"});
  });
}

}  // namespace temper::engine
