// HttpServer: an OpenAI-compatible HTTP front end to a Scheduler, so users can point their own
// tools at the engine and the `openai` client has a real peer to test against.
//
// Endpoints:
//   POST /v1/completions  OpenAI's completions API with `prompt` as token ids (an array of
//                         integers, or a one-element array of one) or, with a ChatEngine (its
//                         tokenizer), as one text encoded with the model's special tokens
//                         (<bos> first) as other OpenAI-compatible servers do; `stream` with server-sent
//                         events, `stop` strings (need a detokenizer), and the common extensions
//                         `top_k`, `min_p`, `stop_token_ids`. Each choice also carries the
//                         generated `token_ids`; usage reports `prompt_tokens_details.cached_tokens`.
//   POST /v1/chat/completions  OpenAI's chat API over the ChatEngine (needs one, i.e. a tokenizer):
//                         `messages` (system/developer, user, assistant with `tool_calls`, tool
//                         results as `tool` messages), `tools` (function tools with JSON-schema
//                         parameters), `tool_choice` "auto" or "none", sampling as above,
//                         `max_tokens`/`max_completion_tokens` (default: what the context leaves),
//                         `stop`, `stream` with `stream_options.include_usage`. Streamed chunks carry
//                         `delta.content`, `delta.reasoning_content` (thinking), and each tool call
//                         whole in one `delta.tool_calls` entry (index, id, function name, arguments)
//                         once the model has closed it. A reply that breaks Gemma's format (a
//                         malformed tool call, a stray control token) comes back as text from that
//                         point on, verbatim, and the choice (the last chunk's, streamed) carries
//                         `parse_error` saying what broke, as other OpenAI-compatible servers return
//                         the text they cannot parse.
//   GET  /v1/models       the one model this server serves; /v1/models/{id} that model alone
//   GET  /health          {"status":"ok"}
//   GET  /metrics         Prometheus text: queue depth, KV pool use, prefix-cache hit rate, tok/s,
//                         request latency histograms (scheduler_metrics_text.h), the process's own
//   GET  /openapi.json    the OpenAPI 3.1 document of all of the above (openapi_document.h)
// Both APIs take `logprobs` (chat: a boolean with `top_logprobs`; completions: the count of
// alternatives), in OpenAI's forms (token_logprobs.h says what they are). Every parameter is
// implemented or accepted only at its neutral value (openai_parameters.h); any other is refused
// naming it. Usage carries `prompt_tokens_details.cached_tokens` and speculative
// decoding's drafts under `temper` (`draft_tokens`, `accepted_draft_tokens`).
// Every error has an OpenAI-style JSON body ({"error": {"message", "type", "param", "code"}}):
// 400 for malformed JSON or invalid parameters (naming the parameter), 400 with code
// `context_length_exceeded` for a prompt that cannot fit, 404 `model_not_found` for another model
// name, 404 `not_found` for an unknown route and 405 `method_not_allowed` for a route asked with
// another method, 429 when the queue is full.
//
// Web pages (cross_site_guard.h): every request's Host must name the server as bound (its IP
// literal, localhost on loopback, any IP literal on all interfaces) or one of allowed_hosts, else
// 421 `host_not_allowed` naming the refused Host (DNS rebinding); the POST routes take only
// `Content-Type: application/json`, else 415 `unsupported_media_type` (a page's cross-origin POST
// without a preflight); no reply carries an Access-Control-* header, so no preflight is approved.
//
// Limits, because anyone who can reach the port can send anything (engine/serve/http_listener.h does the
// connection handling): a body over max_body_bytes gets 413 without being read; a body nesting JSON
// deeper than max_json_depth gets 400 `json_too_deep` before it is parsed; a request head or body
// that does not arrive in time gets 408, so slow clients cannot hold the workers; with an api_key,
// every endpoint but /health needs "Authorization: Bearer <key>" (compared in constant time, never
// logged) and answers 401 `invalid_api_key` without it. A client that hangs up, streaming or not,
// has its generation cancelled: the scheduler stops decoding for it within ~100 ms
// (temper_engine_requests_cancelled_total counts it).
//
// Thread safety: the server runs its own threads; Stop may be called from any thread.
// Ownership: borrows the scheduler and logger, which must outlive it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/log.h"
#include "common/status.h"
#include "engine/serve/chat_engine.h"
#include "engine/serve/cross_site_guard.h"
#include "engine/serve/scheduler.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace temper::engine {

class HttpConnection;
class HttpListener;
class HttpRouter;

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;            // 0: any free port
  std::string model_name;  // the `model` clients must name
  size_t max_body_bytes = size_t{8} << 20;
  int max_json_depth = 64;  // tool schemas nest a few levels; nothing a client needs nests 64
  int threads = 32;         // requests served at once (a streaming response holds one)
  size_t max_connections = 1024;
  std::chrono::milliseconds header_timeout{10000};  // a request's head, from its first byte (or the accept)
  std::chrono::milliseconds body_timeout{30000};    // its body, from the end of its head
  std::chrono::milliseconds idle_timeout{60000};    // a kept-alive connection between requests
  std::chrono::milliseconds write_timeout{30000};   // a client that stops reading the reply
  // Clients must send "Authorization: Bearer <api_key>" (every endpoint but /health); empty: no key.
  std::string api_key;
  // Host names (or IP literals) answered besides the bind address's own (cross_site_guard.h): the
  // names a deployment is reached by.
  std::vector<std::string> allowed_hosts;
  // Serves /v1/chat/completions; null (no tokenizer) answers it with an error saying so. Borrowed:
  // must outlive the server, and its scheduler should be the one passed to Start.
  ChatEngine* chat = nullptr;
};

class HttpServer {
 public:
  // Binds and starts serving. InvalidArgument for an empty model name or an allowed host that is
  // no host name; Unavailable naming host:port when the address cannot be bound.
  static Result<std::unique_ptr<HttpServer>> Start(Scheduler& scheduler, const HttpServerOptions& options,
                                                   const Logger& log);
  ~HttpServer();  // stops
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const;
  // Stops accepting, ends open streams' connections and joins the serving threads. Idempotent.
  void Stop();

 private:
  HttpServer(Scheduler& scheduler, const HttpServerOptions& options, const Logger& log);
  // Registers the routes below; each is a member of its own.
  void Route();
  bool RefuseBeforeRouting(const httplib::Request& req, httplib::Response& res);
  // /v1/completions: parse, submit to the scheduler, then reply whole or as events.
  struct CompletionReply;
  void ServeCompletion(const httplib::Request& req, httplib::Response& res);
  void ReplyCompletionWhole(const CompletionReply& reply, httplib::Response& res);
  void ReplyCompletionStream(const CompletionReply& reply, httplib::Response& res);
  void ReportException(const httplib::Request& req, httplib::Response& res, std::exception_ptr ep);
  // The stream's next event; nullopt once it ended, or (after cancelling it) when the server stops
  // or `client` has hung up.
  std::optional<StreamEvent> NextEvent(RequestStream& stream, const HttpConnection* client);
  std::optional<ChatEvent> NextChatEvent(ChatStream& stream, const HttpConnection* client);
  // /v1/chat/completions: parse, submit to the chat engine, then reply whole or as events.
  struct ChatReply;
  void ServeChat(const httplib::Request& req, httplib::Response& res);
  void ReplyChatWhole(const ChatReply& reply, httplib::Response& res);
  void ReplyChatStream(const ChatReply& reply, httplib::Response& res);

  Scheduler& scheduler_;
  HttpServerOptions options_;
  HostAllowList hosts_;  // the Host values answered
  const Logger& log_;
  std::unique_ptr<HttpRouter> router_;
  std::unique_ptr<HttpListener> listener_;
  std::atomic<uint64_t> next_id_{1};
  std::atomic<bool> stopping_{false};
};

}  // namespace temper::engine
