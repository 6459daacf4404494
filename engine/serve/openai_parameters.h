// The request parameters of the OpenAI endpoints `temper-lm serve` implements, one table per
// endpoint, so that no parameter is ever silently ignored: each is either implemented (read by the
// endpoint's parser in http_server.cpp) or accepted only at its neutral value, the value that asks
// for nothing (`logit_bias: {}`, a penalty of 0, `n: 1`). Anything else, and a neutral-only
// parameter at any other value, is refused with a 400 naming it. OpenAI's own API refuses unknown
// parameters too ("Unrecognized request argument supplied"), so a client that works against it works
// here or is told why not.
//
// The published OpenAPI document (openapi.json) lists exactly these parameters; a test holds the two
// together.
//
// Thread safety: immutable tables and pure functions.
#pragma once

#include <optional>
#include <span>
#include <string_view>

#include <nlohmann/json.hpp>

#include "engine/serve/openai_conversation.h"

namespace temper::engine {

enum class OpenAiEndpoint { kChatCompletions, kCompletions };

struct OpenAiParameter {
  std::string_view name;
  // Null: implemented. Otherwise the parameter is not implemented, and only the values this accepts
  // (null always is) are taken; `neutral` says which in the refusal ("only false").
  bool (*is_neutral)(const nlohmann::json& value) = nullptr;
  std::string_view neutral;
};

// The parameters `endpoint` takes, in the order the OpenAPI document lists them.
std::span<const OpenAiParameter> OpenAiParameters(OpenAiEndpoint endpoint);

// The first parameter of `body` (an object) that `endpoint` refuses: an unknown one ("'prediction'
// is not supported by this server; it takes: model, messages, ..."), or one it does not implement
// at a value that asks for something ("'presence_penalty' is not implemented by this server: it
// accepts only 0, got 0.5").
std::optional<ParamError> CheckOpenAiParameters(OpenAiEndpoint endpoint, const nlohmann::json& body);

}  // namespace temper::engine
