#include "engine/serve/json_reply_stream_parser.h"

#include <algorithm>

#include <fmt/format.h>

namespace temper::engine {
namespace {

constexpr std::string_view kWhitespace = " \t\n\r\f\v";
// The stop tokens' texts, as in Gemma3ChatFormat (gemma3_chat_format.h); the parser sees them decoded.
constexpr std::string_view kStops[] = {"<end_of_turn>", "<eos>"};

bool IsSpace(char c) { return kWhitespace.find(c) != std::string_view::npos; }

// Where the text that may still be trimmed away begins: trailing whitespace, and before it a tail
// that is a stop token's text or the start of one, and the whitespace before that. Holding back
// more than ParseReplyText finally trims is harmless (Finish releases it); holding back less is not.
size_t HeldFrom(std::string_view s) {
  size_t end = s.size();
  while (end > 0 && IsSpace(s[end - 1])) --end;
  size_t from = end;
  for (std::string_view stop : kStops) {
    for (size_t k = std::min(stop.size(), end); k > 0; --k) {
      if (stop.starts_with(s.substr(end - k, k))) {
        from = std::min(from, end - k);
        break;
      }
    }
  }
  while (from > 0 && IsSpace(s[from - 1])) --from;
  return from;
}

}  // namespace

Result<ReplyDelta> JsonReplyStreamParser::Push(std::string_view text) {
  all_.append(text);
  ReplyDelta out;
  const size_t first = all_.find_first_not_of(kWhitespace);
  if (first == std::string::npos) return out;
  if (mode_ == Mode::kUndecided) {
    const bool may_be_call = !tool_names_.empty() && (all_[first] == '{' || all_[first] == '[');
    mode_ = may_be_call ? Mode::kMaybeCall : Mode::kText;
  }
  if (mode_ != Mode::kText) return out;
  const size_t held = HeldFrom(all_);
  if (held > first && held - first > emitted_) {
    out.content = all_.substr(first + emitted_, held - first - emitted_);
    emitted_ = held - first;
  }
  return out;
}

Result<ReplyDelta> JsonReplyStreamParser::Finish() {
  TEMPER_ASSIGN_OR_RETURN(ModelReply reply, format_.ParseReplyText(all_));
  ReplyDelta out;
  const size_t first = all_.find_first_not_of(kWhitespace);
  std::string why;  // why a reply held as a possible call is content
  for (size_t i = 0; i < reply.tool_calls.size() && why.empty(); ++i) {
    if (std::find(tool_names_.begin(), tool_names_.end(), reply.tool_calls[i].name) == tool_names_.end()) {
      why = fmt::format("tool call {} names '{}', which is not one of the tools offered", i, reply.tool_calls[i].name);
    }
  }
  if (!reply.tool_calls.empty() && why.empty() && mode_ == Mode::kMaybeCall) {
    calls_ = static_cast<int>(reply.tool_calls.size());
    out.tool_calls = std::move(reply.tool_calls);
    return out;
  }
  if (!reply.tool_calls.empty()) {
    // Content after all (no tools offered, or one not offered): the text ParseReplyText read as
    // calls, as it reads any other text — trimmed, without its stop token.
    reply.content = all_.substr(first, HeldFrom(all_) - first);
  } else if (mode_ == Mode::kMaybeCall) {
    why =
        "starts a JSON object or array but is not a tool call ({\"name\": ..., \"arguments\": {...}}, or an array of "
        "them)";
  }
  if (mode_ == Mode::kMaybeCall) {
    parse_error_ = Status::InvalidArgument(fmt::format("reply at byte {}: {}", first, why));
  }
  if (emitted_ > 0 &&
      (reply.content.size() < emitted_ || reply.content.compare(0, emitted_, all_, first, emitted_) != 0)) {
    return Status::Internal(
        fmt::format("reply parser: the {} bytes streamed are not where the reply's content begins", emitted_));
  }
  out.content = reply.content.substr(emitted_);
  emitted_ = reply.content.size();
  return out;
}

}  // namespace temper::engine
