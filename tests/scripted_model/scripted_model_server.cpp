#include "scripted_model/scripted_model_server.h"

#include <httplib.h>

#include <algorithm>
#include <cerrno>

#include <fmt/format.h>

#include "scripted_model/completion_wire.h"
#include "scripted_model/prompt_reading.h"
#include "scripted_model/scripted_answers.h"

namespace temper::scripted {

using nlohmann::json;

Result<std::unique_ptr<ScriptedModelServer>> ScriptedModelServer::Start(ModelScript script,
                                                                        ScriptedModelOptions options) {
  if (options.port < 0 || options.port > 65535) {
    return Status::InvalidArgument(fmt::format("port {} is outside [0, 65535]", options.port));
  }
  if (options.threads == 0) return Status::InvalidArgument("the scripted model server needs at least one thread");
  std::unique_ptr<ScriptedModelServer> s(new ScriptedModelServer(std::move(script), std::move(options)));
  const ScriptedModelOptions& o = s->options_;
  if (!o.transcript.empty()) {
    s->transcript_ = std::fopen(o.transcript.c_str(), "a");
    if (s->transcript_ == nullptr) return Status::FromErrno(errno, "transcript " + o.transcript);
  }
  s->port_ =
      o.port == 0 ? s->server_->bind_to_any_port(o.host) : (s->server_->bind_to_port(o.host, o.port) ? o.port : -1);
  if (s->port_ <= 0) {
    return Status::Unavailable(
        fmt::format("the scripted model server cannot listen on {}:{} (in use, or not an "
                    "address of this host)",
                    o.host, o.port));
  }
  // The socket already listens, so clients may connect before the accept loop runs.
  ScriptedModelServer* raw = s.get();
  s->thread_ = std::thread([raw] { raw->server_->listen_after_bind(); });
  return s;
}

ScriptedModelServer::ScriptedModelServer(ModelScript script, ScriptedModelOptions options)
    : script_(std::move(script)),
      options_(std::move(options)),
      engine_(options_.latency ? std::make_unique<SimulatedEngine>(*options_.latency, options_.pacing) : nullptr),
      server_(std::make_unique<httplib::Server>()) {
  const size_t threads = options_.threads;
  server_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server_->Post("/v1/chat/completions",
                [this](const httplib::Request& req, httplib::Response& res) { HandleChat(req, res); });
  server_->Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    json body = {{"object", "list"},
                 {"data", json::array({{{"id", options_.model}, {"object", "model"}, {"owned_by", "temper"}}})}};
    res.set_content(body.dump(), "application/json");
  });
  server_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(PrometheusText(Metrics()), "text/plain; version=0.0.4");
  });
}

ScriptedModelServer::~ScriptedModelServer() {
  if (engine_) engine_->Shutdown();  // requests waiting for simulated tokens end now
  server_->stop();
  if (thread_.joinable()) thread_.join();
  if (transcript_ != nullptr) std::fclose(transcript_);
}

std::string ScriptedModelServer::base_url() const {
  const std::string host = options_.host.find(':') != std::string::npos ? "[" + options_.host + "]" : options_.host;
  return fmt::format("http://{}:{}/v1", host, port_);
}

std::string ScriptedModelServer::ModelsYaml() const {
  return fmt::format(R"(endpoints:
  scripted: {{type: openai, base_url: "{}", model: {}, timeout: 60s, max_retries: 2}}
roles:
  architect: {{endpoint: scripted, context_tokens: 32768, max_output_tokens: 2048}}
  worker: {{endpoint: scripted, context_tokens: 32768, max_output_tokens: 2048}}
  reflector: {{endpoint: scripted, context_tokens: 32768, max_output_tokens: 1024}}
)",
                     base_url(), options_.model);
}

std::vector<RecordedRequest> ScriptedModelServer::requests() const {
  std::vector<RecordedRequest> out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    out = requests_;
  }
  std::sort(out.begin(), out.end(), [](const RecordedRequest& a, const RecordedRequest& b) { return a.seq < b.seq; });
  return out;
}

ServingMetrics ScriptedModelServer::Metrics() const {
  ServingMetrics m;
  {
    std::lock_guard<std::mutex> lock(mu_);
    m = served_;
  }
  if (engine_) {
    m.simulated = engine_->Totals();
    m.speedup = options_.latency->speedup;
  }
  return m;
}

void ScriptedModelServer::Record(RecordedRequest r) {
  if (options_.logger) {
    std::string cost;
    if (r.http_status == 200) cost = fmt::format(", {} + {} tokens", r.prompt_tokens, r.completion_tokens);
    if (const std::optional<SimulatedTiming>& t = r.simulated) {
      cost += fmt::format(
          " · simulated: queue {:.2f} s, prefill {:.2f} s ({} of the prompt tokens cached), decode "
          "{:.2f} s (mean batch {:.2f}){}",
          t->queue_s, t->prefill_s, t->cached_prompt_tokens, t->decode_s, t->mean_batch,
          t->abandoned ? ", abandoned" : "");
    }
    options_.logger->Info("scripted model: #{} {} {} attempt {} turn {} → {}{}{}", r.seq, r.role.empty() ? "?" : r.role,
                          r.rule_id.empty() ? "-" : ShortRuleName(r.rule_id), r.attempt, r.turn, r.http_status, cost,
                          r.error.empty() ? "" : " (" + r.error + ")");
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (transcript_ != nullptr && r.http_status == 200 && !r.answer.is_null()) {
    const json line = {{"role", r.role},         {"rule_id", r.rule_id}, {"attempt", r.attempt}, {"turn", r.turn},
                       {"messages", r.messages}, {"tools", r.tools},     {"answer", r.answer}};
    const std::string text = line.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
    std::fwrite(text.data(), 1, text.size(), transcript_);
    std::fflush(transcript_);
  }
  if (r.http_status == 200) {
    ++served_.requests;
    served_.prompt_tokens += r.prompt_tokens;
    served_.completion_tokens += r.completion_tokens;
    for (int role = 0; role < kScriptedRoles; ++role) {
      if (r.role != RoleName(static_cast<ScriptedRole>(role))) continue;
      served_.roles[role].Count(r.prompt_tokens, r.simulated ? r.simulated->cached_prompt_tokens : 0,
                                r.completion_tokens);
    }
  }
  requests_.push_back(std::move(r));
}

void ScriptedModelServer::HandleChat(const httplib::Request& req, httplib::Response& res) {
  RecordedRequest rec;
  bool fail = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    rec.seq = ++arrived_;
    fail = rec.seq <= static_cast<uint64_t>(script_.faults.fail_first);
  }
  auto reject = [&](int status, const std::string& message, const char* type) {
    rec.http_status = status;
    rec.error = message;
    res.status = status;
    res.set_content(ErrorBody(message, type), "application/json");
    Record(std::move(rec));
  };

  const json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_object() && body.contains("messages")) rec.messages = body["messages"];
  if (body.is_object() && body.contains("tools")) rec.tools = body["tools"];
  Result<ReadRequest> read = body.is_discarded() ? Result<ReadRequest>(Status::InvalidArgument("the body is not JSON"))
                                                 : ReadChatRequest(body);
  if (read.ok()) {
    rec.role = std::string(RoleName(read->role));
    rec.rule_id = read->role == ScriptedRole::kArchitectPick ? read->candidates.front().id : read->rule.id;
    rec.attempt = read->attempt;
    rec.turn = read->role == ScriptedRole::kWorker ? static_cast<int>(read->calls.size()) + 1 : 0;
    rec.stream = read->stream;
  }
  if (fail) {
    const int status = script_.faults.fail_status;
    if (status == 429 || status == 503)
      res.set_header("Retry-After", std::to_string(script_.faults.retry_after_seconds));
    reject(status,
           fmt::format("scripted fault: request {} of the first {} fails with {}", rec.seq, script_.faults.fail_first,
                       status),
           status == 429 ? "rate_limit_exceeded" : "server_error");
    return;
  }
  if (!read.ok()) return reject(400, read.status().message(), "invalid_request_error");
  Result<ScriptedAnswer> answer = Answer(*read, script_);
  if (!answer.ok()) return reject(400, answer.status().message(), "invalid_request_error");

  const std::string prompt_text = PromptText(body);
  const Usage usage = EstimateUsage(prompt_text.size(), *answer);
  if (options_.latency) {
    // The engine refuses what does not fit its context before it answers anything (vLLM's 400).
    std::optional<uint64_t> max_tokens;  // max_completion_tokens first, as vLLM reads them
    for (const char* key : {"max_tokens", "max_completion_tokens"}) {
      if (auto it = body.find(key); it != body.end() && it->is_number_unsigned()) max_tokens = it->get<uint64_t>();
    }
    if (Status fits = ContextLengthError(*options_.latency, usage.prompt_tokens, max_tokens); !fits.ok()) {
      return reject(400, fits.message(), "BadRequestError");
    }
  }
  rec.answer = AssistantMessage(*answer);
  rec.prompt_tokens = usage.prompt_tokens;
  rec.completion_tokens = usage.completion_tokens;
  std::shared_ptr<SimulatedEngine::Request> sim;
  if (engine_) {
    sim = engine_->Submit(prompt_text, AnswerText(*answer), usage.prompt_tokens, usage.completion_tokens, read->role);
  }
  const std::string id = fmt::format("chatcmpl-scripted-{}", rec.seq);
  const std::string model = read->model.empty() ? options_.model : read->model;
  if (!read->stream) {
    if (sim && !sim->WaitFinished()) return reject(503, "the scripted model server is stopping", "server_error");
    if (sim) rec.simulated = sim->Timing();
    res.set_content(CompletionBody(*answer, id, model, usage), "application/json");
    Record(std::move(rec));
    return;
  }
  bool cut = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cut = ++streams_arrived_ <= static_cast<uint64_t>(script_.faults.cut_streams_first);
  }
  // The first event only says "assistant"; the second carries the first piece of the answer.
  const size_t cut_after = !cut ? 0 : script_.faults.cut_after_text ? 2 : 1;
  if (cut)
    rec.error = fmt::format("scripted fault: the stream is cut after its {}",
                            cut_after == 1 ? "first chunk" : "first piece of text");
  auto events =
      std::make_shared<std::vector<StreamEvent>>(CompletionEvents(*answer, id, model, usage, read->include_usage));
  if (!sim) Record(std::move(rec));
  // With a latency model each event waits for its tokens, and the request is recorded with its timing
  // when the answer is decoded (before the finish event goes) or when the stream ends early.
  auto pending = sim ? std::make_shared<std::optional<RecordedRequest>>(std::move(rec)) : nullptr;
  auto record_once = [this, sim, pending] {
    if (!pending || !*pending) return;
    (*pending)->simulated = sim->Timing();
    Record(std::move(**pending));
    pending->reset();
  };
  const uint64_t answer_tokens = usage.completion_tokens;
  res.set_chunked_content_provider(
      "text/event-stream", [events, cut_after, sim, record_once, answer_tokens](size_t, httplib::DataSink& sink) {
        for (size_t i = 0; i < events->size(); ++i) {
          const StreamEvent& e = (*events)[i];
          if (sim && !sim->WaitDecoded(e.tokens)) {
            record_once();
            return false;  // the server is stopping
          }
          if (sim && e.tokens == answer_tokens) record_once();
          if (!sink.write(e.data.data(), e.data.size()) || i + 1 == cut_after) {
            record_once();
            return false;  // the client left, or a scripted cut: the connection closes unfinished
          }
        }
        sink.done();
        return true;
      });
}

}  // namespace temper::scripted
