// ChatFormat: Gemma 4's conversation format — rendering a conversation to the prompt the model was
// trained on, and parsing what the model generates back into text, thinking and tool calls.
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
// Differences from the template, each deliberate:
//   * A model turn left open by tool responses (no content after them) is continued by the next
//     model message without a new <|turn>model header — which is how the model saw it while
//     generating — and closed with <turn|> if a non-model message follows. The template would open
//     a second model turn inside the first.
//   * `parameters` without a "type" still gets its closing brace (the template drops it).
//   * A JSON null renders as `null` (Jinja would print Python's `None`).
//
// Untrusted text (user content, tool output, file contents) is encoded with special-token matching
// off, so a literal "<turn|>" in it cannot close a turn; `ids` then differ from Encode(text) exactly
// where such strings occur.
//
// Special-token ids come from the tokenizer file, never from constants here.
//
// Thread safety: immutable after Create(); all methods are const. Ownership: holds a pointer to the
// Tokenizer it was created from, which must outlive it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "engine/tokenizer/tokenizer.h"

namespace temper::engine {

enum class ChatRole { kSystem, kUser, kModel };

// A function the model may call. `parameters` is a JSON Schema object ({"type": "object",
// "properties": {...}, "required": [...]}), or null for a function without arguments.
struct ToolDeclaration {
  std::string name;
  std::string description;
  nlohmann::json parameters;
};

struct ToolCall {
  std::string name;
  nlohmann::json arguments = nlohmann::json::object();  // always an object
};

// A tool's result. An object renders key by key; anything else renders as {value:...}.
struct ToolResponse {
  std::string name;
  nlohmann::json response;
};

struct ChatMessage {
  ChatRole role = ChatRole::kUser;
  std::string content;
  // Model messages only. `thinking` is replayed (in a thought channel) only for a message with tool
  // calls after the last user message: thoughts between tool calls stay visible within a turn and
  // are dropped from earlier turns, as Google recommends.
  std::string thinking;
  std::vector<ToolCall> tool_calls;
  std::vector<ToolResponse> tool_responses;  // the results of tool_calls, rendered right after them
};

struct Conversation {
  std::vector<ChatMessage> messages;
  std::vector<ToolDeclaration> tools;
  bool enable_thinking = false;
  // End with an open model turn for the model to complete. With thinking off, the prompt also
  // closes an empty thought channel so the model answers directly.
  bool add_generation_prompt = true;
};

struct RenderedPrompt {
  std::string text;          // the template's output, "<bos>" included
  std::vector<int32_t> ids;  // what the model is fed (<bos> first)
  // Offsets into `ids` where a turn ends (after its <turn|>\n: the system turn, each message) or
  // where tool responses leave a model turn open, ascending, each in (0, ids.size()]. A later prompt
  // of the same conversation repeats everything before each of them, so the serving layer pins the
  // prefix cache there. Cutting the ids there never changes how text is tokenized: each offset sits
  // between a control token or newline and the next control token.
  std::vector<int64_t> message_ends;
};

// What the model generated, split apart.
struct ModelReply {
  std::string content;   // visible text, trimmed
  std::string thinking;  // the thought channel(s), trimmed; empty when the model did not think
  std::vector<ToolCall> tool_calls;
};

// Function names are written bare after "call:" and "declaration:", so they must be parseable
// back: letters, digits, '_', '-' and '.'. InvalidArgument naming `field` otherwise ("tools[0]:
// name 'a b' may hold only letters, digits, '_', '-' and '.'", "tools[0]: empty name").
Status CheckToolName(std::string_view name, std::string_view field);

class ChatFormat {
 public:
  // Looks up every Gemma 4 control token by its text. Errors: NotFound naming the first missing
  // token, e.g. "tokenizer has no token '<|think|>' (needed by Gemma 4's chat format)".
  static Result<ChatFormat> Create(const Tokenizer& tokenizer);

  // Errors: InvalidArgument naming the message or tool, e.g. "messages[2] (user): tool calls belong
  // to model messages", "tools[0]: name 'a b' may hold only letters, digits, '_', '-' and '.'",
  // "messages[3].tool_calls[0]: arguments must be a JSON object".
  Result<RenderedPrompt> Render(const Conversation& conversation) const;

  // Parses generated ids (decoded with special tokens kept), which may end with a stop token.
  // Errors: OutOfRange for an id that is not a token; otherwise ParseReplyText's.
  Result<ModelReply> ParseReply(std::span<const int32_t> ids) const;
  // Errors: InvalidArgument naming the problem and its byte offset, e.g. "tool call 1 at byte 40:
  // not closed with <tool_call|>", "tool call 0 at byte 12: argument 'path': unterminated string".
  Result<ModelReply> ParseReplyText(std::string_view text) const;

  // Tokens that end a generation: <turn|> (turn done), <|tool_response> (the model waits for tool
  // results), <eos>.
  std::vector<int32_t> stop_ids() const;

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

  explicit ChatFormat(const Tokenizer& tokenizer) : tokenizer_(&tokenizer) {}

  const Tokenizer* tokenizer_;
  int32_t ids_[kTokenCount] = {};
};

}  // namespace temper::engine
