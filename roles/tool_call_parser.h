// Tool calls from model text, for models and servers that do not return OpenAI `tool_calls`: the
// call is somewhere in the answer, in one of the shapes real models write:
//   - a bare JSON object {"name": ..., "arguments": {...}} (also "tool"/"parameters" spellings,
//     the OpenAI {"type":"function","function":{...}} shape, {"tool_calls":[...]} and arrays);
//   - inside ```json / ```tool_call fences, or <tool_call>...</tool_call> tags;
//   - surrounded by prose, preceded by thinking (<think>…</think>, <thinking>…</thinking>, or
//     Gemma's thought channel), followed by trailing commentary; several calls in one answer.
// Gemma 4's native tool-call tokens are decoded by engine/chat_format on the in-process path; this
// is the text-level fallback for everything else.
//
// Contract: never throws, never crashes on any input (fuzzed: tests/fuzz/tool_call_parser_fuzz).
// Returns the calls found, in order, with `arguments` as compact JSON text; zero calls when the text
// holds no attempt at one; InvalidArgument with a message written for the model (what is wrong and
// where, with an excerpt) when something looks like a call but is not valid JSON — e.g. truncated.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "roles/model_client.h"

namespace temper {

struct TextToolCalls {
  std::vector<ToolCall> calls;  // ids are "text-1", "text-2", ...
  std::string prose;            // the text with thinking and the calls removed, trimmed
};

Result<TextToolCalls> ExtractToolCallsFromText(std::string_view text);

// Removes thinking: <think>…</think>, <thinking>…</thinking>, <|channel>thought…<channel|>, and an
// unterminated opening tag up to the end (a model cut off mid-thought).
std::string StripThinking(std::string_view text);

// The first balanced top-level JSON object in `text` (outside fences, prose and thinking), for role
// answers that are a JSON object rather than a tool call. Errors as above.
Result<std::string> ExtractJsonObject(std::string_view text);

}  // namespace temper
