#include "roles/openai_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "common/display_text.h"
#include "roles/openai_wire.h"

namespace temper {

namespace {

constexpr size_t kMaxBodyBytes = 64u << 20;  // a chat reply is kilobytes; this bounds a runaway server
constexpr size_t kExcerptChars = 500;

std::string Trim(std::string s) {
  const char* ws = " \t\r\n";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

Result<std::string> ReadApiKey(const std::string& endpoint_name, const OpenAIEndpoint& e) {
  if (!e.api_key_env.empty()) {
    const char* v = std::getenv(e.api_key_env.c_str());
    if (v == nullptr || *v == '\0') {
      return Status::FailedPrecondition(fmt::format(
          "endpoint '{}': environment variable {} (api_key_env) is unset or empty", endpoint_name, e.api_key_env));
    }
    return Trim(v);
  }
  if (!e.api_key_file.empty()) {
    std::ifstream in(e.api_key_file);
    if (!in) {
      return Status::FromErrno(errno,
                               fmt::format("endpoint '{}': reading api_key_file {}", endpoint_name, e.api_key_file));
    }
    std::stringstream ss;
    ss << in.rdbuf();
    std::string key = Trim(ss.str());
    if (key.empty()) {
      return Status::InvalidArgument(
          fmt::format("endpoint '{}': api_key_file {} is empty", endpoint_name, e.api_key_file));
    }
    return key;
  }
  return std::string();
}

struct CurlHandle {
  CURL* curl = curl_easy_init();
  curl_slist* headers = nullptr;
  ~CurlHandle() {
    if (headers) curl_slist_free_all(headers);
    if (curl) curl_easy_cleanup(curl);
  }
};

// Seconds, or an HTTP date; nullopt when absent or unreadable.
std::optional<std::chrono::milliseconds> ParseRetryAfter(const std::string& value) {
  std::string v = Trim(value);
  if (v.empty()) return std::nullopt;
  if (std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    if (v.size() > 9) return std::chrono::milliseconds(std::chrono::hours(24));
    return std::chrono::seconds(std::stoll(v));
  }
  time_t when = curl_getdate(v.c_str(), nullptr);
  if (when < 0) return std::nullopt;
  time_t now = time(nullptr);
  return std::chrono::seconds(when > now ? when - now : 0);
}

}  // namespace

struct OpenAIClient::Attempt {
  CURLcode curl_code = CURLE_OK;
  std::string curl_error;
  long http_status = 0;
  std::string body;  // non-streaming reply, or an error body
  std::optional<std::chrono::milliseconds> retry_after;
  bool delivered = false;                        // stream text reached the caller's callbacks
  bool connected = false;                        // the TCP connection was made (a timeout before it is retryable)
  Status stream_error;                           // a malformed chunk, or a mid-stream error event
  std::optional<Result<ChatResponse>> streamed;  // the streamed reply, when the status was 200

  // Per-attempt streaming state.
  bool streaming = false;
  const StreamCallbacks* callbacks = nullptr;
  StreamCallbacks counting;  // wraps `callbacks` to note delivery
  SseDecoder sse;
  StreamAccumulator acc;
  CURL* curl = nullptr;
};

namespace {

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  auto* a = static_cast<OpenAIClient::Attempt*>(user);
  std::string_view line(data, size * n);
  constexpr std::string_view kRetryAfter = "retry-after:";
  if (line.size() > kRetryAfter.size()) {
    std::string head(line.substr(0, kRetryAfter.size()));
    std::transform(head.begin(), head.end(), head.begin(), [](unsigned char c) { return std::tolower(c); });
    if (head == kRetryAfter) a->retry_after = ParseRetryAfter(std::string(line.substr(kRetryAfter.size())));
  }
  return size * n;
}

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  auto* a = static_cast<OpenAIClient::Attempt*>(user);
  const size_t bytes = size * n;
  if (a->http_status == 0) curl_easy_getinfo(a->curl, CURLINFO_RESPONSE_CODE, &a->http_status);
  if (!a->streaming || a->http_status != 200) {
    if (a->body.size() + bytes > kMaxBodyBytes) return 0;  // aborts the transfer
    a->body.append(data, bytes);
    return bytes;
  }
  std::vector<std::string> events;
  a->sse.Feed(std::string_view(data, bytes), &events);
  for (const std::string& e : events) {
    Status s = a->acc.Feed(e, &a->counting);
    if (!s.ok()) {
      a->stream_error = s;
      return 0;
    }
  }
  return bytes;
}

}  // namespace

OpenAIClient::OpenAIClient(std::string name, OpenAIEndpoint endpoint, std::string api_key, const Logger& logger,
                           OpenAIClientOptions options)
    : name_(std::move(name)),
      endpoint_(std::move(endpoint)),
      api_key_(std::move(api_key)),
      logger_(logger),
      options_(std::move(options)) {}

Result<std::unique_ptr<OpenAIClient>> OpenAIClient::Create(std::string endpoint_name, const OpenAIEndpoint& endpoint,
                                                           const Logger& logger, OpenAIClientOptions options) {
  TEMPER_ASSIGN_OR_RETURN(std::string key, ReadApiKey(endpoint_name, endpoint));
  if (!options.sleep) options.sleep = [](std::chrono::milliseconds d) { std::this_thread::sleep_for(d); };
  return std::unique_ptr<OpenAIClient>(
      new OpenAIClient(std::move(endpoint_name), endpoint, std::move(key), logger, std::move(options)));
}

std::string OpenAIClient::Scrub(std::string text) const {
  if (api_key_.empty()) return text;
  for (size_t pos = text.find(api_key_); pos != std::string::npos; pos = text.find(api_key_, pos)) {
    text.replace(pos, api_key_.size(), "[redacted]");
  }
  return text;
}

OpenAIClient::Attempt OpenAIClient::Perform(const std::string& body, bool streaming,
                                            const StreamCallbacks* stream) const {
  Attempt a;
  CurlHandle h;
  if (h.curl == nullptr) {
    a.curl_code = CURLE_FAILED_INIT;
    a.curl_error = "curl_easy_init failed";
    return a;
  }
  a.curl = h.curl;
  a.streaming = streaming;
  a.callbacks = stream;
  if (stream) {
    Attempt* self = &a;
    if (stream->on_text)
      a.counting.on_text = [self](std::string_view t) {
        self->delivered = true;
        self->callbacks->on_text(t);
      };
    if (stream->on_reasoning)
      a.counting.on_reasoning = [self](std::string_view t) {
        self->delivered = true;
        self->callbacks->on_reasoning(t);
      };
  }
  std::string url = endpoint_.base_url + "/chat/completions";
  h.headers = curl_slist_append(h.headers, "Content-Type: application/json");
  h.headers = curl_slist_append(h.headers, streaming ? "Accept: text/event-stream" : "Accept: application/json");
  h.headers = curl_slist_append(h.headers, "Expect:");  // no 100-continue round trip on large prompts
  std::string auth;
  if (!api_key_.empty()) {
    auth = "Authorization: Bearer " + api_key_;
    h.headers = curl_slist_append(h.headers, auth.c_str());
  }
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(h.curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h.curl, CURLOPT_HTTPHEADER, h.headers);
  curl_easy_setopt(h.curl, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(h.curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(h.curl, CURLOPT_NOSIGNAL, 1L);  // threads: no SIGALRM for DNS timeouts
  curl_easy_setopt(h.curl, CURLOPT_TIMEOUT_MS, static_cast<long>(endpoint_.timeout.count() * 1000));
  curl_easy_setopt(h.curl, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(std::min(options_.connect_timeout, endpoint_.timeout).count() * 1000));
  curl_easy_setopt(h.curl, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(h.curl, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(h.curl, CURLOPT_HEADERDATA, &a);
  curl_easy_setopt(h.curl, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(h.curl, CURLOPT_WRITEDATA, &a);
  curl_easy_setopt(h.curl, CURLOPT_ACCEPT_ENCODING, "");
  a.curl_code = curl_easy_perform(h.curl);
  curl_easy_getinfo(h.curl, CURLINFO_RESPONSE_CODE, &a.http_status);
  curl_off_t connect_us = 0;
  curl_easy_getinfo(h.curl, CURLINFO_CONNECT_TIME_T, &connect_us);
  a.connected = connect_us > 0;
  a.curl_error = errbuf[0] ? errbuf : curl_easy_strerror(a.curl_code);
  if (streaming && a.http_status == 200 && a.curl_code == CURLE_OK && a.stream_error.ok()) {
    // A final event without its blank line still counts.
    std::vector<std::string> events;
    a.sse.Feed("\n\n", &events);
    for (const std::string& e : events) {
      Status s = a.acc.Feed(e, &a.counting);
      if (!s.ok()) a.stream_error = s;
    }
    if (a.stream_error.ok()) a.streamed = a.acc.Finish();
  }
  a.curl = nullptr;
  return a;
}

Result<ChatResponse> OpenAIClient::Chat(const ChatRequest& request, const StreamCallbacks* stream) {
  const auto start = std::chrono::steady_clock::now();
  const bool streaming = stream != nullptr;
  const std::string body = ToOpenAIRequest(request, endpoint_.model, streaming).dump();
  const uint32_t max_attempts = endpoint_.max_retries + 1;
  const std::string who = fmt::format("endpoint '{}' ({} role, {})", name_,
                                      request.role_name.empty() ? "no" : request.role_name, endpoint_.base_url);
  Status last;
  for (uint32_t attempt = 1; attempt <= max_attempts; ++attempt) {
    Attempt a = Perform(body, streaming, stream);
    bool retryable = false;
    if (!a.stream_error.ok()) {
      return a.stream_error.WithContext(who);
    } else if (a.curl_code == CURLE_OPERATION_TIMEDOUT && a.connected) {
      return Status::DeadlineExceeded(fmt::format("{}: no complete reply within the timeout of {} s (attempt {})", who,
                                                  endpoint_.timeout.count(), attempt));
    } else if (a.curl_code != CURLE_OK) {
      last = Status::Unavailable(Scrub(fmt::format("{}: {} (curl error {}) on attempt {} of {}", who, a.curl_error,
                                                   static_cast<int>(a.curl_code), attempt, max_attempts)));
      if (a.delivered) {
        return Status::DataLoss(
            Scrub(fmt::format("{}: the stream broke after text was delivered: {}; not retried", who, a.curl_error)));
      }
      retryable = true;
    } else if (a.http_status == 200) {
      Result<ChatResponse> r = streaming ? std::move(*a.streamed) : ParseOpenAIResponse(a.body);
      if (!r.ok()) {
        if (streaming && !a.delivered && r.status().code() == StatusCode::kDataLoss) {
          last = r.status().WithContext(who);
          retryable = true;  // truncated before anything was shown: safe to ask again
        } else {
          return Status(r.status().code(), Scrub(r.status().WithContext(who).message()));
        }
      } else {
        r->attempts = attempt;
        r->latency = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
        return r;
      }
    } else {
      std::string excerpt = Scrub(OneLine(a.body, kExcerptChars));
      std::string msg = fmt::format("{}: HTTP {} on attempt {} of {}: {}", who, a.http_status, attempt, max_attempts,
                                    excerpt.empty() ? "(empty body)" : excerpt);
      switch (a.http_status) {
        case 400:
          return Status::InvalidArgument(std::move(msg));
        case 401:
          return Status::Unauthenticated(std::move(msg));
        case 403:
          return Status::PermissionDenied(std::move(msg));
        case 404:
          return Status::NotFound(msg + " (is base_url right? it must end in /v1)");
        default:
          break;
      }
      if (a.http_status == 429) {
        last = Status::ResourceExhausted(std::move(msg));
        retryable = true;
      } else if (a.http_status >= 500) {
        last = Status::Unavailable(std::move(msg));
        retryable = true;
      } else {
        return Status::Unavailable(std::move(msg));
      }
    }
    if (!retryable || attempt == max_attempts) break;
    std::chrono::milliseconds wait;
    if (a.retry_after) {
      wait = std::min<std::chrono::milliseconds>(*a.retry_after, options_.max_retry_after);
    } else {
      wait = options_.initial_backoff * (1LL << std::min<uint32_t>(attempt - 1, 20));
      wait = std::min(wait, options_.max_backoff);
    }
    logger_.Warning("{}; retrying in {} ms", last.message(), wait.count());
    options_.sleep(wait);
  }
  return last;
}

}  // namespace temper
