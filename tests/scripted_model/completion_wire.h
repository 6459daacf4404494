// The scripted model's replies in the OpenAI /v1/chat/completions format: a whole
// `chat.completion` body, or the Server-Sent Events of a stream (`chat.completion.chunk`s: the
// role, the text and each tool call's arguments in pieces, the finish reason, then usage when
// asked for, then `data: [DONE]`), as vLLM sends them.
// Usage is estimated at 4 bytes per token, rounded up: what the loop's token budgets see.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "scripted_model/scripted_answers.h"

namespace temper::scripted {

struct Usage {
  uint64_t prompt_tokens = 0;
  uint64_t completion_tokens = 0;
};

inline constexpr size_t kBytesPerToken = 4;

// The answer's text as usage counts it: the content, then each tool call's name and arguments.
std::string AnswerText(const ScriptedAnswer& answer);

// The prompt's bytes (PromptText's size) and AnswerText's, in tokens rounded up.
Usage EstimateUsage(size_t prompt_bytes, const ScriptedAnswer& answer);

// {"role": "assistant", "content": ..., "tool_calls": [...]}; content is null when empty.
nlohmann::json AssistantMessage(const ScriptedAnswer& answer);

std::string CompletionBody(const ScriptedAnswer& answer, const std::string& id, const std::string& model, Usage usage);

// One whole event ("data: {...}\n\n") and the completion tokens it needs decoded before it can be
// sent: the answer's bytes up to the end of the event counted as usage counts them, so a server
// pacing a stream sends the role first, each piece as its tokens are decoded, and the finish reason,
// usage and [DONE] once the whole answer is.
struct StreamEvent {
  std::string data;
  uint64_t tokens = 0;
};

// Pieces of text and arguments are at most `piece_bytes` long, cut at UTF-8 character boundaries.
std::vector<StreamEvent> CompletionEvents(const ScriptedAnswer& answer, const std::string& id, const std::string& model,
                                          Usage usage, bool include_usage, size_t piece_bytes = 64);

// {"error": {"message": ..., "type": ...}}, the OpenAI error shape.
std::string ErrorBody(std::string_view message, std::string_view type);

}  // namespace temper::scripted
