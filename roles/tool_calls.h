// From a model's answer to calls that can run: the tool calls the server returned (or, when it
// returned none, those written in the text), each matched to a declared tool and its arguments
// checked against the tool's JSON schema.
//
// The schema subset checked is the one our tools use: an object with typed properties (string,
// integer, number, boolean, array, object), `required`, `enum`, and `additionalProperties: false`.
// Every problem becomes one message written for the model, naming the call, the argument and what
// was expected, with a "did you mean" for misspelt tools and arguments. It is fed back so the model
// can correct itself; the caller bounds how many times.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "roles/model_client.h"

namespace temper {

struct ResolvedCall {
  std::string id;
  std::string name;
  nlohmann::json arguments;  // an object that satisfies the tool's schema
};

// InvalidArgument naming the first problem: a wrong type, a missing required argument, an unknown
// argument, a value outside an enum.
Status ValidateArguments(const ToolDeclaration& tool, const nlohmann::json& arguments);

// Resolves every call in `response`. `arguments` may be JSON text or JSON text encoded again as a
// string (some models double-encode). Zero calls is not an error here (the caller decides what a
// turn without a call means). Errors: InvalidArgument with the message for the model.
Result<std::vector<ResolvedCall>> ResolveToolCalls(const ChatResponse& response,
                                                   const std::vector<ToolDeclaration>& tools);

}  // namespace temper
