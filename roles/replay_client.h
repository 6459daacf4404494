// Recorded transcripts: a ReplayClient answers requests from a JSONL file instead of a model, so
// tests and demos of the whole loop are reproducible; a RecordingClient wraps a real client and
// appends every exchange to such a file.
//
// Each line is {"hash", "role", "request", "response"}. `request` is the canonical JSON of the
// request (the OpenAI body with sorted keys, plus the role name; the model name and streaming are
// left out so a transcript replays whichever endpoint recorded it) and `hash` its 64-bit FNV-1a in
// hex. A request asked again gets the next response recorded for it; once those are used up, the
// last one again (the recorded model answered that prompt that way). A request never recorded is
// a NotFound error naming the role, the hash, and excerpts of its first and last messages.
// Thread safety: both clients allow concurrent Chat() calls (a mutex guards the cursor / file).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "roles/model_client.h"

namespace temper {

nlohmann::json CanonicalRequest(const ChatRequest& request);
std::string RequestHash(const ChatRequest& request);  // 16 hex digits

nlohmann::json ResponseToJson(const ChatResponse& response);
// DataLoss naming the field when `j` is not a recorded response.
Result<ChatResponse> ResponseFromJson(const nlohmann::json& j);

class ReplayClient final : public ModelClient {
 public:
  // NotFound when the file is missing; DataLoss naming file:line for a malformed line.
  static Result<std::unique_ptr<ReplayClient>> Open(std::string endpoint_name, const std::string& transcript);

  Result<ChatResponse> Chat(const ChatRequest& request, const StreamCallbacks* stream) override;
  const std::string& endpoint_name() const override { return name_; }
  size_t entries() const { return entries_; }

 private:
  ReplayClient(std::string name, std::string path) : name_(std::move(name)), path_(std::move(path)) {}
  struct Recorded {
    nlohmann::json request;
    std::vector<ChatResponse> responses;
    size_t next = 0;
  };
  const std::string name_;
  const std::string path_;
  size_t entries_ = 0;
  std::mutex mu_;
  std::map<std::string, Recorded> by_hash_;  // guarded by mu_ (the cursors)
};

class RecordingClient final : public ModelClient {
 public:
  // Appends to `transcript` (created if missing). IOError when it cannot be opened.
  static Result<std::unique_ptr<RecordingClient>> Create(std::unique_ptr<ModelClient> inner,
                                                         const std::string& transcript);
  ~RecordingClient() override;

  // Forwards to the inner client; a successful exchange is appended as one line before returning
  // (an append failure is returned as IOError: a recording with holes would replay wrongly).
  Result<ChatResponse> Chat(const ChatRequest& request, const StreamCallbacks* stream) override;
  const std::string& endpoint_name() const override { return inner_->endpoint_name(); }

 private:
  RecordingClient(std::unique_ptr<ModelClient> inner, std::string path, int fd)
      : inner_(std::move(inner)), path_(std::move(path)), fd_(fd) {}
  std::unique_ptr<ModelClient> inner_;
  const std::string path_;
  const int fd_;
  std::mutex mu_;  // one line per write, never interleaved
};

}  // namespace temper
