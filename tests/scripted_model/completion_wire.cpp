#include "scripted_model/completion_wire.h"

#include <algorithm>
#include <ctime>

namespace temper::scripted {

using nlohmann::json;

namespace {

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }
std::string DumpOrdered(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

uint64_t Tokens(size_t bytes) { return (bytes + kBytesPerToken - 1) / kBytesPerToken; }

// `text` in pieces of at most `max` bytes, never splitting a UTF-8 character.
std::vector<std::string_view> Pieces(std::string_view text, size_t max) {
  std::vector<std::string_view> out;
  while (!text.empty()) {
    size_t n = std::min(max, text.size());
    while (n < text.size() && n > 1 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
    out.push_back(text.substr(0, n));
    text.remove_prefix(n);
  }
  return out;
}

json Chunk(const std::string& id, const std::string& model, json choices) {
  return {{"id", id},
          {"object", "chat.completion.chunk"},
          {"created", static_cast<int64_t>(std::time(nullptr))},
          {"model", model},
          {"choices", std::move(choices)}};
}

json Delta(json delta, const json& finish_reason = nullptr) {
  return json::array({{{"index", 0}, {"delta", std::move(delta)}, {"finish_reason", finish_reason}}});
}

std::string Event(const json& chunk) { return "data: " + Dump(chunk) + "\n\n"; }

json UsageJson(Usage u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

}  // namespace

std::string AnswerText(const ScriptedAnswer& answer) {
  std::string text = answer.content;
  for (const ScriptedCall& c : answer.tool_calls) text += c.name + DumpOrdered(c.arguments);
  return text;
}

Usage EstimateUsage(size_t prompt_bytes, const ScriptedAnswer& answer) {
  return {Tokens(prompt_bytes), Tokens(AnswerText(answer).size())};
}

json AssistantMessage(const ScriptedAnswer& answer) {
  json message = {{"role", "assistant"}, {"content", answer.content.empty() ? json(nullptr) : json(answer.content)}};
  if (!answer.tool_calls.empty()) {
    json calls = json::array();
    for (const ScriptedCall& c : answer.tool_calls) {
      calls.push_back({{"id", c.id},
                       {"type", "function"},
                       {"function", {{"name", c.name}, {"arguments", DumpOrdered(c.arguments)}}}});
    }
    message["tool_calls"] = std::move(calls);
  }
  return message;
}

std::string CompletionBody(const ScriptedAnswer& answer, const std::string& id, const std::string& model, Usage usage) {
  return Dump(
      {{"id", id},
       {"object", "chat.completion"},
       {"created", static_cast<int64_t>(std::time(nullptr))},
       {"model", model},
       {"choices",
        json::array({{{"index", 0}, {"message", AssistantMessage(answer)}, {"finish_reason", answer.finish_reason}}})},
       {"usage", UsageJson(usage)}});
}

std::vector<StreamEvent> CompletionEvents(const ScriptedAnswer& answer, const std::string& id, const std::string& model,
                                          Usage usage, bool include_usage, size_t piece_bytes) {
  if (piece_bytes < 4) piece_bytes = 4;  // room for any one UTF-8 character
  std::vector<StreamEvent> events;
  size_t answer_bytes = 0;  // of the answer, as EstimateUsage counts them, sent so far
  auto add = [&](const json& chunk, size_t bytes) {
    answer_bytes += bytes;
    events.push_back({Event(chunk), std::min(Tokens(answer_bytes), usage.completion_tokens)});
  };
  add(Chunk(id, model, Delta({{"role", "assistant"}, {"content", ""}})), 0);
  for (std::string_view piece : Pieces(answer.content, piece_bytes)) {
    add(Chunk(id, model, Delta({{"content", piece}})), piece.size());
  }
  for (size_t i = 0; i < answer.tool_calls.size(); ++i) {
    const ScriptedCall& c = answer.tool_calls[i];
    add(Chunk(id, model,
              Delta({{"tool_calls", json::array({{{"index", i},
                                                  {"id", c.id},
                                                  {"type", "function"},
                                                  {"function", {{"name", c.name}, {"arguments", ""}}}}})}})),
        c.name.size());
    const std::string args = DumpOrdered(c.arguments);
    for (std::string_view piece : Pieces(args, piece_bytes)) {
      add(Chunk(id, model,
                Delta({{"tool_calls", json::array({{{"index", i}, {"function", {{"arguments", piece}}}}})}})),
          piece.size());
    }
  }
  events.push_back({Event(Chunk(id, model, Delta(json::object(), answer.finish_reason))), usage.completion_tokens});
  if (include_usage) {
    json last = Chunk(id, model, json::array());
    last["usage"] = UsageJson(usage);
    events.push_back({Event(last), usage.completion_tokens});
  }
  events.push_back({"data: [DONE]\n\n", usage.completion_tokens});
  return events;
}

std::string ErrorBody(std::string_view message, std::string_view type) {
  return Dump({{"error", {{"message", message}, {"type", type}}}});
}

}  // namespace temper::scripted
