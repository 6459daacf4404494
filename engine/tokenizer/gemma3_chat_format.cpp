#include "engine/tokenizer/gemma3_chat_format.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include <fmt/format.h>

namespace temper::engine {
namespace {

using json = nlohmann::json;

constexpr std::string_view kWhitespace = " \t\n\r\f\v";

std::string_view TrimRight(std::string_view s) {
  const size_t end = s.find_last_not_of(kWhitespace);
  return end == std::string_view::npos ? std::string_view() : s.substr(0, end + 1);
}

std::string_view Trim(std::string_view s) {
  s = TrimRight(s);
  const size_t begin = s.find_first_not_of(kWhitespace);
  return begin == std::string_view::npos ? std::string_view() : s.substr(begin);
}

// What the first user turn says about the tools, before their declarations. It names the two
// shapes ParseReplyText reads as calls, so the model sees them spelled out even without a grammar.
constexpr std::string_view kToolInstruction =
    "You can call the functions declared below. To call one, answer with exactly one JSON object and nothing "
    "else: {\"name\": <the function's name>, \"arguments\": {<its arguments>}}. To call several at once, answer "
    "with a JSON array of such objects. The results come back in the next user turn, as JSON.\n"
    "Functions:\n";

// Compact JSON; bytes that are not UTF-8 (a tool's raw output) become U+FFFD rather than throwing.
std::string Dump(const json& v) { return v.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string ToolsJson(const std::vector<ToolDeclaration>& tools) {
  std::string out = "[";
  for (size_t i = 0; i < tools.size(); ++i) {
    if (i > 0) out += ",";
    out += "{\"name\":" + Dump(tools[i].name);
    if (!tools[i].description.empty()) out += ",\"description\":" + Dump(tools[i].description);
    if (!tools[i].parameters.is_null()) out += ",\"parameters\":" + Dump(tools[i].parameters);
    out += "}";
  }
  return out + "]";
}

// One object, or an array when there are several: the shapes a reply calls in.
template <typename T, typename Fn>
std::string ObjectOrArray(const std::vector<T>& items, Fn one) {
  if (items.size() == 1) return one(items[0]);
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ",";
    out += one(items[i]);
  }
  return out + "]";
}

std::string CallsJson(const std::vector<ToolCall>& calls) {
  return ObjectOrArray(calls, [](const ToolCall& c) {
    return "{\"name\":" + Dump(c.name) + ",\"arguments\":" + Dump(c.arguments) + "}";
  });
}

std::string ResultsJson(const std::vector<ToolResponse>& responses) {
  return ObjectOrArray(responses, [](const ToolResponse& r) {
    return "{\"name\":" + Dump(r.name) + ",\"response\":" + Dump(r.response) + "}";
  });
}

// A reply nested deeper than this is text: nothing a tool takes is that deep, and it bounds the
// parser's work on whatever a model writes.
constexpr int kMaxReplyDepth = 64;

// The deepest nesting of brackets outside JSON strings (an upper bound where the text is not JSON).
int Nesting(std::string_view s) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      deepest = std::max(deepest, ++depth);
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return deepest;
}

// {"name": NAME, "arguments": {...}} and nothing else, NAME a well-formed function name.
std::optional<ToolCall> CallIn(const json& j) {
  if (!j.is_object() || j.size() != 2) return std::nullopt;
  const auto name = j.find("name");
  const auto arguments = j.find("arguments");
  if (name == j.end() || arguments == j.end() || !name->is_string() || !arguments->is_object()) return std::nullopt;
  if (!CheckToolName(name->get_ref<const std::string&>(), "name").ok()) return std::nullopt;
  return ToolCall{name->get<std::string>(), *arguments};
}

std::optional<std::vector<ToolCall>> CallsIn(const json& j) {
  if (std::optional<ToolCall> one = CallIn(j)) return std::vector<ToolCall>{std::move(*one)};
  if (!j.is_array() || j.empty()) return std::nullopt;
  std::vector<ToolCall> calls;
  for (const json& item : j) {
    std::optional<ToolCall> call = CallIn(item);
    if (!call) return std::nullopt;
    calls.push_back(std::move(*call));
  }
  return calls;
}

enum class Side { kUser, kModel };

// A turn to render: its parts are joined with "\n\n" (see the header's first difference).
struct Turn {
  Side side;
  std::vector<std::string> parts;
};

}  // namespace

Result<std::unique_ptr<Gemma3ChatFormat>> Gemma3ChatFormat::Create(const Tokenizer& tokenizer) {
  std::unique_ptr<Gemma3ChatFormat> format(new Gemma3ChatFormat(tokenizer));
  TEMPER_RETURN_IF_ERROR(LookUpControlTokens(tokenizer, format->kTokenText, "Gemma 3", format->ids_));
  return format;
}

std::vector<int32_t> Gemma3ChatFormat::stop_ids() const { return {ids_[kTurnClose], ids_[kEos]}; }

Result<RenderedPrompt> Gemma3ChatFormat::Render(const Conversation& c) const {
  if (c.enable_thinking) return Status::InvalidArgument("enable_thinking: Gemma 3's chat format has no thinking mode");
  for (size_t i = 0; i < c.tools.size(); ++i) {
    const std::string field = fmt::format("tools[{}]", i);
    TEMPER_RETURN_IF_ERROR(CheckToolName(c.tools[i].name, field));
    if (!c.tools[i].parameters.is_null() && !c.tools[i].parameters.is_object()) {
      return Status::InvalidArgument(fmt::format("{}.parameters: expected a JSON Schema object or null", field));
    }
  }
  for (size_t i = 0; i < c.messages.size(); ++i) {
    const ChatMessage& m = c.messages[i];
    const std::string field = fmt::format("messages[{}]", i);
    if (m.role == ChatRole::kSystem && i > 0) {
      return Status::InvalidArgument(fmt::format(
          "{} (system): only the first message may be a system message (Gemma 3 has no system turn)", field));
    }
    if (m.role != ChatRole::kModel && (!m.tool_calls.empty() || !m.tool_responses.empty() || !m.thinking.empty())) {
      return Status::InvalidArgument(
          fmt::format("{} ({}): tool calls, tool responses and thinking belong to model "
                      "messages",
                      field, m.role == ChatRole::kSystem ? "system" : "user"));
    }
    for (size_t j = 0; j < m.tool_calls.size(); ++j) {
      const std::string call = fmt::format("{}.tool_calls[{}]", field, j);
      TEMPER_RETURN_IF_ERROR(CheckToolName(m.tool_calls[j].name, call));
      if (!m.tool_calls[j].arguments.is_object()) {
        return Status::InvalidArgument(fmt::format("{}: arguments must be a JSON object", call));
      }
    }
    for (size_t j = 0; j < m.tool_responses.size(); ++j) {
      TEMPER_RETURN_IF_ERROR(CheckToolName(m.tool_responses[j].name, fmt::format("{}.tool_responses[{}]", field, j)));
    }
  }

  // The template's first_user_prefix: the system message, verbatim, then "\n\n"; the tools' preamble
  // is written as if it ended the system message.
  std::string prefix;
  size_t start = 0;
  if (!c.messages.empty() && c.messages[0].role == ChatRole::kSystem) {
    prefix = c.messages[0].content + "\n\n";
    start = 1;
  }
  if (!c.tools.empty()) prefix += std::string(kToolInstruction) + ToolsJson(c.tools) + "\n\n";
  const bool has_prefix = start == 1 || !c.tools.empty();

  std::vector<Turn> turns;
  auto add = [&turns](Side side, std::string_view part) {
    if (turns.empty() || turns.back().side != side) turns.push_back(Turn{side, {}});
    if (!part.empty()) turns.back().parts.emplace_back(part);
  };
  for (size_t i = start; i < c.messages.size(); ++i) {
    const ChatMessage& m = c.messages[i];
    if (m.role != ChatRole::kModel) {
      add(Side::kUser, Trim(m.content));
      continue;
    }
    // As in Gemma 4's format: the calls, their results, then what the model said after them.
    if (!m.tool_calls.empty()) add(Side::kModel, CallsJson(m.tool_calls));
    if (!m.tool_responses.empty()) add(Side::kUser, ResultsJson(m.tool_responses));
    const std::string_view content = Trim(m.content);
    if ((m.tool_calls.empty() && m.tool_responses.empty()) || !content.empty()) add(Side::kModel, content);
  }
  if (has_prefix && (turns.empty() || turns.front().side != Side::kUser))
    turns.insert(turns.begin(), Turn{Side::kUser, {}});

  // Control tokens go in by id; the text between them is encoded with special-token matching off.
  RenderedPrompt prompt;
  std::string pending;
  auto flush = [&] {
    if (pending.empty()) return;
    const std::vector<int32_t> ids = tokenizer_->Encode(pending, EncodeOptions{.match_special_tokens = false});
    prompt.ids.insert(prompt.ids.end(), ids.begin(), ids.end());
    pending.clear();
  };
  auto control = [&](Token t) {
    flush();
    prompt.ids.push_back(ids_[t]);
    prompt.text += kTokenText[t];
  };
  auto text = [&](std::string_view s) {
    pending += s;
    prompt.text += s;
  };
  control(kBos);
  for (size_t i = 0; i < turns.size(); ++i) {
    control(kTurnOpen);
    text(turns[i].side == Side::kUser ? "user\n" : "model\n");
    if (i == 0 && has_prefix) text(prefix);
    for (size_t p = 0; p < turns[i].parts.size(); ++p) {
      if (p > 0) text("\n\n");
      text(turns[i].parts[p]);
    }
    control(kTurnClose);
    text("\n");
    flush();
    prompt.message_ends.push_back(static_cast<int64_t>(prompt.ids.size()));
  }
  if (c.add_generation_prompt) {
    control(kTurnOpen);
    text("model\n");
  }
  flush();
  return prompt;
}

Result<ModelReply> Gemma3ChatFormat::ParseReplyText(std::string_view text) const {
  std::string_view s = TrimRight(text);
  for (const Token stop : {kTurnClose, kEos}) {
    if (s.ends_with(kTokenText[stop])) {
      s.remove_suffix(std::string_view(kTokenText[stop]).size());
      break;
    }
  }
  s = Trim(s);
  ModelReply reply;
  if (!s.empty() && (s.front() == '{' || s.front() == '[') && Nesting(s) <= kMaxReplyDepth) {
    const json j = json::parse(s, nullptr, /*allow_exceptions=*/false);
    if (!j.is_discarded()) {
      if (std::optional<std::vector<ToolCall>> calls = CallsIn(j)) {
        reply.tool_calls = std::move(*calls);
        return reply;
      }
    }
  }
  reply.content = std::string(s);
  return reply;
}

}  // namespace temper::engine
