// OpenAIClient: a ModelClient for any OpenAI-compatible /v1/chat/completions server (vLLM, SGLang,
// llama.cpp's llama-server), over libcurl, with SSE streaming and tool calls.
//
// Failure handling, in order:
//   - 429 and 5xx, refused connections and streams cut before anything was delivered are retried up
//     to max_retries times, waiting Retry-After when the server sends one (capped), otherwise an
//     exponential backoff (initial, 2×, 4×, … capped);
//   - a stream cut after text reached the caller's callbacks is not retried (the caller has already
//     shown that text); it fails with DataLoss;
//   - the endpoint's timeout bounds each HTTP attempt; running out gives DeadlineExceeded, not
//     retried (a server that slow will not be faster on the next try);
//   - other 4xx fail at once: 400 InvalidArgument, 401 Unauthenticated, 403 PermissionDenied,
//     404 NotFound (usually a wrong base_url), each with a body excerpt.
// The API key is read once at Create() from the named environment variable or file; it is sent only
// in the Authorization header, and scrubbed from every error and log line (a server that echoes it
// back in an error body does not leak it).
// Thread safety: Chat() may be called from several threads at once (one curl handle per call).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "common/log.h"
#include "common/status.h"
#include "roles/endpoint_config.h"
#include "roles/model_client.h"

namespace temper {

struct OpenAIClientOptions {
  std::chrono::milliseconds initial_backoff{1000};
  std::chrono::milliseconds max_backoff{30000};
  std::chrono::seconds max_retry_after{120};  // a longer Retry-After is clamped to this
  std::chrono::seconds connect_timeout{10};
  // How the client waits between attempts; tests substitute one that records instead of sleeping.
  std::function<void(std::chrono::milliseconds)> sleep;
};

class OpenAIClient final : public ModelClient {
 public:
  // Errors: FailedPrecondition when the key's variable is unset or empty, IOError when the key file
  // cannot be read, InvalidArgument when it is empty. Neither names the key itself.
  static Result<std::unique_ptr<OpenAIClient>> Create(std::string endpoint_name, const OpenAIEndpoint& endpoint,
                                                      const Logger& logger, OpenAIClientOptions options = {});
  OpenAIClient(const OpenAIClient&) = delete;
  OpenAIClient& operator=(const OpenAIClient&) = delete;

  Result<ChatResponse> Chat(const ChatRequest& request, const StreamCallbacks* stream) override;
  const std::string& endpoint_name() const override { return name_; }

  struct Attempt;  // one HTTP exchange; defined in the .cpp, public only for libcurl's callbacks

 private:
  OpenAIClient(std::string name, OpenAIEndpoint endpoint, std::string api_key, const Logger& logger,
               OpenAIClientOptions options);
  Attempt Perform(const std::string& body, bool streaming, const StreamCallbacks* stream) const;
  std::string Scrub(std::string text) const;

  const std::string name_;
  const OpenAIEndpoint endpoint_;
  const std::string api_key_;  // empty: no Authorization header
  const Logger& logger_;
  const OpenAIClientOptions options_;
};

}  // namespace temper
