#include "engine/serve/reply_stream_parser.h"

#include <fmt/format.h>

namespace temper::engine {
namespace {

constexpr std::string_view kWhitespace = " \t\n\r\f\v";
// The control tokens' texts, as in ChatFormat (chat_format.h); the parser sees them decoded.
constexpr std::string_view kChannelOpen = "<|channel>";
constexpr std::string_view kChannelClose = "<channel|>";
constexpr std::string_view kCallOpen = "<|tool_call>";
constexpr std::string_view kCallClose = "<tool_call|>";
constexpr std::string_view kEnds[] = {"<turn|>", "<eos>", "<|tool_response>"};
constexpr std::string_view kStrays[] = {"<channel|>",       "<tool_call|>", "<|turn>",
                                        "<tool_response|>", "<|tool>",      "<tool|>"};
constexpr std::string_view kThought = "thought";

// True when `rest` is a proper prefix of `token`: more text could complete it.
bool CouldBecome(std::string_view rest, std::string_view token) {
  return rest.size() < token.size() && token.starts_with(rest);
}

// Splits trailing whitespace off `text` into `space`.
std::string_view HoldTrailingSpace(std::string_view text, std::string& space) {
  const size_t end = text.find_last_not_of(kWhitespace);
  const size_t keep = end == std::string_view::npos ? 0 : end + 1;
  space.assign(text.substr(keep));
  return text.substr(0, keep);
}

}  // namespace

void ReplyStreamParser::EmitContent(std::string_view text, ReplyDelta& out) {
  if (!content_started_) {
    const size_t first = text.find_first_not_of(kWhitespace);
    if (first == std::string_view::npos) return;
    text.remove_prefix(first);
    content_started_ = true;
  } else if (text.find_first_not_of(kWhitespace) == std::string_view::npos) {
    content_space_.append(text);
    return;
  }
  out.content += content_space_;
  std::string space;
  out.content.append(HoldTrailingSpace(text, space));
  content_space_ = std::move(space);
}

void ReplyStreamParser::EmitThinking(std::string_view text, ReplyDelta& out) {
  if (!thought_started_) {
    const size_t first = text.find_first_not_of(kWhitespace);
    if (first == std::string_view::npos) return;
    text.remove_prefix(first);
    thought_started_ = true;
    if (any_thought_) out.thinking += '\n';  // ParseReplyText joins thoughts with a newline
    any_thought_ = true;
  } else if (text.find_first_not_of(kWhitespace) == std::string_view::npos) {
    thought_space_.append(text);
    return;
  }
  out.thinking += thought_space_;
  std::string space;
  out.thinking.append(HoldTrailingSpace(text, space));
  thought_space_ = std::move(space);
}

Status ReplyStreamParser::Process(ReplyDelta& out, bool final) {
  const std::string_view s = all_;
  while (pos_ < s.size()) {
    const std::string_view rest = s.substr(pos_);
    switch (state_) {
      case State::kContent: {
        const size_t lt = rest.find('<');
        if (lt == std::string_view::npos) {
          EmitContent(rest, out);
          pos_ = emitted_to_ = s.size();
          break;
        }
        EmitContent(rest.substr(0, lt), out);
        pos_ += lt;
        emitted_to_ = pos_;
        const std::string_view at = s.substr(pos_);
        if (at.starts_with(kChannelOpen)) {
          construct_start_ = pos_;
          pos_ += kChannelOpen.size();
          state_ = State::kThoughtHeader;
          thought_started_ = false;
          thought_space_.clear();
          break;
        }
        if (at.starts_with(kCallOpen)) {
          construct_start_ = pos_;
          pos_ += kCallOpen.size();
          state_ = State::kToolCall;
          break;
        }
        bool matched = false;
        for (std::string_view end : kEnds) {
          if (at.starts_with(end)) {
            pos_ += end.size();
            construct_start_ = pos_;  // where ParseReplyText reports text after the end
            state_ = State::kEnded;
            matched = true;
            break;
          }
        }
        if (matched) break;
        for (std::string_view stray : kStrays) {
          if (at.starts_with(stray)) {
            return Status::InvalidArgument(fmt::format("reply at byte {}: unexpected {}", pos_, stray));
          }
        }
        if (!final) {
          bool partial = CouldBecome(at, kChannelOpen) || CouldBecome(at, kCallOpen);
          for (std::string_view t : kEnds) partial = partial || CouldBecome(at, t);
          for (std::string_view t : kStrays) partial = partial || CouldBecome(at, t);
          if (partial) return Status::OK();  // wait for the next chunk
        }
        EmitContent(at.substr(0, 1), out);
        emitted_to_ = ++pos_;
        break;
      }
      case State::kThoughtHeader:
        if (rest.starts_with(kThought)) {
          pos_ += kThought.size();
        } else if (!final && CouldBecome(rest, kThought)) {
          return Status::OK();
        }
        emitted_to_ = pos_;  // the header is part of the thought: not content if the reply breaks later
        state_ = State::kThinking;
        break;
      case State::kThinking: {
        const size_t close = rest.find(kChannelClose);
        if (close != std::string_view::npos) {
          EmitThinking(rest.substr(0, close), out);
          pos_ += close + kChannelClose.size();
          emitted_to_ = pos_;
          thought_space_.clear();  // a thought's trailing whitespace is trimmed
          state_ = State::kContent;
          break;
        }
        // Keep back a tail that could be the start of <channel|>.
        size_t keep = 0;
        if (!final) {
          for (size_t k = std::min(rest.size(), kChannelClose.size() - 1); k > 0; --k) {
            if (kChannelClose.starts_with(rest.substr(rest.size() - k))) {
              keep = k;
              break;
            }
          }
        }
        EmitThinking(rest.substr(0, rest.size() - keep), out);
        pos_ += rest.size() - keep;
        emitted_to_ = pos_;
        return Status::OK();
      }
      case State::kToolCall: {
        const size_t close = rest.find(kCallClose);
        if (close == std::string_view::npos) return Status::OK();  // the call is not complete yet
        const size_t end = pos_ + close + kCallClose.size();
        // ParseReplyText over the reply so far gives this call with offsets into the whole reply.
        TEMPER_ASSIGN_OR_RETURN(ModelReply reply, format_.ParseReplyText(s.substr(0, end)));
        if (reply.tool_calls.size() != static_cast<size_t>(calls_) + 1) {
          return Status::Internal(
              fmt::format("reply at byte {}: tool call {} was not parsed", construct_start_, calls_));
        }
        out.tool_calls.push_back(std::move(reply.tool_calls.back()));
        ++calls_;
        pos_ = emitted_to_ = end;
        state_ = State::kContent;
        break;
      }
      case State::kEnded: {
        if (rest.find_first_not_of(kWhitespace) != std::string_view::npos) {
          return Status::InvalidArgument(
              fmt::format("reply at byte {}: text after the end of the turn", construct_start_));
        }
        pos_ = s.size();
        break;
      }
      case State::kRaw:
        out.content.append(rest);
        pos_ = s.size();
        break;
    }
  }
  return Status::OK();
}

Status ReplyStreamParser::Run(ReplyDelta& out, bool final) {
  Status s = Process(out, final);
  if (final && s.ok() && state_ == State::kToolCall) {
    s = Status::InvalidArgument(
        fmt::format("tool call {} at byte {}: not closed with <tool_call|>", calls_, construct_start_));
  } else if (final && s.ok() && (state_ == State::kThinking || state_ == State::kThoughtHeader)) {
    s = Status::InvalidArgument(
        fmt::format("reply at byte {}: thought channel not closed with <channel|>", construct_start_));
  }
  if (s.code() != StatusCode::kInvalidArgument) return s;
  // What was held back and everything not yet delivered, verbatim; the rest of the reply follows.
  parse_error_ = s;
  state_ = State::kRaw;
  out.content += content_space_;
  content_space_.clear();
  out.content.append(all_, emitted_to_);
  pos_ = emitted_to_ = all_.size();
  return Status::OK();
}

Result<ReplyDelta> ReplyStreamParser::Push(std::string_view text) {
  all_.append(text);
  ReplyDelta out;
  TEMPER_RETURN_IF_ERROR(Run(out, /*final=*/false));
  return out;
}

Result<ReplyDelta> ReplyStreamParser::Finish() {
  ReplyDelta out;
  TEMPER_RETURN_IF_ERROR(Run(out, /*final=*/true));
  if (state_ == State::kContent) content_space_.clear();  // the reply's trailing whitespace: trimmed
  return out;
}

}  // namespace temper::engine
