// ReplyStream: splits a model reply into visible text, thinking and tool calls while it is being
// generated, so callers see text as it streams and each tool call once it is complete. One
// implementation per tool-call syntax (ChatFormat::tool_call_syntax()):
//   * ReplyStreamParser (reply_stream_parser.h): Gemma 4's control tokens and native calls;
//   * JsonReplyStreamParser (json_reply_stream_parser.h): Gemma 3's replies, text or a JSON call.
// Each follows its format's ParseReplyText exactly: concatenating every delta gives the `content`
// and `thinking` ParseReplyText returns for the whole text, and the tool calls are the same.
//
// A reply that breaks the format does not fail: it becomes plain content from where it broke, and
// parse_error() says what broke.
//
// Thread safety: none; one stream per reply. Ownership: borrows the ChatFormat.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "engine/tokenizer/chat_format.h"

namespace temper::engine {

// What a chunk of reply text completed.
struct ReplyDelta {
  std::string content;
  std::string thinking;
  std::vector<ToolCall> tool_calls;
  bool empty() const { return content.empty() && thinking.empty() && tool_calls.empty(); }
};

class ReplyStream {
 public:
  virtual ~ReplyStream() = default;
  // Adds the next chunk of reply text. Errors are the parser's own (Internal); a reply that breaks
  // the format is content from there on.
  virtual Result<ReplyDelta> Push(std::string_view text) = 0;
  // The end of the reply: releases what was held back.
  virtual Result<ReplyDelta> Finish() = 0;
  // OK while the reply keeps to the format; else why it did not (InvalidArgument).
  virtual const Status& parse_error() const = 0;
  virtual int tool_call_count() const = 0;
};

// The stream parser for `format`'s replies to a request offering `tool_names` (a Gemma 3 reply is
// a call only when it names one of them; with none, every reply is text). Borrows `format`.
std::unique_ptr<ReplyStream> NewReplyStream(const ChatFormat& format, std::vector<std::string> tool_names);

}  // namespace temper::engine
