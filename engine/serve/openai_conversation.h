// The messages and tools of an OpenAI chat completions request body, read into the engine's
// conversation (engine/tokenizer/chat_format.h, whichever format then renders it): system/developer,
// user and assistant messages, assistant tool calls with their arguments, tool results attached to
// the model message that called them, the function tools unless tool_choice is "none", and whether
// a tool call is required.
//
// Used by the HTTP server for /v1/chat/completions and by the benchmarks that replay recorded
// requests, so both see a request exactly as the model would.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/tokenizer/chat_format.h"

namespace temper::engine {

// What is wrong with a request and which OpenAI parameter it is in ("messages[2].tool_calls[0]").
struct ParamError {
  std::string param;
  std::string message;
};

// What `tool_choice` asks for beyond "auto" and "none" (which leaves the tools out).
struct RequestedToolChoice {
  bool required = false;  // "required", or a named function
  std::string function;   // {"type": "function", "function": {"name": ...}}; "" for any tool
};

// Fills `conversation`'s messages and tools and `tool_choice` from `body`; the first problem found,
// naming its field (a tool_choice that names no tool offered, or requires a call without tools).
std::optional<ParamError> ReadConversation(const nlohmann::json& body, Conversation& conversation,
                                           RequestedToolChoice& tool_choice);

}  // namespace temper::engine
