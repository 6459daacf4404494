// Gemma3ChatFormat: Gemma 3's conversation format (a ChatDialect, chat_format.h), for the Gemma 3
// text models (gemma3_text): two roles, no system turn, no thinking, no tool tokens.
//
// Source: the chat template Google ships with the Gemma 3 instruction-tuned checkpoints, as kept in
// transformers (src/transformers/models/gemma3/convert_gemma3_weights.py, _CHAT_TEMPLATE, written
// into every "-it" tokenizer_config.json) — the byte-exact reference for the turns rendered here:
//
//   <bos><start_of_turn>user\n{system}\n\n{first user message, trimmed}<end_of_turn>\n
//   <start_of_turn>model\n{reply, trimmed}<end_of_turn>\n
//   <start_of_turn>user\n...<end_of_turn>\n
//   <start_of_turn>model\n                                      (the generation prompt)
//
// A system message (first only) is prepended to the first user turn, untrimmed, with "\n\n"; roles
// alternate starting with the user; "assistant" is "model". Rendering that template with jinja2 gives
// exactly Render()'s text and, with Hugging Face's tokenizer, its ids for the six conversations of
// tests/data/tokenizer/gemma3-chat-template-renders.json (tools/reference/gemma3_chat_template.py).
//
// Tools (Gemma 3 has no tool syntax of its own; issue 47 asks for JSON under the grammar):
//   * Declared in the first user turn's preamble, after the system text as if it were part of it:
//     an instruction and the tools as a JSON array of {"name", "description", "parameters"}
//     (kToolInstruction in the .cpp).
//   * A call is the model's whole reply as one JSON object {"name":NAME,"arguments":{...}} —
//     several calls at once a JSON array of such objects (parallel_tool_calls; one object when the
//     caller allows one call). ParseReplyText reads a reply that is exactly such an object or
//     array, with a well-formed name and object arguments, as calls, and anything else as text.
//     The grammar (engine/constrain/json_tool_call_grammar.h) keeps the name to the tools offered
//     and the arguments to the tool's schema.
//   * Tool results go back in a user turn, as JSON {"name":NAME,"response":VALUE} (an array for
//     several): Gemma 3 has no tool role, and the template allows only user and model turns.
// With these, a conversation renders exactly as the template renders the same conversation written
// as plain messages: the preamble part of the system message, each call an assistant message whose
// content is its JSON, each batch of results a user message whose content is its JSON.
//
// Differences from the template, each deliberate:
//   * Consecutive turns of one side (tool results then a user message; a call then the model's
//     text) are merged into one turn, their parts joined with "\n\n": the template refuses a
//     conversation whose roles do not alternate.
//   * A system message (or tool preamble) with no user message after it gets a user turn of its
//     own; the template drops it. A conversation that opens with a model message renders it (the
//     template refuses it).
//   * Content is trimmed of ASCII whitespace only; Jinja's trim also strips Unicode spaces (U+00A0...).
//   * A model message's `thinking` is dropped: Gemma 3 does not think.
//
// Untrusted text is encoded with special-token matching off, so a literal "<end_of_turn>" in user
// content or a tool's output cannot close a turn; `ids` then differ from Encode(text) exactly there.
//
// Errors: Create: NotFound naming the first missing token ("tokenizer has no token '<end_of_turn>'
// (needed by Gemma 3's chat format)"). Render: InvalidArgument naming the message or tool
// ("enable_thinking: Gemma 3's chat format has no thinking mode", "messages[2] (system): only the
// first message may be a system message (Gemma 3 has no system turn)", CheckToolName's). ParseReplyText
// never fails: a reply is text or calls.
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

class Gemma3ChatFormat final : public ChatDialect {
 public:
  static Result<std::unique_ptr<Gemma3ChatFormat>> Create(const Tokenizer& tokenizer);

  Result<RenderedPrompt> Render(const Conversation& conversation) const override;
  Result<ModelReply> ParseReplyText(std::string_view text) const override;
  // <end_of_turn>, <eos>.
  std::vector<int32_t> stop_ids() const override;
  ToolCallSyntax tool_call_syntax() const override { return ToolCallSyntax::kJsonObject; }
  const char* family_name() const override { return "Gemma 3"; }

 private:
  enum Token { kBos, kEos, kTurnOpen, kTurnClose, kTokenCount };
  static constexpr const char* kTokenText[kTokenCount] = {"<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>"};

  explicit Gemma3ChatFormat(const Tokenizer& tokenizer) : tokenizer_(&tokenizer) {}

  const Tokenizer* tokenizer_;
  int32_t ids_[kTokenCount] = {};
};

}  // namespace temper::engine
