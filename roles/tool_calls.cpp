#include "roles/tool_calls.h"

#include <fmt/format.h>

#include "common/closest_match.h"
#include "common/display_text.h"
#include "roles/tool_call_parser.h"

namespace temper {

using nlohmann::json;

namespace {

std::string TypeName(const json& v) {
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return "null";
}

bool HasType(const json& v, const std::string& type) {
  if (type == "string") return v.is_string();
  if (type == "integer") return v.is_number_integer() || v.is_number_unsigned();
  if (type == "number") return v.is_number();
  if (type == "boolean") return v.is_boolean();
  if (type == "array") return v.is_array();
  if (type == "object") return v.is_object();
  if (type == "null") return v.is_null();
  return true;  // a type this subset does not check
}

}  // namespace

Status ValidateArguments(const ToolDeclaration& tool, const json& arguments) {
  if (!arguments.is_object()) {
    return Status::InvalidArgument(
        fmt::format("{}: the arguments must be a JSON object, not {}", tool.name, TypeName(arguments)));
  }
  const json& schema = tool.parameters;
  const json* props = schema.contains("properties") ? &schema["properties"] : nullptr;
  std::vector<std::string> known;
  if (props && props->is_object()) {
    for (auto it = props->begin(); it != props->end(); ++it) known.push_back(it.key());
  }
  if (schema.contains("required") && schema["required"].is_array()) {
    for (const json& r : schema["required"]) {
      if (r.is_string() && !arguments.contains(r.get<std::string>())) {
        return Status::InvalidArgument(
            fmt::format("{}: missing the required argument '{}'", tool.name, r.get<std::string>()));
      }
    }
  }
  const bool closed = schema.value("additionalProperties", true) == false;
  for (auto it = arguments.begin(); it != arguments.end(); ++it) {
    if (!props || !props->contains(it.key())) {
      if (closed) {
        return Status::InvalidArgument(
            fmt::format("{}: unknown argument '{}'{}; it takes {}", tool.name, it.key(), DidYouMean(it.key(), known),
                        known.empty() ? "none" : fmt::format("'{}'", fmt::join(known, "', '"))));
      }
      continue;
    }
    const json& p = (*props)[it.key()];
    if (p.contains("type") && p["type"].is_string() && !HasType(*it, p["type"].get<std::string>())) {
      return Status::InvalidArgument(
          fmt::format("{}: argument '{}' must be {} {}, not {}", tool.name, it.key(),
                      p["type"] == "integer" || p["type"] == "array" || p["type"] == "object" ? "an" : "a",
                      p["type"].get<std::string>(), TypeName(*it)));
    }
    if (p.contains("enum") && p["enum"].is_array()) {
      bool found = false;
      for (const json& e : p["enum"]) found = found || e == *it;
      if (!found) {
        return Status::InvalidArgument(fmt::format("{}: argument '{}' must be one of {}, not {}", tool.name, it.key(),
                                                   p["enum"].dump(), it->dump()));
      }
    }
  }
  return Status::OK();
}

Result<std::vector<ResolvedCall>> ResolveToolCalls(const ChatResponse& response,
                                                   const std::vector<ToolDeclaration>& tools) {
  std::vector<ToolCall> calls = response.tool_calls;
  if (calls.empty()) {
    TEMPER_ASSIGN_OR_RETURN(TextToolCalls found, ExtractToolCallsFromText(response.text));
    calls = std::move(found.calls);
  }
  std::vector<std::string> names;
  for (const ToolDeclaration& t : tools) names.push_back(t.name);
  std::vector<ResolvedCall> resolved;
  for (size_t i = 0; i < calls.size(); ++i) {
    const ToolCall& c = calls[i];
    const std::string which = calls.size() > 1 ? fmt::format("call {} of {} ('{}')", i + 1, calls.size(), c.name)
                                               : fmt::format("the call to '{}'", c.name);
    const ToolDeclaration* tool = nullptr;
    for (const ToolDeclaration& t : tools) {
      if (t.name == c.name) tool = &t;
    }
    if (tool == nullptr) {
      return Status::InvalidArgument(fmt::format("{}: there is no tool '{}'{}; the tools are {}", which, c.name,
                                                 DidYouMean(c.name, names), fmt::join(names, ", ")));
    }
    json args = c.arguments.empty() ? json::object() : json::parse(c.arguments, nullptr, false);
    if (!args.is_discarded() && args.is_string()) {
      args = json::parse(args.get<std::string>(), nullptr, false);  // double-encoded
    }
    if (args.is_discarded()) {
      return Status::InvalidArgument(
          fmt::format("{}: the arguments are not valid JSON: {}", which, OneLine(c.arguments, 200)));
    }
    Status s = ValidateArguments(*tool, args);
    if (!s.ok()) return Status::InvalidArgument(fmt::format("{}: {}", which, s.message()));
    resolved.push_back({c.id.empty() ? fmt::format("call-{}", i + 1) : c.id, c.name, std::move(args)});
  }
  return resolved;
}

}  // namespace temper
