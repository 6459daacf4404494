#include "roles/openai_wire.h"

#include <fmt/format.h>

#include "common/display_text.h"

namespace temper {

using nlohmann::json;

namespace {

Status Malformed(std::string_view path, std::string_view problem) {
  return Status::DataLoss(fmt::format("malformed chat completion: {} {}", path, problem));
}

// Reads an optional string field; null and absent both give "".
Status OptionalString(const json& object, const char* key, std::string_view path, std::string* out) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return Status::OK();
  if (!it->is_string()) return Malformed(fmt::format("{}.{}", path, key), "is not a string");
  *out = it->get<std::string>();
  return Status::OK();
}

Status OptionalCount(const json& object, const char* key, std::string_view path, uint64_t* out) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return Status::OK();
  if (!it->is_number_unsigned() && !(it->is_number_integer() && it->get<int64_t>() >= 0)) {
    return Malformed(fmt::format("{}.{}", path, key), "is not a non-negative integer");
  }
  *out = it->get<uint64_t>();
  return Status::OK();
}

Status ParseUsage(const json& root, TokenUsage* usage) {
  auto it = root.find("usage");
  if (it == root.end() || it->is_null()) return Status::OK();
  if (!it->is_object()) return Malformed("usage", "is not an object");
  TEMPER_RETURN_IF_ERROR(OptionalCount(*it, "prompt_tokens", "usage", &usage->prompt_tokens));
  TEMPER_RETURN_IF_ERROR(OptionalCount(*it, "completion_tokens", "usage", &usage->completion_tokens));
  auto details = it->find("prompt_tokens_details");
  if (details != it->end() && details->is_object()) {
    TEMPER_RETURN_IF_ERROR(
        OptionalCount(*details, "cached_tokens", "usage.prompt_tokens_details", &usage->cached_prompt_tokens));
  }
  return Status::OK();
}

// Thinking text: vLLM says reasoning_content, newer servers say reasoning.
Status ParseReasoning(const json& message, std::string_view path, std::string* out) {
  TEMPER_RETURN_IF_ERROR(OptionalString(message, "reasoning_content", path, out));
  if (out->empty()) TEMPER_RETURN_IF_ERROR(OptionalString(message, "reasoning", path, out));
  return Status::OK();
}

json MessageToJson(const ChatMessage& m) {
  json j = {{"role", ChatRoleName(m.role)}, {"content", m.content}};
  if (!m.tool_calls.empty()) {
    json calls = json::array();
    for (const ToolCall& c : m.tool_calls) {
      calls.push_back(
          {{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    }
    j["tool_calls"] = std::move(calls);
  }
  if (m.role == ChatRole::kTool) {
    j["tool_call_id"] = m.tool_call_id;
    if (!m.name.empty()) j["name"] = m.name;
  }
  return j;
}

}  // namespace

FinishReason ParseFinishReason(std::string_view name) {
  if (name == "stop" || name == "eos") return FinishReason::kStop;
  if (name == "length") return FinishReason::kLength;
  if (name == "tool_calls" || name == "function_call") return FinishReason::kToolCalls;
  if (name == "content_filter") return FinishReason::kContentFilter;
  return FinishReason::kOther;
}

json ToOpenAIRequest(const ChatRequest& request, const std::string& model, bool stream) {
  json body = {{"model", model}, {"max_tokens", request.max_tokens}};
  json messages = json::array();
  for (const ChatMessage& m : request.messages) messages.push_back(MessageToJson(m));
  body["messages"] = std::move(messages);
  if (!request.tools.empty()) {
    json tools = json::array();
    for (const ToolDeclaration& t : request.tools) {
      tools.push_back({{"type", "function"},
                       {"function", {{"name", t.name}, {"description", t.description}, {"parameters", t.parameters}}}});
    }
    body["tools"] = std::move(tools);
    body["tool_choice"] = "auto";
  }
  const SamplingConfig& s = request.sampling;
  body["temperature"] = s.temperature;
  body["top_p"] = s.top_p;
  if (s.top_k > 0) body["top_k"] = s.top_k;
  if (s.min_p > 0) body["min_p"] = s.min_p;
  if (s.seed) body["seed"] = *s.seed;
  if (!request.stop.empty()) body["stop"] = request.stop;
  if (stream) {
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
  }
  return body;
}

Result<ChatResponse> ParseOpenAIResponse(std::string_view body) {
  json root = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return Malformed("the body", "is not JSON");
  if (!root.is_object()) return Malformed("the body", "is not a JSON object");
  if (auto err = root.find("error"); err != root.end() && !err->is_null()) {
    return Status::Unavailable(fmt::format("the server answered with an error: {}", OneLine(err->dump(), 500)));
  }
  ChatResponse r;
  TEMPER_RETURN_IF_ERROR(OptionalString(root, "model", "", &r.model));
  auto choices = root.find("choices");
  if (choices == root.end() || !choices->is_array()) return Malformed("choices", "is missing or not an array");
  if (choices->empty()) return Malformed("choices", "is empty");
  const json& choice = (*choices)[0];
  if (!choice.is_object()) return Malformed("choices[0]", "is not an object");
  auto message = choice.find("message");
  if (message == choice.end() || !message->is_object()) {
    return Malformed("choices[0].message", "is missing or not an object");
  }
  TEMPER_RETURN_IF_ERROR(OptionalString(*message, "content", "choices[0].message", &r.text));
  TEMPER_RETURN_IF_ERROR(ParseReasoning(*message, "choices[0].message", &r.reasoning));
  if (auto calls = message->find("tool_calls"); calls != message->end() && !calls->is_null()) {
    if (!calls->is_array()) return Malformed("choices[0].message.tool_calls", "is not an array");
    for (size_t i = 0; i < calls->size(); ++i) {
      const json& c = (*calls)[i];
      std::string path = fmt::format("choices[0].message.tool_calls[{}]", i);
      if (!c.is_object()) return Malformed(path, "is not an object");
      ToolCall call;
      TEMPER_RETURN_IF_ERROR(OptionalString(c, "id", path, &call.id));
      auto fn = c.find("function");
      if (fn == c.end() || !fn->is_object()) return Malformed(path + ".function", "is missing or not an object");
      TEMPER_RETURN_IF_ERROR(OptionalString(*fn, "name", path + ".function", &call.name));
      if (call.name.empty()) return Malformed(path + ".function.name", "is missing or empty");
      // Some servers send arguments as an object rather than a JSON string; keep its text.
      if (auto args = fn->find("arguments"); args != fn->end() && args->is_object()) {
        call.arguments = args->dump();
      } else {
        TEMPER_RETURN_IF_ERROR(OptionalString(*fn, "arguments", path + ".function", &call.arguments));
      }
      r.tool_calls.push_back(std::move(call));
    }
  }
  std::string finish;
  TEMPER_RETURN_IF_ERROR(OptionalString(choice, "finish_reason", "choices[0]", &finish));
  r.finish_reason = ParseFinishReason(finish);
  // temper-lm serve's note on a reply that broke the model's format (its text came back verbatim).
  TEMPER_RETURN_IF_ERROR(OptionalString(choice, "parse_error", "choices[0]", &r.malformed_reply));
  TEMPER_RETURN_IF_ERROR(ParseUsage(root, &r.usage));
  return r;
}

void SseDecoder::Feed(std::string_view bytes, std::vector<std::string>* events) {
  buffer_.append(bytes);
  size_t start = 0;
  for (;;) {
    size_t nl = buffer_.find_first_of("\r\n", start);
    if (nl == std::string::npos) break;
    // A CR at the very end may be the first half of a CRLF: wait for the next byte.
    if (buffer_[nl] == '\r' && nl + 1 == buffer_.size()) break;
    Line(std::string_view(buffer_).substr(start, nl - start), events);
    start = nl + ((buffer_[nl] == '\r' && buffer_[nl + 1] == '\n') ? 2 : 1);
  }
  buffer_.erase(0, start);
}

void SseDecoder::Line(std::string_view line, std::vector<std::string>* events) {
  if (line.empty()) {  // blank line: dispatch
    if (has_data_) events->push_back(std::move(data_));
    data_.clear();
    has_data_ = false;
    return;
  }
  if (line.front() == ':') return;
  size_t colon = line.find(':');
  std::string_view field = line.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (field != "data") return;
  if (has_data_) data_.push_back('\n');
  data_.append(value);
  has_data_ = true;
}

Status StreamAccumulator::Feed(std::string_view data, const StreamCallbacks* stream) {
  if (done_) return Status::OK();
  if (data == "[DONE]") {
    done_ = true;
    return Status::OK();
  }
  json chunk = json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (chunk.is_discarded() || !chunk.is_object()) {
    return Malformed(fmt::format("stream chunk {}", chunks_ + 1),
                     fmt::format("is not a JSON object: '{}'", OneLine(std::string(data), 200)));
  }
  ++chunks_;
  return FeedChunk(chunk, stream);
}

Status StreamAccumulator::FeedChunk(const json& chunk, const StreamCallbacks* stream) {
  const std::string where = fmt::format("stream chunk {}", chunks_);
  if (auto err = chunk.find("error"); err != chunk.end() && !err->is_null()) {
    return Status::Unavailable(
        fmt::format("the server reported an error mid-stream ({}): {}", where, OneLine(err->dump(), 500)));
  }
  if (response_.model.empty()) TEMPER_RETURN_IF_ERROR(OptionalString(chunk, "model", where, &response_.model));
  TEMPER_RETURN_IF_ERROR(ParseUsage(chunk, &response_.usage));
  auto choices = chunk.find("choices");
  if (choices == chunk.end() || choices->is_null()) return Status::OK();
  if (!choices->is_array()) return Malformed(where + ".choices", "is not an array");
  if (choices->empty()) return Status::OK();  // the usage-only final chunk
  const json& choice = (*choices)[0];
  if (!choice.is_object()) return Malformed(where + ".choices[0]", "is not an object");
  if (auto delta = choice.find("delta"); delta != choice.end() && delta->is_object()) {
    const std::string path = where + ".choices[0].delta";
    std::string text, reasoning;
    TEMPER_RETURN_IF_ERROR(OptionalString(*delta, "content", path, &text));
    TEMPER_RETURN_IF_ERROR(ParseReasoning(*delta, path, &reasoning));
    if (!text.empty()) {
      response_.text += text;
      if (stream && stream->on_text) stream->on_text(text);
    }
    if (!reasoning.empty()) {
      response_.reasoning += reasoning;
      if (stream && stream->on_reasoning) stream->on_reasoning(reasoning);
    }
    if (auto calls = delta->find("tool_calls"); calls != delta->end() && !calls->is_null()) {
      if (!calls->is_array()) return Malformed(path + ".tool_calls", "is not an array");
      for (size_t i = 0; i < calls->size(); ++i) {
        const json& c = (*calls)[i];
        std::string cpath = fmt::format("{}.tool_calls[{}]", path, i);
        if (!c.is_object()) return Malformed(cpath, "is not an object");
        // Pieces of one call share an index; a new index starts a new call.
        size_t index = response_.tool_calls.empty() ? 0 : response_.tool_calls.size() - 1;
        if (auto idx = c.find("index"); idx != c.end()) {
          if (!idx->is_number_unsigned() && !(idx->is_number_integer() && idx->get<int64_t>() >= 0)) {
            return Malformed(cpath + ".index", "is not a non-negative integer");
          }
          index = idx->get<size_t>();
        }
        if (index > response_.tool_calls.size() || index > 1024) {
          return Malformed(cpath + ".index",
                           fmt::format("jumps to {} with {} calls so far", index, response_.tool_calls.size()));
        }
        if (index == response_.tool_calls.size()) response_.tool_calls.emplace_back();
        ToolCall& call = response_.tool_calls[index];
        std::string id, name, args;
        TEMPER_RETURN_IF_ERROR(OptionalString(c, "id", cpath, &id));
        if (!id.empty()) call.id = id;
        if (auto fn = c.find("function"); fn != c.end() && fn->is_object()) {
          TEMPER_RETURN_IF_ERROR(OptionalString(*fn, "name", cpath + ".function", &name));
          TEMPER_RETURN_IF_ERROR(OptionalString(*fn, "arguments", cpath + ".function", &args));
        }
        call.name += name;
        call.arguments += args;
      }
    }
  }
  std::string finish;
  TEMPER_RETURN_IF_ERROR(OptionalString(choice, "finish_reason", where + ".choices[0]", &finish));
  TEMPER_RETURN_IF_ERROR(OptionalString(choice, "parse_error", where + ".choices[0]", &response_.malformed_reply));
  if (!finish.empty()) {
    response_.finish_reason = ParseFinishReason(finish);
    finished_ = true;
  }
  return Status::OK();
}

Result<ChatResponse> StreamAccumulator::Finish() {
  if (!done_ && !finished_) {
    return Status::DataLoss(
        fmt::format("the stream ended after {} chunks without a finish_reason or [DONE] (truncated); "
                    "{} bytes of text received",
                    chunks_, response_.text.size()));
  }
  for (size_t i = 0; i < response_.tool_calls.size(); ++i) {
    if (response_.tool_calls[i].name.empty()) {
      return Malformed(fmt::format("streamed tool call {}", i), "never received a function name");
    }
  }
  return response_;
}

}  // namespace temper
