// ChatEngine: the in-process chat API. A chat request (messages, tools, sampling, limits) becomes a
// stream of events (visible text, thinking, complete tool calls, a finish reason, usage). The
// roles' `inprocess` endpoint and `/v1/chat/completions` both call it; one engine serves every
// caller that maps to the model.
//
// A request is rendered with the tokenizer's chat format (ChatFormat: Gemma 4's, or Gemma 3's),
// submitted to the scheduler with the format's stop tokens and a prefix-cache checkpoint at every
// message boundary (so the next turn of a conversation, which resends all of this one, prefills
// only what is new), and the generated text is split by the format's ReplyStream as it streams.
//
// Tool calls under the grammar, in the format's syntax: Gemma 4's native calls (ToolCallGrammar);
// for Gemma 3, whose calls are JSON, JsonToolCallGrammar — with tool_choice auto too (the reply is
// text or a call, so a reply that starts a call completes one), unless the request turns that off
// or constrains the reply with its own grammar.
//
// Finish reasons: kStop (the turn ended, or a stop string matched), kLength (max_tokens; a tool
// call cut off there is dropped), kToolCalls (the model called tools and now waits for their
// results), kCancelled, kError (a malformed tool call or reply, named in `error` with its byte
// offset; or an engine failure). Stop strings apply to the raw reply text, control tokens included,
// as the scheduler sees it.
//
// Thread safety: Submit, CountTokens, RenderPrompt and metrics may be called from any thread.
// A ChatStream is read by one thread at a time; Cancel may be called from any thread.
// Ownership: borrows the backend, tokenizer and logger (all must outlive the engine); owns its
// scheduler. Destruction cancels every request.
#pragma once

#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/log.h"
#include "common/status.h"
#include "engine/backend.h"
#include "engine/constrain/token_mask.h"
#include "engine/serve/reply_stream.h"
#include "engine/serve/scheduler.h"
#include "engine/tokenizer/chat_format.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/tokenizer_detokenizer.h"

namespace temper::engine {

// kAuto: the model answers or calls tools, as it likes; kRequired: it calls tools (see ChatRequest).
enum class ToolChoice { kAuto, kRequired };

struct ChatRequest {
  Conversation conversation;  // messages, tools, enable_thinking; add_generation_prompt is forced on
  SamplingParams sampling;    // stop_tokens are added to the format's
  int64_t max_tokens = 1024;  // generated tokens; 0: as many as the context leaves after the prompt
  std::vector<std::string> stop_strings;
  // When not null, the reply is JSON that keeps to this schema (response_format's json_schema, a
  // role's answer schema), written as plain content under the grammar Submit compiles from it
  // (JsonSchemaGrammar): thinking is turned off for the request. Ordered, so properties are
  // generated in the order the schema lists them. Requests with the same schema share its masks.
  nlohmann::ordered_json answer_schema;
  // kRequired: the reply is one or more tool calls and nothing else, their arguments keeping to
  // the tools' schemas (ToolCallGrammar; JsonToolCallGrammar for Gemma 3) — of any tool offered, or
  // of `required_function` alone when it is set. Not together with `answer_schema`.
  ToolChoice tool_choice = ToolChoice::kAuto;
  std::string required_function;
  // false: at most one tool call (OpenAI's parallel_tool_calls). Generation is cancelled as soon as
  // the first call is parsed and the reply ends there with kToolCalls; what the scheduler decoded
  // after it is dropped. Gemma 3's grammar then allows one JSON call, not an array.
  bool parallel_tool_calls = true;
  // Gemma 3 (JSON calls), tools offered, kAuto and no `answer_schema`: the reply is text or a call under
  // JsonToolCallGrammar (allow_text). false leaves such a reply unconstrained.
  bool constrain_auto_tool_calls = true;
  int logprobs = -1;  // GenerateRequest::logprobs
};

enum class ChatFinish { kNone, kStop, kLength, kToolCalls, kCancelled, kError };
// "stop", "length", "tool_calls", "cancelled", "error" ("" for kNone): OpenAI's names.
const char* ChatFinishName(ChatFinish finish);

// What a request produced since the previous event. The last event has finish set.
struct ChatEvent {
  std::vector<int32_t> tokens;          // generated ids, stop token included
  std::vector<TokenLogprobs> logprobs;  // with ChatRequest::logprobs >= 0: StreamEvent::logprobs
  std::string content;                  // visible text
  std::string thinking;                 // thought-channel text
  std::vector<ToolCall> tool_calls;     // complete calls, in order
  ChatFinish finish = ChatFinish::kNone;
  Status error;        // with kError
  RequestUsage usage;  // with a finish: prompt, cached prompt and completion tokens, timings
  // With a finish: why the reply is plain content from some point on (it broke the chat format
  // there: a malformed tool call, a stray control token; ReplyStream::parse_error), or "".
  std::string parse_error;
  bool empty() const {
    return tokens.empty() && content.empty() && thinking.empty() && tool_calls.empty() && finish == ChatFinish::kNone;
  }
  // Adds what `later` produced after this event (its finish, error, usage and parse_error if it
  // has a finish).
  void Append(ChatEvent later);
};

// The consumer's end of one chat request.
class ChatStream {
 public:
  // Built by ChatEngine::Submit. `parser` borrows the engine's ChatFormat: read a stream only while
  // its engine lives.
  // `text_cut_at`: under Gemma 3's text-or-call grammar, the request's max_tokens (0 otherwise);
  // see text_cut_at_.
  ChatStream(std::shared_ptr<RequestStream> stream, std::unique_ptr<ReplyStream> parser, int64_t prompt_tokens,
             bool one_tool_call = false, int64_t text_cut_at = 0);
  // Blocks until there is something new; nullopt after the final event was returned.
  std::optional<ChatEvent> Next();
  // As Next, but returns an empty event after `timeout` with nothing new.
  std::optional<ChatEvent> NextFor(std::chrono::milliseconds timeout);
  // Reads to the end: everything merged into one event.
  ChatEvent Wait();
  // Stops generation; the stream ends with kCancelled. Idempotent, any thread.
  void Cancel() { stream_->Cancel(); }
  int64_t prompt_tokens() const { return prompt_tokens_; }

 private:
  ChatEvent Convert(StreamEvent event);

  std::mutex mu_;  // one reader at a time
  std::shared_ptr<RequestStream> stream_;
  std::unique_ptr<ReplyStream> parser_;
  int64_t prompt_tokens_;
  bool failed_ = false;  // the parser failed; the request was cancelled and its end is an error
  Status failure_;
  const bool one_tool_call_;    // ChatRequest::parallel_tool_calls is false
  bool ended_at_call_ = false;  // that one call arrived; the request was cancelled there
  // A grammar ends a reply in time with a stop token in its last slot (a constrained reply ends
  // whole). Under the text-or-call grammar a text reply that fills every slot was cut by
  // max_tokens, so it finishes kLength, as it would without the grammar.
  const int64_t text_cut_at_;
};

class ChatEngine {
 public:
  // Picks the chat format by the model's model_type (else from the tokenizer) and looks up its
  // tokens (NotFound naming a missing one: a tokenizer of another family) and starts a
  // scheduler with `options` (its detokenizer is replaced by the tokenizer's). Errors: Scheduler::Create's.
  static Result<std::unique_ptr<ChatEngine>> Create(Backend& backend, const Tokenizer& tokenizer,
                                                    SchedulerOptions options, const Logger& log);
  ChatEngine(const ChatEngine&) = delete;
  ChatEngine& operator=(const ChatEngine&) = delete;

  // Renders and queues a request. Errors: InvalidArgument naming the message, tool or parameter
  // (ChatFormat::Render's and Scheduler::Submit's; a required tool call with no tools, or naming a
  // tool not offered; a tool schema the grammar cannot honour, by path; an answer_schema the
  // grammar cannot honour, or one with a required tool call, as "answer_schema: <what and where>",
  // checked before anything else of the request), OutOfRange when the prompt plus max_tokens do
  // not fit the context ("the prompt's N tokens plus max_tokens M exceed the context limit ..."),
  // ResourceExhausted when the queue is full.
  Result<std::shared_ptr<ChatStream>> Submit(ChatRequest request);

  // Token count of plain text as it would appear inside a message (encoded with special-token
  // matching off, as ChatFormat encodes content).
  int64_t CountTokens(std::string_view text) const;
  // The prompt a conversation renders to (with the generation prompt; the tools' local $refs
  // written out, RenderableToolSchema), e.g. to count its tokens.
  Result<RenderedPrompt> RenderPrompt(Conversation conversation) const;

  // The scheduler, shared with token-level callers (/v1/completions).
  Scheduler& scheduler() { return *scheduler_; }
  const Tokenizer& tokenizer() const { return tokenizer_; }
  const ChatFormat& format() const { return format_; }
  // The tokenizer's vocabulary as constrained decoding sees it: the ids inside the model's
  // vocabulary, the format's stop tokens ending a grammar, Gemma 4's tool-call tokens as marker
  // bytes (kGemmaMarkerTokens; Gemma 3 has none). Built at the first request that needs it (about 0.2 s) and kept.
  // NotFound when a marker token lies past the model's vocabulary.
  Result<std::shared_ptr<const TokenVocabulary>> vocabulary();
  // The shared masks of the grammar named `key` (made from `grammar` the first time; the 64 most
  // recently used are kept). Errors: vocabulary()'s.
  Result<std::shared_ptr<GrammarMasks>> MasksFor(const std::string& key, std::shared_ptr<const Grammar> grammar);
  SchedulerMetrics metrics() const { return scheduler_->metrics(); }

 private:
  ChatEngine(const Tokenizer& tokenizer, ChatFormat format, std::vector<int32_t> stop_ids);

  const Tokenizer& tokenizer_;
  ChatFormat format_;
  std::vector<int32_t> stop_ids_;  // the format's and the model config's
  std::mutex vocabulary_mu_;
  std::shared_ptr<const TokenVocabulary> vocabulary_;                       // guarded by vocabulary_mu_
  std::list<std::pair<std::string, std::shared_ptr<GrammarMasks>>> masks_;  // recent first; vocabulary_mu_
  TokenizerDetokenizer detokenizer_;
  std::unique_ptr<Scheduler> scheduler_;  // last: destroyed first, while the detokenizer lives
};

}  // namespace temper::engine
