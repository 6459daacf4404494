// ScriptedModelServer: a real OpenAI-compatible HTTP server (cpp-httplib) on 127.0.0.1 that
// answers the Architect, Worker and Reflector like a competent but imperfect model (see
// scripted_answers.h), so the loop's end-to-end tests and benchmark run the real roles, the real
// OpenAI client and the real tool loop against a real target without a GPU.
//
// Serves POST /v1/chat/completions (a whole JSON reply, or SSE with `stream: true`, usage in the
// last chunk when stream_options.include_usage is set) and GET /v1/models. A request it cannot
// read (not JSON, no role in the system prompt, no rule section) is answered 400 with an OpenAI
// error body naming the problem. The script's faults apply in arrival order: the first
// `fail_first` chat requests get `fail_status` (with Retry-After for 429 and 503); the first
// `cut_streams_first` streamed replies are cut after their first chunk (before any text, so the
// client may retry), or with `cut_after_text` after their first piece of text or arguments (a
// client that has shown text must not retry).
//
// With options.latency the answers take the model time it says (simulated_engine.h: one engine shared
// by every request, a prefix cache, batched decoding): a whole reply comes when its last token would,
// a streamed one sends each chunk when its tokens would be decoded. Without it, answers are instant.
// With Pacing::kNone answers are instant and the simulated time is only accounted (see
// simulated_engine.h). A latency model with a max_model_len refuses, with vLLM's 400 and wording, a request whose
// prompt plus max_tokens does not fit. GET /metrics serves ServingMetrics (serving_metrics.h): requests, tokens and
// simulated model time, in all and per role.
//
// Every chat request is recorded (role, rule, attempt, the messages as sent, the answer, its usage and
// simulated timing), for tests to assert on what each role was shown.
// Thread safety: serves requests concurrently (options.threads at once); requests() may be called
// from any thread. The destructor stops the server and waits for in-flight requests.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/log.h"
#include "common/status.h"
#include "scripted_model/latency_model.h"
#include "scripted_model/model_script.h"
#include "scripted_model/serving_metrics.h"
#include "scripted_model/simulated_engine.h"

namespace httplib {
class Server;
class Request;
class Response;
}  // namespace httplib

namespace temper::scripted {

struct ScriptedModelOptions {
  std::string host = "127.0.0.1";
  int port = 0;                           // 0: an ephemeral port
  size_t threads = 16;                    // requests served at once (several targets call concurrently)
  std::string model = "temper-scripted";  // the id GET /v1/models lists; replies echo the request's
  const Logger* logger = nullptr;         // when set: one info line per request; must outlive the server
  std::optional<LatencyModel> latency;    // when set: answers take simulated model time; else instant
  Pacing pacing = Pacing::kWallClock;     // with a latency model: kNone answers at once, accounting only
  // When set: every answered request is appended to this file as one JSON line, {"role",
  // "rule_id", "attempt", "turn", "messages", "tools", "answer"}: the roles' real prompts and the
  // replies a model would write, for replaying them offline (the speculation benchmark).
  std::string transcript;
};

struct RecordedRequest {
  uint64_t seq = 0;     // 1-based, in arrival order
  std::string role;     // "architect", "architect_reengage", "worker", "reflector"; "" if unread
  std::string rule_id;  // the rule the answer is about (pick: the chosen or skipped candidate)
  int attempt = 0;      // as prompt_reading.h defines it per role
  int turn = 0;         // worker: 1-based turn within the attempt; else 0
  bool stream = false;
  int http_status = 200;       // what was answered: 200, a scripted fault, or 400
  std::string error;           // why a request was answered 400 or failed by script
  nlohmann::json messages;     // the request's messages, as sent
  nlohmann::json tools;        // the request's tools, as sent (null when none)
  nlohmann::json answer;       // the assistant message answered; null when none
  uint64_t prompt_tokens = 0;  // the usage answered; 0 when there was no answer
  uint64_t completion_tokens = 0;
  std::optional<SimulatedTiming> simulated;  // with a latency model, when there was an answer
};

class ScriptedModelServer {
 public:
  // Binds and starts serving before it returns. Unavailable when host:port cannot be bound,
  // InvalidArgument for a port outside [0, 65535] or zero threads.
  static Result<std::unique_ptr<ScriptedModelServer>> Start(ModelScript script, ScriptedModelOptions options = {});
  ~ScriptedModelServer();
  ScriptedModelServer(const ScriptedModelServer&) = delete;
  ScriptedModelServer& operator=(const ScriptedModelServer&) = delete;

  // "http://127.0.0.1:N/v1", for OpenAIEndpoint::base_url.
  std::string base_url() const;
  // temperd's models.yaml with every role on this server (generous limits, two retries).
  std::string ModelsYaml() const;
  int port() const { return port_; }

  // A copy of every chat request so far, in arrival order. A streamed reply with a latency model is
  // recorded once its answer is decoded (before its last chunks go) or its stream ends early.
  std::vector<RecordedRequest> requests() const;
  // What it has served so far (GET /metrics renders it).
  ServingMetrics Metrics() const;

 private:
  ScriptedModelServer(ModelScript script, ScriptedModelOptions options);
  void HandleChat(const httplib::Request& req, httplib::Response& res);
  void Record(RecordedRequest r);

  const ModelScript script_;
  const ScriptedModelOptions options_;
  std::unique_ptr<SimulatedEngine> engine_;  // with options_.latency; before server_, so it outlives it
  std::unique_ptr<httplib::Server> server_;
  int port_ = 0;
  std::thread thread_;

  mutable std::mutex mu_;
  uint64_t arrived_ = 0;                   // chat requests so far (guarded by mu_)
  uint64_t streams_arrived_ = 0;           // streamed chat requests so far (guarded by mu_)
  std::vector<RecordedRequest> requests_;  // guarded by mu_
  std::FILE* transcript_ = nullptr;        // options_.transcript, open for appending; guarded by mu_
  ServingMetrics served_;                  // guarded by mu_ (simulated comes from engine_)
};

}  // namespace temper::scripted
