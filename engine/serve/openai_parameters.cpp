#include "engine/serve/openai_parameters.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace temper::engine {

namespace {

using nlohmann::json;

bool IsFalse(const json& v) { return v.is_boolean() && !v.get<bool>(); }
bool IsZero(const json& v) { return v.is_number() && v.get<double>() == 0.0; }
bool IsOne(const json& v) { return v.is_number_integer() && v.get<int64_t>() == 1; }
bool IsEmptyObject(const json& v) { return v.is_object() && v.empty(); }
bool IsEmptyString(const json& v) { return v.is_string() && v.get<std::string>().empty(); }
// `user` and `metadata` label a request for the caller's own bookkeeping (abuse monitoring, stored
// completions); they ask nothing of the reply, so any value of their type is neutral.
bool IsString(const json& v) { return v.is_string(); }
bool IsStringMap(const json& v) {
  return v.is_object() && std::all_of(v.begin(), v.end(), [](const json& x) { return x.is_string(); });
}
bool IsDefaultTier(const json& v) { return v == "auto" || v == "default"; }

constexpr OpenAiParameter kChatParameters[] = {
    {"model"},
    {"messages"},
    {"tools"},
    {"tool_choice"},
    {"parallel_tool_calls"},
    {"response_format"},
    {"max_completion_tokens"},
    {"max_tokens"},
    {"temperature"},
    {"top_p"},
    {"top_k"},
    {"min_p"},
    {"seed"},
    {"n"},
    {"stop"},
    {"stop_token_ids"},
    {"stream"},
    {"stream_options"},
    {"logprobs"},
    {"top_logprobs"},
    {"logit_bias", IsEmptyObject, "only {}"},
    {"presence_penalty", IsZero, "only 0"},
    {"frequency_penalty", IsZero, "only 0"},
    {"store", IsFalse, "only false: nothing is stored"},
    {"metadata", IsStringMap, "an object of strings, kept nowhere"},
    {"user", IsString, "a string, kept nowhere"},
    {"service_tier", IsDefaultTier, "only \"auto\" or \"default\""},
};

constexpr OpenAiParameter kCompletionParameters[] = {
    {"model"},
    {"prompt"},
    {"max_tokens"},
    {"temperature"},
    {"top_p"},
    {"top_k"},
    {"min_p"},
    {"seed"},
    {"n"},
    {"stop"},
    {"stop_token_ids"},
    {"stream"},
    {"stream_options"},
    {"logprobs"},
    {"echo", IsFalse, "only false"},
    {"best_of", IsOne, "only 1"},
    {"suffix", IsEmptyString, "only \"\""},
    {"logit_bias", IsEmptyObject, "only {}"},
    {"presence_penalty", IsZero, "only 0"},
    {"frequency_penalty", IsZero, "only 0"},
    {"user", IsString, "a string, kept nowhere"},
};

}  // namespace

std::span<const OpenAiParameter> OpenAiParameters(OpenAiEndpoint endpoint) {
  switch (endpoint) {
    case OpenAiEndpoint::kChatCompletions:
      return kChatParameters;
    case OpenAiEndpoint::kCompletions:
      return kCompletionParameters;
  }
  return {};
}

std::optional<ParamError> CheckOpenAiParameters(OpenAiEndpoint endpoint, const json& body) {
  const std::span<const OpenAiParameter> known = OpenAiParameters(endpoint);
  for (const auto& [name, value] : body.items()) {
    auto p = std::find_if(known.begin(), known.end(), [&](const OpenAiParameter& k) { return k.name == name; });
    if (p == known.end()) {
      std::vector<std::string_view> names;
      for (const OpenAiParameter& k : known) names.push_back(k.name);
      return ParamError{name, fmt::format("'{}' is not supported by this server; it takes: {}", name,
                                          fmt::join(names, ", "))};
    }
    if (p->is_neutral != nullptr && !value.is_null() && !p->is_neutral(value)) {
      return ParamError{name, fmt::format("'{}' is not implemented by this server: it accepts {}, got {}", name,
                                          p->neutral, value.dump())};
    }
  }
  return std::nullopt;
}

}  // namespace temper::engine
