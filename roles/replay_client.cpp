#include "roles/replay_client.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>

#include <fmt/format.h>

#include "common/display_text.h"
#include "roles/openai_wire.h"

namespace temper {

using nlohmann::json;

namespace {

std::string Excerpt(const std::string& s) { return OneLine(s, 80); }

Status Bad(std::string_view field, std::string_view problem) {
  return Status::DataLoss(fmt::format("recorded response: {} {}", field, problem));
}

}  // namespace

json CanonicalRequest(const ChatRequest& request) {
  json j = ToOpenAIRequest(request, "", /*stream=*/false);
  j.erase("model");
  j["role"] = request.role_name;
  return j;  // nlohmann::json objects keep keys sorted, so dump() is canonical
}

namespace {

std::string HashCanonical(const json& canonical) {
  const std::string text = canonical.dump();
  uint64_t h = 1469598103934665603ull;  // FNV-1a 64 offset basis
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;  // FNV-1a 64 prime
  }
  return fmt::format("{:016x}", h);
}

}  // namespace

std::string RequestHash(const ChatRequest& request) { return HashCanonical(CanonicalRequest(request)); }

json ResponseToJson(const ChatResponse& r) {
  json calls = json::array();
  for (const ToolCall& c : r.tool_calls) calls.push_back({{"id", c.id}, {"name", c.name}, {"arguments", c.arguments}});
  return {{"text", r.text},
          {"reasoning", r.reasoning},
          {"tool_calls", calls},
          {"finish_reason", FinishReasonName(r.finish_reason)},
          {"model", r.model},
          {"usage",
           {{"prompt_tokens", r.usage.prompt_tokens},
            {"completion_tokens", r.usage.completion_tokens},
            {"cached_prompt_tokens", r.usage.cached_prompt_tokens}}}};
}

Result<ChatResponse> ResponseFromJson(const json& j) {
  if (!j.is_object()) return Bad("response", "is not an object");
  ChatResponse r;
  auto str = [&](const char* key, std::string* out) -> Status {
    auto it = j.find(key);
    if (it == j.end()) return Status::OK();
    if (!it->is_string()) return Bad(key, "is not a string");
    *out = it->get<std::string>();
    return Status::OK();
  };
  TEMPER_RETURN_IF_ERROR(str("text", &r.text));
  TEMPER_RETURN_IF_ERROR(str("reasoning", &r.reasoning));
  TEMPER_RETURN_IF_ERROR(str("model", &r.model));
  std::string finish;
  TEMPER_RETURN_IF_ERROR(str("finish_reason", &finish));
  r.finish_reason = ParseFinishReason(finish);
  if (auto calls = j.find("tool_calls"); calls != j.end()) {
    if (!calls->is_array()) return Bad("tool_calls", "is not an array");
    for (const json& c : *calls) {
      if (!c.is_object() || !c.contains("name") || !c["name"].is_string())
        return Bad("tool_calls[]", "lacks a string name");
      ToolCall call;
      call.name = c["name"].get<std::string>();
      if (c.contains("id") && c["id"].is_string()) call.id = c["id"].get<std::string>();
      if (c.contains("arguments") && c["arguments"].is_string()) call.arguments = c["arguments"].get<std::string>();
      r.tool_calls.push_back(std::move(call));
    }
  }
  if (auto u = j.find("usage"); u != j.end() && u->is_object()) {
    for (auto [key, out] : {std::pair<const char*, uint64_t*>{"prompt_tokens", &r.usage.prompt_tokens},
                            {"completion_tokens", &r.usage.completion_tokens},
                            {"cached_prompt_tokens", &r.usage.cached_prompt_tokens}}) {
      if (auto v = u->find(key); v != u->end()) {
        if (!v->is_number_unsigned()) return Bad(fmt::format("usage.{}", key), "is not a non-negative integer");
        *out = v->get<uint64_t>();
      }
    }
  }
  return r;
}

Result<std::unique_ptr<ReplayClient>> ReplayClient::Open(std::string endpoint_name, const std::string& transcript) {
  std::ifstream in(transcript);
  if (!in) {
    return Status::NotFound(
        fmt::format("replay endpoint '{}': transcript {} cannot be opened", endpoint_name, transcript));
  }
  std::unique_ptr<ReplayClient> client(new ReplayClient(std::move(endpoint_name), transcript));
  std::string line;
  size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto where = [&](std::string_view what) {
      return Status::DataLoss(fmt::format("{}:{}: {}", transcript, number, what));
    };
    json entry = json::parse(line, nullptr, false);
    if (entry.is_discarded() || !entry.is_object()) return where("not a JSON object");
    if (!entry.contains("request") || !entry["request"].is_object()) return where("no \"request\" object");
    if (!entry.contains("response")) return where("no \"response\"");
    auto response = ResponseFromJson(entry["response"]);
    if (!response.ok()) return where(response.status().message());
    // The hash is recomputed from the request (the stored one is for people reading the file), so a
    // hand-edited request stays consistent.
    Recorded& rec = client->by_hash_[HashCanonical(entry["request"])];
    rec.request = entry["request"];
    rec.responses.push_back(std::move(*response));
    ++client->entries_;
  }
  return client;
}

Result<ChatResponse> ReplayClient::Chat(const ChatRequest& request, const StreamCallbacks* stream) {
  const auto start = std::chrono::steady_clock::now();
  const std::string hash = RequestHash(request);
  ChatResponse response;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_hash_.find(hash);
    if (it == by_hash_.end() || it->second.request != CanonicalRequest(request)) {
      std::string first = request.messages.empty() ? "" : Excerpt(request.messages.front().content);
      std::string last = request.messages.empty() ? "" : Excerpt(request.messages.back().content);
      return Status::NotFound(fmt::format(
          "replay endpoint '{}' (transcript {}) has no entry for this {} request (hash {}, {} messages; first: "
          "\"{}\"; last: \"{}\"); record it by running with this endpoint in record mode",
          name_, path_, request.role_name.empty() ? "unnamed" : request.role_name, hash, request.messages.size(), first,
          last));
    }
    Recorded& rec = it->second;
    response = rec.responses[std::min(rec.next, rec.responses.size() - 1)];
    if (rec.next < rec.responses.size()) ++rec.next;
  }
  if (stream) {
    if (stream->on_reasoning && !response.reasoning.empty()) stream->on_reasoning(response.reasoning);
    if (stream->on_text && !response.text.empty()) stream->on_text(response.text);
  }
  response.attempts = 1;
  response.latency = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  return response;
}

Result<std::unique_ptr<RecordingClient>> RecordingClient::Create(std::unique_ptr<ModelClient> inner,
                                                                 const std::string& transcript) {
  int fd = ::open(transcript.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return Status::FromErrno(errno, fmt::format("opening transcript {} for recording", transcript));
  return std::unique_ptr<RecordingClient>(new RecordingClient(std::move(inner), transcript, fd));
}

RecordingClient::~RecordingClient() { ::close(fd_); }

Result<ChatResponse> RecordingClient::Chat(const ChatRequest& request, const StreamCallbacks* stream) {
  TEMPER_ASSIGN_OR_RETURN(ChatResponse response, inner_->Chat(request, stream));
  json entry = {{"hash", RequestHash(request)},
                {"role", request.role_name},
                {"request", CanonicalRequest(request)},
                {"response", ResponseToJson(response)}};
  std::string line = entry.dump() + "\n";
  std::lock_guard<std::mutex> lock(mu_);
  size_t done = 0;
  while (done < line.size()) {
    ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, fmt::format("appending to transcript {}", path_));
    }
    done += static_cast<size_t>(n);
  }
  return response;
}

}  // namespace temper
