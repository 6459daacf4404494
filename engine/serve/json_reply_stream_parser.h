// JsonReplyStreamParser: the ReplyStream (reply_stream.h) of Gemma 3's replies, whose tool calls are
// JSON (engine/tokenizer/gemma3_chat_format.h): a reply that is exactly {"name": ..., "arguments":
// {...}}, or a JSON array of such objects, is a call; anything else is text.
//
// Whether a reply is a call is known only at its end, so a reply whose first non-blank byte is '{'
// or '[' is held back whole until Finish (when the request offers tools); any other reply streams as
// text at once. Trailing whitespace and a tail that may be the start of a stop token's text
// ("<end_of_turn>", "<eos>") are held back until the next chunk decides them, so the deltas add up
// to Gemma3ChatFormat::ParseReplyText's content exactly.
//
// A reply that starts a JSON object or array but is not a call of a tool offered (not a call at all,
// or naming another tool) is content, verbatim, and parse_error() says why.
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

class JsonReplyStreamParser final : public ReplyStream {
 public:
  // `tool_names`: the tools the request offers; with none, every reply is text.
  JsonReplyStreamParser(const ChatFormat& format, std::vector<std::string> tool_names)
      : format_(format), tool_names_(std::move(tool_names)) {}

  Result<ReplyDelta> Push(std::string_view text) override;
  Result<ReplyDelta> Finish() override;
  const Status& parse_error() const override { return parse_error_; }
  int tool_call_count() const override { return calls_; }

 private:
  enum class Mode { kUndecided, kText, kMaybeCall };

  const ChatFormat& format_;
  const std::vector<std::string> tool_names_;
  Mode mode_ = Mode::kUndecided;
  std::string all_;     // the whole reply so far
  size_t emitted_ = 0;  // bytes of the content delivered
  Status parse_error_;
  int calls_ = 0;
};

}  // namespace temper::engine
