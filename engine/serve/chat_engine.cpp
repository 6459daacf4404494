#include "engine/serve/chat_engine.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "engine/constrain/json_schema_grammar.h"
#include "engine/constrain/json_tool_call_grammar.h"
#include "engine/constrain/schema_refs.h"
#include "engine/constrain/tool_call_grammar.h"

namespace temper::engine {

const char* ChatFinishName(ChatFinish finish) {
  switch (finish) {
    case ChatFinish::kNone:
      return "";
    case ChatFinish::kStop:
      return "stop";
    case ChatFinish::kLength:
      return "length";
    case ChatFinish::kToolCalls:
      return "tool_calls";
    case ChatFinish::kCancelled:
      return "cancelled";
    case ChatFinish::kError:
      return "error";
  }
  return "";
}

ChatStream::ChatStream(std::shared_ptr<RequestStream> stream, std::unique_ptr<ReplyStream> parser,
                       int64_t prompt_tokens, bool one_tool_call, int64_t text_cut_at)
    : stream_(std::move(stream)),
      parser_(std::move(parser)),
      prompt_tokens_(prompt_tokens),
      one_tool_call_(one_tool_call),
      text_cut_at_(text_cut_at) {}

ChatEvent ChatStream::Convert(StreamEvent event) {
  ChatEvent out;
  out.tokens = std::move(event.tokens);
  out.logprobs = std::move(event.logprobs);
  auto take = [&](Result<ReplyDelta> delta) {
    if (!delta.ok()) {
      if (!failed_) {
        failed_ = true;
        failure_ = delta.status().WithContext("reply parser");
      }
      return;
    }
    out.content += delta->content;
    out.thinking += delta->thinking;
    for (ToolCall& call : delta->tool_calls) {
      out.tool_calls.push_back(std::move(call));
      if (one_tool_call_) {
        // The one call allowed: nothing after it is the reply (the scheduler may have decoded a
        // few more tokens before it sees the cancel).
        ended_at_call_ = true;
        stream_->Cancel();
        return;
      }
    }
  };
  if (!failed_ && !ended_at_call_ && !event.text.empty()) {
    take(parser_->Push(event.text));
    // Generating past a parser failure is wasted work: stop it; its end is reported as the error.
    if (failed_) stream_->Cancel();
  }
  if (event.finish == FinishReason::kNone) return out;

  out.usage = event.usage;
  if (ended_at_call_) {
    out.finish = ChatFinish::kToolCalls;
    return out;
  }
  if (failed_) {
    out.finish = ChatFinish::kError;
    out.error = failure_;
    return out;
  }
  switch (event.finish) {
    case FinishReason::kStop:
      take(parser_->Finish());
      if (failed_) {
        out.finish = ChatFinish::kError;
        out.error = failure_;
      } else {
        if (parser_->tool_call_count() > 0) {
          out.finish = ChatFinish::kToolCalls;
        } else if (text_cut_at_ > 0 && event.usage.completion_tokens >= text_cut_at_) {
          out.finish = ChatFinish::kLength;
        } else {
          out.finish = ChatFinish::kStop;
        }
      }
      break;
    case FinishReason::kLength:
      // A tool call or thought cut off by max_tokens comes back as its text, noted as unclosed.
      take(parser_->Finish());
      if (failed_) {
        out.finish = ChatFinish::kError;
        out.error = failure_;
      } else {
        out.finish = ChatFinish::kLength;
      }
      break;
    case FinishReason::kCancelled:
      out.finish = ChatFinish::kCancelled;
      break;
    case FinishReason::kError:
    case FinishReason::kNone:
      out.finish = ChatFinish::kError;
      out.error = event.error;
      break;
  }
  if (!parser_->parse_error().ok()) out.parse_error = parser_->parse_error().message();
  return out;
}

std::optional<ChatEvent> ChatStream::Next() {
  std::lock_guard lock(mu_);
  while (true) {
    std::optional<StreamEvent> e = stream_->Next();
    if (!e) return std::nullopt;
    ChatEvent c = Convert(std::move(*e));
    if (!c.empty()) return c;
  }
}

std::optional<ChatEvent> ChatStream::NextFor(std::chrono::milliseconds timeout) {
  std::lock_guard lock(mu_);
  std::optional<StreamEvent> e = stream_->NextFor(timeout);
  if (!e) return std::nullopt;
  return Convert(std::move(*e));
}

void ChatEvent::Append(ChatEvent later) {
  tokens.insert(tokens.end(), later.tokens.begin(), later.tokens.end());
  logprobs.insert(logprobs.end(), std::make_move_iterator(later.logprobs.begin()),
                  std::make_move_iterator(later.logprobs.end()));
  content += later.content;
  thinking += later.thinking;
  for (ToolCall& call : later.tool_calls) tool_calls.push_back(std::move(call));
  if (later.finish != ChatFinish::kNone) {
    finish = later.finish;
    error = std::move(later.error);
    usage = later.usage;
    parse_error = std::move(later.parse_error);
  }
}

ChatEvent ChatStream::Wait() {
  ChatEvent all;
  while (std::optional<ChatEvent> e = Next()) all.Append(std::move(*e));
  return all;
}

ChatEngine::ChatEngine(const Tokenizer& tokenizer, ChatFormat format, std::vector<int32_t> stop_ids)
    : tokenizer_(tokenizer), format_(std::move(format)), stop_ids_(std::move(stop_ids)), detokenizer_(tokenizer) {}

Result<std::unique_ptr<ChatEngine>> ChatEngine::Create(Backend& backend, const Tokenizer& tokenizer,
                                                       SchedulerOptions options, const Logger& log) {
  // The model's family decides the format, so a tokenizer of the other family is refused here
  // rather than spoken to the model.
  const std::string& model_type = backend.config().model_type;
  Result<ChatFormat> format = ChatFormat::Create(tokenizer, ChatFamilyOfModelType(model_type));
  if (!format.ok()) return format.status().WithContext(fmt::format("the chat format of a '{}' model", model_type));
  std::vector<int32_t> stops = format->stop_ids();
  for (int64_t id : backend.config().eos_token_ids) {
    if (std::find(stops.begin(), stops.end(), id) == stops.end()) stops.push_back(static_cast<int32_t>(id));
  }
  std::unique_ptr<ChatEngine> engine(new ChatEngine(tokenizer, std::move(*format), std::move(stops)));
  options.detokenizer = &engine->detokenizer_;
  TEMPER_ASSIGN_OR_RETURN(engine->scheduler_, Scheduler::Create(backend, options, log));
  return engine;
}

Result<RenderedPrompt> ChatEngine::RenderPrompt(Conversation conversation) const {
  conversation.add_generation_prompt = true;
  // The chat template renders a tool's parameters property by property and knows no $ref: they are
  // written out (a required call's grammar compiles them as they came, schema_refs.h).
  for (size_t i = 0; i < conversation.tools.size(); ++i) {
    ToolDeclaration& tool = conversation.tools[i];
    TEMPER_ASSIGN_OR_RETURN(tool.parameters,
                            RenderableToolSchema(tool.parameters, fmt::format("tools[{}].parameters", i)));
  }
  return format_.Render(conversation);
}

int64_t ChatEngine::CountTokens(std::string_view text) const {
  return static_cast<int64_t>(tokenizer_.Encode(text, EncodeOptions{.match_special_tokens = false}).size());
}

Result<std::shared_ptr<const TokenVocabulary>> ChatEngine::vocabulary() {
  std::lock_guard<std::mutex> lock(vocabulary_mu_);
  if (!vocabulary_) {
    // Gemma 3's calls are plain JSON text: no special token is ever a grammar's to write.
    const std::span<const MarkerToken> markers = format_.tool_call_syntax() == ToolCallSyntax::kGemma4Tokens
                                                     ? std::span<const MarkerToken>(kGemmaMarkerTokens)
                                                     : std::span<const MarkerToken>();
    TEMPER_ASSIGN_OR_RETURN(
        TokenVocabulary words,
        TokenVocabulary::FromTokenizer(tokenizer_, stop_ids_, markers, scheduler_->backend().config().vocab_size));
    vocabulary_ = std::make_shared<const TokenVocabulary>(std::move(words));
  }
  return vocabulary_;
}

Result<std::shared_ptr<GrammarMasks>> ChatEngine::MasksFor(const std::string& key,
                                                           std::shared_ptr<const Grammar> grammar) {
  TEMPER_ASSIGN_OR_RETURN(std::shared_ptr<const TokenVocabulary> words, vocabulary());
  std::lock_guard<std::mutex> lock(vocabulary_mu_);
  for (auto it = masks_.begin(); it != masks_.end(); ++it) {
    if (it->first != key) continue;
    masks_.splice(masks_.begin(), masks_, it);
    return masks_.front().second;
  }
  constexpr size_t kGrammarsKept = 64;
  if (masks_.size() >= kGrammarsKept) masks_.pop_back();
  masks_.emplace_front(key, std::make_shared<GrammarMasks>(std::move(grammar), std::move(words)));
  return masks_.front().second;
}

namespace {

// The grammar of a reply of tool calls in `syntax`, of every tool in `tools` or of `function` alone
// (with `allow_text`, Gemma 3's text-or-call reply; `allow_several`, its array of calls); keyed by
// what it is made of.
Result<std::pair<std::shared_ptr<const Grammar>, std::string>> ToolCallConstraint(
    ToolCallSyntax syntax, const std::vector<ToolDeclaration>& tools, const std::string& function, bool allow_text,
    bool allow_several) {
  std::vector<ToolSchema> schemas;
  for (const ToolDeclaration& t : tools) {
    if (function.empty() || t.name == function) schemas.push_back({t.name, nlohmann::ordered_json(t.parameters)});
  }
  if (tools.empty()) return Status::InvalidArgument("tool_choice: a required tool call needs tools to call");
  if (schemas.empty()) return Status::InvalidArgument(fmt::format("tool_choice: no tool is named '{}'", function));
  nlohmann::json key = nlohmann::json::array();
  for (const ToolSchema& t : schemas) key.push_back({t.name, nlohmann::json(t.parameters)});
  if (syntax == ToolCallSyntax::kGemma4Tokens) {
    TEMPER_ASSIGN_OR_RETURN(Grammar grammar, ToolCallGrammar(schemas));
    return std::make_pair(std::make_shared<const Grammar>(std::move(grammar)), "tool calls " + key.dump());
  }
  TEMPER_ASSIGN_OR_RETURN(Grammar grammar,
                          JsonToolCallGrammar(schemas, {.allow_text = allow_text, .allow_several = allow_several}));
  return std::make_pair(
      std::make_shared<const Grammar>(std::move(grammar)),
      fmt::format("json tool calls{}{} {}", allow_text ? " or text" : "", allow_several ? "" : " (one)", key.dump()));
}

// The grammar of a reply that keeps to `schema`, and its key (the schema's text), or
// InvalidArgument "answer_schema: ..." naming what the grammar cannot honour and where.
Result<std::pair<std::shared_ptr<const Grammar>, std::string>> AnswerSchemaConstraint(
    const nlohmann::ordered_json& schema) {
  Result<Grammar> grammar = JsonSchemaGrammar(schema);
  if (!grammar.ok()) return grammar.status().WithContext("answer_schema");
  return std::make_pair(std::make_shared<const Grammar>(std::move(*grammar)), schema.dump());
}

}  // namespace

Result<std::shared_ptr<ChatStream>> ChatEngine::Submit(ChatRequest request) {
  const ToolCallSyntax syntax = format_.tool_call_syntax();
  const std::vector<ToolDeclaration>& tools = request.conversation.tools;
  // The reply's grammar, and the key its masks are shared under; none: unconstrained.
  std::shared_ptr<const Grammar> grammar;
  std::string grammar_key;
  const bool answer_schema = !request.answer_schema.is_null();
  // A reply under the caller's own schema is its content, whatever it spells.
  std::vector<std::string> callable;
  if (!answer_schema) {
    for (const ToolDeclaration& t : tools) callable.push_back(t.name);
  }
  bool text_or_call = false;
  if (answer_schema) {
    if (request.tool_choice == ToolChoice::kRequired) {
      return Status::InvalidArgument(
          "answer_schema: a required tool call and a schema for the reply cannot be combined");
    }
    TEMPER_ASSIGN_OR_RETURN(std::tie(grammar, grammar_key), AnswerSchemaConstraint(request.answer_schema));
  } else if (request.tool_choice == ToolChoice::kRequired) {
    TEMPER_ASSIGN_OR_RETURN(std::tie(grammar, grammar_key),
                            ToolCallConstraint(syntax, tools, request.required_function,
                                               /*allow_text=*/false, request.parallel_tool_calls));
  } else if (syntax == ToolCallSyntax::kJsonObject && !tools.empty() && request.constrain_auto_tool_calls) {
    TEMPER_ASSIGN_OR_RETURN(std::tie(grammar, grammar_key),
                            ToolCallConstraint(syntax, tools, "", /*allow_text=*/true, request.parallel_tool_calls));
    text_or_call = true;
  }
  if (grammar) request.conversation.enable_thinking = false;
  TEMPER_ASSIGN_OR_RETURN(RenderedPrompt prompt, RenderPrompt(std::move(request.conversation)));
  GenerateRequest g;
  const auto prompt_tokens = static_cast<int64_t>(prompt.ids.size());
  g.prompt = std::move(prompt.ids);
  g.checkpoints = std::move(prompt.message_ends);
  g.sampling = std::move(request.sampling);
  for (int32_t id : stop_ids_) {
    if (std::find(g.sampling.stop_tokens.begin(), g.sampling.stop_tokens.end(), id) == g.sampling.stop_tokens.end()) {
      g.sampling.stop_tokens.push_back(id);
    }
  }
  g.logprobs = request.logprobs;
  g.max_tokens = request.max_tokens;
  if (g.max_tokens == 0) {
    // At least 1, so that a prompt that fills the context is refused by Submit naming its length.
    g.max_tokens = std::max<int64_t>(1, scheduler_->backend().context_limit() - prompt_tokens);
  }
  g.stop_strings = std::move(request.stop_strings);
  if (grammar) {
    TEMPER_ASSIGN_OR_RETURN(g.grammar, MasksFor(grammar_key, std::move(grammar)));
  }
  const int64_t text_cut_at = text_or_call ? g.max_tokens : 0;
  TEMPER_ASSIGN_OR_RETURN(std::shared_ptr<RequestStream> stream, scheduler_->Submit(std::move(g)));
  return std::make_shared<ChatStream>(std::move(stream), NewReplyStream(format_, std::move(callable)), prompt_tokens,
                                      !request.parallel_tool_calls, text_cut_at);
}

}  // namespace temper::engine
