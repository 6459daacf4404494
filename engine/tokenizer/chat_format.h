// ChatFormat: a model family's conversation format — rendering a conversation to the prompt the
// model was trained on, and parsing what the model generates back into text, thinking and tool
// calls. Every consumer (ChatEngine, the HTTP server, the reply stream parsers, the roles'
// in-process client) holds a ChatFormat and never asks which family it speaks, but for the one
// thing the grammar layer needs: how tool calls are spelt (tool_call_syntax()).
//
// Two dialects implement it, one file each:
//   * Gemma 4 (gemma4_chat_format.h): <|turn>role ... <turn|>, a system role, thinking, and native
//     tool-call tokens (<|tool_call>call:NAME{...}<tool_call|>).
//   * Gemma 3 (gemma3_chat_format.h): <start_of_turn>user|model ... <end_of_turn>, no system role,
//     no thinking, no tool tokens: tools are declared as JSON in the first user turn and a call is
//     a reply that is exactly a JSON object {"name": ..., "arguments": {...}}.
// The family is read from the tokenizer's control tokens (Gemma 4's <|turn>, else Gemma 3's
// <start_of_turn>), or forced by the caller (ChatFamily).
//
// Untrusted text (user content, tool output, file contents) is encoded with special-token matching
// off in both dialects, so a literal control token's text in it cannot close a turn. Special-token
// ids come from the tokenizer file, never from constants.
//
// Thread safety: immutable after Create(); all methods are const; copies share one dialect.
// Ownership: holds a pointer to the Tokenizer it was created from, which must outlive it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
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

// A tool's result: any JSON value (each dialect says how it renders).
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
  // Offsets into `ids` where a turn ends (after its end-of-turn token and "\n": the system turn, each
  // message) or where Gemma 4's tool responses leave a model turn open, ascending, each in (0, ids.size()]. A later
  // prompt of the same conversation repeats everything before each of them, so the serving layer pins the prefix cache
  // there. Cutting the ids there never changes how text is tokenized: each offset sits between a control token or
  // newline and the next control token.
  std::vector<int64_t> message_ends;
};

// What the model generated, split apart.
struct ModelReply {
  std::string content;   // visible text, trimmed
  std::string thinking;  // the thought channel(s), trimmed; empty when the model did not think
  std::vector<ToolCall> tool_calls;
};

// Function names are written bare (Gemma 4 after "call:"; Gemma 3 inside its JSON, where the
// grammar spells them as literals), so they must be parseable back: letters, digits, '_', '-' and
// '.'. InvalidArgument naming `field` otherwise ("tools[0]: name 'a b' may hold only letters, digits,
// '_', '-' and '.'", "tools[0]: empty name").
Status CheckToolName(std::string_view name, std::string_view field);

// Looks up each of a format's control tokens by its text into ids[i] (the same length as texts).
// NotFound naming the first missing one: "tokenizer has no token '<|think|>' (needed by Gemma 4's
// chat format)", `family` being "Gemma 4".
Status LookUpControlTokens(const Tokenizer& tokenizer, std::span<const char* const> texts, std::string_view family,
                           std::span<int32_t> ids);

// How a format spells tool calls, for the grammar and reply-stream layers (engine/constrain,
// engine/serve), which cannot depend on a dialect's class.
enum class ToolCallSyntax {
  kGemma4Tokens,  // <|tool_call>call:NAME{ARGS}<tool_call|>, one or more per reply
  kJsonObject,    // the whole reply is {"name": NAME, "arguments": {...}}, or a JSON array of them
};

// Which conversation format to speak. kFromTokenizer: Gemma 4 when the tokenizer has <|turn>,
// else Gemma 3 when it has <start_of_turn>.
enum class ChatFamily { kFromTokenizer, kGemma4, kGemma3 };

// The format a model was trained on, by its config's model_type: "gemma3" and "gemma3_text" speak
// Gemma 3's, "gemma4" and "gemma4_text" Gemma 4's; anything else is left to the tokenizer.
ChatFamily ChatFamilyOfModelType(std::string_view model_type);

// The interface each conversation format implements (one class per file). Errors are each
// dialect's, documented in its header.
class ChatDialect {
 public:
  virtual ~ChatDialect() = default;
  virtual Result<RenderedPrompt> Render(const Conversation& conversation) const = 0;
  virtual Result<ModelReply> ParseReplyText(std::string_view text) const = 0;
  virtual std::vector<int32_t> stop_ids() const = 0;
  virtual ToolCallSyntax tool_call_syntax() const = 0;
  virtual const char* family_name() const = 0;  // "Gemma 4", "Gemma 3"
};

class ChatFormat {
 public:
  // Picks the dialect (see the top) and looks up its control tokens by text. Errors: NotFound
  // naming the first missing token, e.g. "tokenizer has no token '<|think|>' (needed by Gemma 4's
  // chat format)", or for kFromTokenizer a tokenizer with neither family's turn token.
  static Result<ChatFormat> Create(const Tokenizer& tokenizer, ChatFamily family = ChatFamily::kFromTokenizer);

  // Errors: InvalidArgument naming the message or tool, e.g. "messages[2] (user): tool calls belong
  // to model messages", "tools[0]: name 'a b' may hold only letters, digits, '_', '-' and '.'",
  // "messages[3].tool_calls[0]: arguments must be a JSON object".
  Result<RenderedPrompt> Render(const Conversation& conversation) const { return dialect_->Render(conversation); }

  // Parses generated ids (decoded with special tokens kept), which may end with a stop token.
  // Errors: OutOfRange for an id that is not a token; otherwise ParseReplyText's.
  Result<ModelReply> ParseReply(std::span<const int32_t> ids) const;
  // Errors: InvalidArgument naming the problem and its byte offset (Gemma 4: "tool call 1 at byte
  // 40: not closed with <tool_call|>"); Gemma 3's replies always parse (text, or a call).
  Result<ModelReply> ParseReplyText(std::string_view text) const { return dialect_->ParseReplyText(text); }

  // Tokens that end a generation (Gemma 4: <turn|>, <|tool_response>, <eos>; Gemma 3: <end_of_turn>,
  // <eos>).
  std::vector<int32_t> stop_ids() const { return dialect_->stop_ids(); }
  ToolCallSyntax tool_call_syntax() const { return dialect_->tool_call_syntax(); }
  const char* family_name() const { return dialect_->family_name(); }

 private:
  ChatFormat(const Tokenizer& tokenizer, std::shared_ptr<const ChatDialect> dialect)
      : tokenizer_(&tokenizer), dialect_(std::move(dialect)) {}

  const Tokenizer* tokenizer_;
  std::shared_ptr<const ChatDialect> dialect_;
};

}  // namespace temper::engine
