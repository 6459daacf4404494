#include "engine/serve/openai_conversation.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace temper::engine {

namespace {

using nlohmann::json;

// The text of `object`'s `key`: "" when absent or null, the string itself, or for any other type its
// JSON text (which never equals a name the caller looks for, and shows in the error what was sent).
// nlohmann's value(key, "") would throw on a non-string instead.
std::string TextOf(const json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

// A message's `content`: a string, null, or an array of text parts.
std::optional<ParamError> ReadContent(const json& message, const std::string& field, std::string& out) {
  auto c = message.find("content");
  if (c == message.end() || c->is_null()) return std::nullopt;
  if (c->is_string()) {
    out = c->get<std::string>();
    return std::nullopt;
  }
  if (c->is_array()) {
    for (size_t i = 0; i < c->size(); ++i) {
      const json& part = (*c)[i];
      if (!part.is_object() || TextOf(part, "type") != "text" || !part.contains("text") ||
          !part["text"].is_string()) {
        return ParamError{fmt::format("{}.content[{}]", field, i),
                          fmt::format("'{}.content[{}]' must be a text part "
                                      "({{\"type\": \"text\", \"text\": ...}}); this model reads text only",
                                      field, i)};
      }
      out += part["text"].get<std::string>();
    }
    return std::nullopt;
  }
  return ParamError{field + ".content",
                    fmt::format("'{}.content' must be a string, an array of text parts or null", field)};
}

}  // namespace

std::optional<ParamError> ReadConversation(const json& body, Conversation& conv, RequestedToolChoice& choice) {
  auto messages = body.find("messages");
  if (messages == body.end() || !messages->is_array() || messages->empty()) {
    return ParamError{"messages", "'messages' is required and must be a non-empty array"};
  }
  std::map<std::string, std::string> call_names;  // tool_call_id -> function name
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& m = (*messages)[i];
    const std::string field = fmt::format("messages[{}]", i);
    if (!m.is_object()) return ParamError{field, fmt::format("'{}' must be an object", field)};
    const std::string role = TextOf(m, "role");
    ChatMessage msg;
    if (auto e = ReadContent(m, field, msg.content)) return e;
    if (role == "system" || role == "developer") {
      msg.role = ChatRole::kSystem;
      if (i != 0) return ParamError{field + ".role", fmt::format("'{}': a system message must come first", field)};
    } else if (role == "user") {
      msg.role = ChatRole::kUser;
    } else if (role == "assistant") {
      msg.role = ChatRole::kModel;
      if (auto r = m.find("reasoning_content"); r != m.end() && r->is_string()) msg.thinking = r->get<std::string>();
      if (auto calls = m.find("tool_calls"); calls != m.end() && !calls->is_null()) {
        if (!calls->is_array())
          return ParamError{field + ".tool_calls", fmt::format("'{}.tool_calls' must be an array", field)};
        for (size_t j = 0; j < calls->size(); ++j) {
          const json& c = (*calls)[j];
          const std::string cf = fmt::format("{}.tool_calls[{}]", field, j);
          if (!c.is_object() || !c.contains("function") || !c["function"].is_object() ||
              !c["function"].contains("name") || !c["function"]["name"].is_string()) {
            return ParamError{
                cf, fmt::format(
                        "'{}' must be {{\"type\": \"function\", \"function\": {{\"name\": ..., \"arguments\": ...}}}}",
                        cf)};
          }
          ToolCall call;
          call.name = c["function"]["name"].get<std::string>();
          const json& args = c["function"].value("arguments", json("{}"));
          if (args.is_string()) {
            call.arguments = json::parse(args.get<std::string>(), nullptr, false);
            if (call.arguments.is_discarded() || !call.arguments.is_object()) {
              return ParamError{cf + ".function.arguments",
                                fmt::format("'{}.function.arguments' must be a JSON object encoded as a string", cf)};
            }
          } else if (args.is_object()) {
            call.arguments = args;
          } else {
            return ParamError{cf + ".function.arguments",
                              fmt::format("'{}.function.arguments' must be a JSON object encoded as a string", cf)};
          }
          if (c.contains("id") && c["id"].is_string()) call_names[c["id"].get<std::string>()] = call.name;
          msg.tool_calls.push_back(std::move(call));
        }
      }
    } else if (role == "tool") {
      // A tool result belongs to the model turn that called it (Gemma renders it there).
      if (conv.messages.empty() || conv.messages.back().role != ChatRole::kModel ||
          conv.messages.back().tool_calls.empty()) {
        return ParamError{field,
                          fmt::format("'{}': a tool message must follow an assistant message with tool_calls", field)};
      }
      ChatMessage& caller = conv.messages.back();
      ToolResponse response;
      const std::string id = TextOf(m, "tool_call_id");
      if (auto it = call_names.find(id); it != call_names.end()) {
        response.name = it->second;
      } else if (m.contains("name") && m["name"].is_string()) {
        response.name = m["name"].get<std::string>();
      } else {
        return ParamError{
            field + ".tool_call_id",
            fmt::format("'{}.tool_call_id' '{}' names no tool call of the assistant message before it", field, id)};
      }
      json parsed = json::parse(msg.content, nullptr, false);
      response.response = !parsed.is_discarded() && parsed.is_object() ? parsed : json(msg.content);
      caller.tool_responses.push_back(std::move(response));
      continue;
    } else {
      return ParamError{
          field + ".role",
          fmt::format("'{}.role' must be system, developer, user, assistant or tool, got '{}'", field, role)};
    }
    conv.messages.push_back(std::move(msg));
  }

  bool tools_allowed = true;
  choice = RequestedToolChoice{};
  if (auto tc = body.find("tool_choice"); tc != body.end() && !tc->is_null()) {
    if (*tc == "none") {
      tools_allowed = false;
    } else if (*tc == "required") {
      choice.required = true;
    } else if (tc->is_object() && TextOf(*tc, "type") == "function" && tc->contains("function") &&
               (*tc)["function"].is_object() && (*tc)["function"].contains("name") &&
               (*tc)["function"]["name"].is_string()) {
      choice.required = true;
      choice.function = (*tc)["function"]["name"].get<std::string>();
    } else if (*tc != "auto") {
      return ParamError{"tool_choice",
                        fmt::format("'tool_choice' must be \"auto\", \"none\", \"required\" or {{\"type\": "
                                    "\"function\", \"function\": {{\"name\": ...}}}}, got {}",
                                    tc->dump())};
    }
  }
  if (auto tools = body.find("tools"); tools != body.end() && !tools->is_null()) {
    if (!tools->is_array()) return ParamError{"tools", "'tools' must be an array"};
    for (size_t i = 0; i < tools->size(); ++i) {
      const json& t = (*tools)[i];
      const std::string field = fmt::format("tools[{}]", i);
      if (!t.is_object() || TextOf(t, "type") != "function" || !t.contains("function") ||
          !t["function"].is_object() || !t["function"].contains("name") || !t["function"]["name"].is_string()) {
        return ParamError{
            field, fmt::format("'{}' must be {{\"type\": \"function\", \"function\": {{\"name\": ..., ...}}}}", field)};
      }
      const json& f = t["function"];
      ToolDeclaration d;
      d.name = f["name"].get<std::string>();
      if (auto desc = f.find("description"); desc != f.end() && desc->is_string())
        d.description = desc->get<std::string>();
      d.parameters = f.value("parameters", json(nullptr));
      if (tools_allowed) conv.tools.push_back(std::move(d));
    }
  }
  if (choice.required && conv.tools.empty()) {
    return ParamError{"tool_choice", "'tool_choice' requires a tool call, but the request offers no tools"};
  }
  if (!choice.function.empty() && std::none_of(conv.tools.begin(), conv.tools.end(),
                                               [&](const ToolDeclaration& t) { return t.name == choice.function; })) {
    return ParamError{
        "tool_choice.function.name",
        fmt::format("'tool_choice.function.name' '{}' is not one of the request's tools", choice.function)};
  }

  return std::nullopt;
}

}  // namespace temper::engine
