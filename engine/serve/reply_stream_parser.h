// ReplyStreamParser: the ReplyStream (reply_stream.h) of Gemma 4's replies — visible text, thought
// channels and native tool calls, split while the reply is generated.
//
// It reads the text the scheduler streams (decoded with special tokens kept) and follows exactly
// the grammar of ChatFormat::ParseReplyText: concatenating every delta gives the `content` and
// `thinking` ParseReplyText returns for the whole text, and the tool calls are the same (each is
// parsed by ParseReplyText itself, over the reply so far, so offsets in errors are reply offsets).
// Text that may be the start of a control token ("<|tool" at the end of a chunk), and trailing
// whitespace that ParseReplyText would trim, is held back until the next chunk decides it.
//
// A reply that breaks the format does not fail: from the first byte the parser cannot place (the
// start of a malformed tool call, a stray control token, text after the end of the turn), the
// reply is plain content, verbatim, control-token text included, as other OpenAI-compatible
// servers return what they cannot parse; parse_error() says what broke, in ParseReplyText's words.
//
// Thread safety: none; one parser per reply. Ownership: borrows the ChatFormat.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "engine/serve/reply_stream.h"
#include "engine/tokenizer/chat_format.h"

namespace temper::engine {

class ReplyStreamParser final : public ReplyStream {
 public:
  explicit ReplyStreamParser(const ChatFormat& format) : format_(format) {}

  // Adds the next chunk of reply text. Errors are the parser's own (Internal); a reply that breaks
  // the format is content from there on (see the top).
  Result<ReplyDelta> Push(std::string_view text) override;
  // The end of the reply: releases what was held back. A tool call or thought channel left open
  // ("tool call 0 at byte 7: not closed with <tool_call|>") makes its text content, as above.
  Result<ReplyDelta> Finish() override;
  // OK while the reply keeps to the format; else why it did not (InvalidArgument, e.g. "tool call 0
  // at byte 12: argument 'path': unterminated string", "reply at byte 5: unexpected <tool_call|>").
  const Status& parse_error() const override { return parse_error_; }

  // True while inside an unfinished tool call or thought channel (so a reply cut by max_tokens
  // there is incomplete rather than malformed).
  bool inside_construct() const {
    return state_ == State::kToolCall || state_ == State::kThinking || state_ == State::kThoughtHeader;
  }
  int tool_call_count() const override { return calls_; }

 private:
  enum class State { kContent, kThoughtHeader, kThinking, kToolCall, kEnded, kRaw };
  // Runs the state machine over pending text; `final` means no more text will come.
  Status Process(ReplyDelta& out, bool final);
  // Process, and on a format error (InvalidArgument) the switch to plain content.
  Status Run(ReplyDelta& out, bool final);
  void EmitContent(std::string_view text, ReplyDelta& out);
  void EmitThinking(std::string_view text, ReplyDelta& out);

  const ChatFormat& format_;
  State state_ = State::kContent;
  Status parse_error_;
  std::string all_;             // the whole reply so far
  size_t pos_ = 0;              // all_ before this is processed
  size_t emitted_to_ = 0;       // all_ before this is delivered, or held in content_space_
  size_t construct_start_ = 0;  // where the open tool call or thought channel began, or the turn ended
  int calls_ = 0;
  // Trimming, as ParseReplyText trims content and each thought.
  bool content_started_ = false;
  std::string content_space_;  // trailing whitespace held back
  bool thought_started_ = false;
  bool any_thought_ = false;
  std::string thought_space_;
};

}  // namespace temper::engine
