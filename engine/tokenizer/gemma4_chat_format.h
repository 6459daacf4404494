// Gemma4ChatFormat: Gemma 4's conversation format (a ChatDialect, chat_format.h).
//
// Sources (read 2026-11; Gemma 4 replaced Gemma 3's <start_of_turn>/<end_of_turn>):
//   * Google, "Gemma 4 Prompt Formatting", https://ai.google.dev/gemma/docs/core/prompt-formatting-gemma4
//     (turn tokens, the six tool tokens, the <|"|> string delimiter);
//   * Google, "Thinking mode in Gemma", https://ai.google.dev/gemma/docs/capabilities/thinking
//     (<|think|> at the top of the system turn; the model answers <|channel>thought\n...<channel|>);
//   * the chat template shipped with the Gemma 4 checkpoints, as copied into llama.cpp
//     (models/templates/gemma4.jinja) — the byte-exact reference for everything rendered here.
//     Rendering that template with jinja2 (transformers' settings) gave output identical to
//     Render() for the conversations of tests/engine/tokenizer/chat_format_test.cpp, apart from the
//     deliberate differences listed below;
//   * llama.cpp's models/templates/google-gemma-4-31B-it-interleaved.jinja (replaying a tool-calling
//     turn's thinking) and vLLM's vllm/tool_parsers/gemma4_tool_parser.py (the argument grammar).
//
// The wire format, for a conversation with a system prompt, one tool, thinking on, and one round of
// tool use ("Q" stands for the single token <|"|>):
//
//   <bos><|turn>system\n<|think|>You are ...<|tool>declaration:run{description:Q...Q,parameters:{...}}<tool|><turn|>\n
//   <|turn>user\nHarden sshd.<turn|>\n
//   <|turn>model\n<|channel>thought\n...<channel|><|tool_call>call:run{cmd:Qsshd -tQ}<tool_call|>
//   <|tool_response>response:run{exit:0,stdout:QQ}<tool_response|>Done.<turn|>\n
//
// A tool result that is an object renders key by key; anything else renders as {value:...}.
//
// Differences from the template, each deliberate:
//   * A model turn left open by tool responses (no content after them) is continued by the next
//     model message without a new <|turn>model header — which is how the model saw it while
//     generating — and closed with <turn|> if a non-model message follows. The template would open
//     a second model turn inside the first.
//   * `parameters` without a "type" still gets its closing brace (the template drops it).
//   * A JSON null renders as `null` (Jinja would print Python's `None`).
//
// Untrusted text is encoded with special-token matching off, so a literal "<turn|>" in it cannot
// close a turn; `ids` then differ from Encode(text) exactly where such strings occur.
//
// Errors: Create: NotFound naming the first missing token, e.g. "tokenizer has no token '<|think|>'
// (needed by Gemma 4's chat format)". Render: InvalidArgument naming the message or tool.
// ParseReplyText: InvalidArgument naming the problem and its byte offset, e.g. "tool call 1 at byte
// 40: not closed with <tool_call|>", "tool call 0 at byte 12: argument 'path': unterminated string".
//
// Thread safety: immutable after Create(). Ownership: borrows the Tokenizer.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "engine/tokenizer/chat_format.h"
#include "engine/tokenizer/tokenizer.h"

namespace temper::engine {

class Gemma4ChatFormat final : public ChatDialect {
 public:
  static Result<std::unique_ptr<Gemma4ChatFormat>> Create(const Tokenizer& tokenizer);

  Result<RenderedPrompt> Render(const Conversation& conversation) const override;
  Result<ModelReply> ParseReplyText(std::string_view text) const override;
  // <turn|> (turn done), <|tool_response> (the model waits for tool results), <eos>.
  std::vector<int32_t> stop_ids() const override;
  ToolCallSyntax tool_call_syntax() const override { return ToolCallSyntax::kGemma4Tokens; }
  const char* family_name() const override { return "Gemma 4"; }

 private:
  // The control tokens, looked up by text. Index with the enum.
  enum Token {
    kBos,
    kEos,
    kTurnOpen,
    kTurnClose,
    kThink,
    kChannelOpen,
    kChannelClose,
    kToolOpen,
    kToolClose,
    kCallOpen,
    kCallClose,
    kResponseOpen,
    kResponseClose,
    kQuote,
    kTokenCount
  };
  static constexpr const char* kTokenText[kTokenCount] = {
      "<bos>",   "<eos>",   "<|turn>",      "<turn|>",      "<|think|>",        "<|channel>",       "<channel|>",
      "<|tool>", "<tool|>", "<|tool_call>", "<tool_call|>", "<|tool_response>", "<tool_response|>", "<|\"|>"};

  class Builder;
  class ReplyParser;

  explicit Gemma4ChatFormat(const Tokenizer& tokenizer) : tokenizer_(&tokenizer) {}

  const Tokenizer* tokenizer_;
  int32_t ids_[kTokenCount] = {};
};

}  // namespace temper::engine
