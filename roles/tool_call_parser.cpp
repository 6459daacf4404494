#include "roles/tool_call_parser.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/display_text.h"

namespace temper {

using nlohmann::json;

namespace {

constexpr size_t kMaxDepth = 64;  // deeper nesting is not a tool call a model means to make
constexpr size_t kExcerpt = 120;

// The text from `from` on, on one line and cut at a character boundary (a cut inside a UTF-8
// character would make the message unencodable as JSON).
std::string Excerpt(std::string_view text, size_t from) { return OneLine(std::string(text.substr(from)), kExcerpt); }

std::string Trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(b, e - b + 1));
}

// The index one past the bracket closing the one at `start`, honouring JSON strings; npos when the
// text ends first (truncated) or nesting passes kMaxDepth (then *too_deep is set).
size_t BalancedEnd(std::string_view text, size_t start, bool* too_deep) {
  std::vector<char> stack;
  bool in_string = false;
  for (size_t i = start; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (stack.size() == kMaxDepth) {
        *too_deep = true;
        return std::string_view::npos;
      }
      stack.push_back(c == '{' ? '}' : ']');
    } else if (c == '}' || c == ']') {
      if (stack.empty() || stack.back() != c) return i + 1;  // mismatched: let the JSON parser say so
      stack.pop_back();
      if (stack.empty()) return i + 1;
    }
  }
  return std::string_view::npos;
}

bool LooksLikeCall(std::string_view s) {
  for (std::string_view key : {"name", "tool", "arguments", "function", "tool_calls"}) {
    for (char q : {'"', '\''}) {
      std::string quoted = std::string(1, q) + std::string(key) + q;
      if (s.find(quoted) != std::string_view::npos) return true;
    }
  }
  return false;
}

const json* FindAny(const json& o, std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    auto it = o.find(k);
    if (it != o.end()) return &*it;
  }
  return nullptr;
}

// Appends the calls `v` holds; false when `v` is not call-shaped (then nothing is appended).
bool CollectCalls(const json& v, std::vector<ToolCall>* out) {
  if (v.is_array()) {
    if (v.empty()) return false;
    std::vector<ToolCall> calls;
    for (const json& e : v) {
      if (!CollectCalls(e, &calls)) return false;
    }
    out->insert(out->end(), calls.begin(), calls.end());
    return true;
  }
  if (!v.is_object()) return false;
  if (auto it = v.find("tool_calls"); it != v.end()) return CollectCalls(*it, out);
  if (auto fn = v.find("function"); fn != v.end() && fn->is_object()) return CollectCalls(*fn, out);
  const json* name = FindAny(v, {"name", "tool", "tool_name", "function"});
  if (name == nullptr || !name->is_string()) return false;
  const json* args = FindAny(v, {"arguments", "parameters", "args", "input"});
  if (args == nullptr && v.size() != 1) return false;
  ToolCall call;
  call.name = name->get<std::string>();
  if (args == nullptr) call.arguments = "{}";
  else if (args->is_string()) call.arguments = args->get<std::string>();
  else call.arguments = args->dump();
  out->push_back(std::move(call));
  return true;
}

// Removes `open`…`close` spans; an unclosed `open` runs to the end.
void StripSpans(std::string* text, std::string_view open, std::string_view close) {
  for (size_t pos = text->find(open); pos != std::string::npos; pos = text->find(open, pos)) {
    size_t end = text->find(close, pos + open.size());
    text->erase(pos, end == std::string::npos ? std::string::npos : end + close.size() - pos);
  }
}

std::string CleanProse(std::string text) {
  for (std::string_view tag : {"<tool_call>", "</tool_call>"}) {
    for (size_t p = text.find(tag); p != std::string::npos; p = text.find(tag, p)) text.erase(p, tag.size());
  }
  // Drop fence lines left empty by the removed call (```json, ```).
  std::string out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t nl = text.find('\n', start);
    std::string_view line =
        std::string_view(text).substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    std::string t = Trim(line);
    if (!(t.rfind("```", 0) == 0 && t.find(' ') == std::string::npos)) {
      out.append(line);
      out.push_back('\n');
    }
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  return Trim(out);
}

// Why `candidate` does not parse, in the parser's words (cause and byte position). The exception
// stays inside this function; it is the only way nlohmann exposes the message.
std::string ParserMessage(std::string_view candidate) {
  try {
    json unused = json::parse(candidate);
    (void)unused;
  } catch (const json::exception& e) {
    return e.what();
  }
  return "syntax error";
}

Status MalformedCall(std::string_view text, size_t at, std::string_view why) {
  return Status::InvalidArgument(
      fmt::format("the tool call starting at character {} is not valid JSON ({}): {}. Write each call as one "
                  "JSON object: {{\"name\": \"<tool>\", \"arguments\": {{...}}}}",
                  at, why, Excerpt(text, at)));
}

}  // namespace

std::string StripThinking(std::string_view input) {
  std::string text(input);
  // A template that opens the thought in the prompt leaves only its closing tag in the answer.
  for (auto [open, close] :
       {std::pair<std::string_view, std::string_view>{"<think>", "</think>"}, {"<thinking>", "</thinking>"}}) {
    size_t c = text.find(close);
    size_t o = text.find(open);
    if (c != std::string::npos && (o == std::string::npos || o > c)) text.erase(0, c + close.size());
    StripSpans(&text, open, close);
  }
  StripSpans(&text, "<|channel>thought", "<channel|>");
  return text;
}

Result<TextToolCalls> ExtractToolCallsFromText(std::string_view input) {
  const std::string text = StripThinking(input);
  TextToolCalls result;
  std::string prose;
  size_t copied = 0;
  Status first_error;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '{' && text[i] != '[') continue;
    bool too_deep = false;
    size_t end = BalancedEnd(text, i, &too_deep);
    if (end == std::string::npos) {
      std::string_view rest = std::string_view(text).substr(i);
      if (LooksLikeCall(rest) && first_error.ok()) {
        first_error = MalformedCall(
            text, i, too_deep ? "nested too deeply" : "it ends before its closing bracket; was the answer cut off?");
      }
      break;  // everything after lies inside this unclosed bracket
    }
    std::string_view candidate = std::string_view(text).substr(i, end - i);
    json v = json::parse(candidate, nullptr, /*allow_exceptions=*/false);
    if (v.is_discarded()) {
      if (LooksLikeCall(candidate) && first_error.ok()) {
        // Re-parse with exceptions only to obtain the parser's message (byte position and cause).
        first_error = MalformedCall(text, i, ParserMessage(candidate));
      }
      i = end - 1;
      continue;
    }
    if (CollectCalls(v, &result.calls)) {
      prose.append(text, copied, i - copied);
      copied = end;
    }
    i = end - 1;
  }
  if (result.calls.empty() && !first_error.ok()) return first_error;
  prose.append(text, copied, std::string::npos);
  result.prose = CleanProse(std::move(prose));
  for (size_t k = 0; k < result.calls.size(); ++k) result.calls[k].id = fmt::format("text-{}", k + 1);
  if (!first_error.ok()) {
    // Some calls parsed and one did not: running the others would be a silent partial no-op.
    return first_error;
  }
  return result;
}

Result<std::string> ExtractJsonObject(std::string_view input) {
  const std::string text = StripThinking(input);
  Status first_error;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '{') continue;
    bool too_deep = false;
    size_t end = BalancedEnd(text, i, &too_deep);
    if (end == std::string::npos) {
      return Status::InvalidArgument(
          fmt::format("the JSON object starting at character {} {}: {}", i,
                      too_deep ? "is nested too deeply" : "never closes (was the answer cut off?)", Excerpt(text, i)));
    }
    std::string_view candidate = std::string_view(text).substr(i, end - i);
    json v = json::parse(candidate, nullptr, /*allow_exceptions=*/false);
    if (!v.is_discarded() && v.is_object()) return v.dump();
    if (first_error.ok()) {
      first_error =
          Status::InvalidArgument(fmt::format("the JSON object starting at character {} is not valid JSON ({}): {}", i,
                                              ParserMessage(candidate), Excerpt(text, i)));
    }
    i = end - 1;
  }
  if (!first_error.ok()) return first_error;
  return Status::InvalidArgument(fmt::format("the answer holds no JSON object; it begins: {}", Excerpt(text, 0)));
}

}  // namespace temper
