// The OpenAI /v1/chat/completions wire format: requests as JSON, replies (whole or as SSE chunks)
// back into ChatResponse. Kept apart from the HTTP transport so it is tested and fuzzed without a
// socket, and so replay transcripts store requests in the same canonical JSON.
//
// Server replies are untrusted: every field is type-checked and an error names its JSON path
// ("choices[0].message.tool_calls[1].function.name"). Servers differ in small ways, all accepted:
// `content` may be null, thinking text comes as `reasoning_content` (vLLM) or `reasoning`, usage may
// lack `prompt_tokens_details`.
// Thread safety: functions are pure; a StreamAccumulator is used by one thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "roles/model_client.h"

namespace temper {

// The request body. top_k and min_p are sent only when set (vLLM and llama.cpp accept them; strict
// servers reject unknown fields). With `stream`, asks for usage in the final chunk.
nlohmann::json ToOpenAIRequest(const ChatRequest& request, const std::string& model, bool stream);

// A non-streaming reply body.
Result<ChatResponse> ParseOpenAIResponse(std::string_view body);

FinishReason ParseFinishReason(std::string_view name);

// Splits a byte stream into Server-Sent Events and returns each event's data (multi-line data joined
// with '\n'). Comments (":") and other fields (event:, id:, retry:) are ignored. Bytes may arrive
// split anywhere, including inside a CRLF.
class SseDecoder {
 public:
  // Appends the data of every event completed by `bytes` to `events`.
  void Feed(std::string_view bytes, std::vector<std::string>* events);
  // Bytes received but not yet part of a complete event (for error messages on truncation).
  size_t pending_bytes() const { return buffer_.size() + data_.size(); }

 private:
  void Line(std::string_view line, std::vector<std::string>* events);
  std::string buffer_;
  std::string data_;
  bool has_data_ = false;
};

// Folds streamed chat.completion.chunk objects into one ChatResponse.
class StreamAccumulator {
 public:
  // One event's data. "[DONE]" marks the end. Text and reasoning pieces go to `stream`'s callbacks.
  Status Feed(std::string_view data, const StreamCallbacks* stream);
  bool done() const { return done_; }
  // The response so far; an error when the stream ended before [DONE] and before any finish reason
  // (a truncated stream).
  Result<ChatResponse> Finish();

 private:
  Status FeedChunk(const nlohmann::json& chunk, const StreamCallbacks* stream);
  ChatResponse response_;
  bool done_ = false;
  bool finished_ = false;  // a finish_reason arrived
  size_t chunks_ = 0;
};

}  // namespace temper
