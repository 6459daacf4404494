// The chat engine on the tiny fixture model with a 512-id test tokenizer that has Gemma 4's control
// tokens: what it streams must be the reply parsed from exactly the tokens the scheduler generates
// for the rendered prompt, concurrency and the prefix cache must not change any output, and a
// conversation's next turn must reuse the cached prefix up to a message boundary.
#include <algorithm>
#include <thread>

#include <catch2/catch.hpp>

#include "engine/serve/chat_engine.h"
#include "engine/serving_fixture.h"

namespace temper::engine::testing {
namespace {

std::unique_ptr<ChatEngine> MakeChatEngine(Backend& backend, SchedulerOptions options = {}) {
  auto e = ChatEngine::Create(backend, ChatTokenizer(), options, QuietLog());
  if (!e.ok()) FAIL(e.status().ToString());
  return std::move(*e);
}

ChatRequest Ask(const std::string& question, int64_t max_tokens = 12) {
  ChatRequest r;
  r.conversation.messages.push_back({.role = ChatRole::kSystem, .content = "Be brief."});
  r.conversation.messages.push_back({.role = ChatRole::kUser, .content = question});
  r.max_tokens = max_tokens;
  return r;
}

ChatEvent RunChat(ChatEngine& engine, ChatRequest request) {
  auto stream = engine.Submit(std::move(request));
  if (!stream.ok()) FAIL(stream.status().ToString());
  return (*stream)->Wait();
}

ChatFormat Format() {
  auto f = ChatFormat::Create(ChatTokenizer());
  if (!f.ok()) FAIL(f.status().ToString());
  return std::move(*f);
}

TEST_CASE("a chat request streams the reply parsed from the greedy tokens of its rendered prompt", "[engine][chat]") {
  auto backend = ServingBackend();
  auto engine = MakeChatEngine(*backend);
  const ChatRequest request = Ask("What is 2+2?", 16);

  // The same prompt through the scheduler alone gives the tokens to expect.
  auto prompt = engine->RenderPrompt(request.conversation);
  REQUIRE(prompt.ok());
  GenerateRequest raw = Greedy(prompt->ids, 16);
  raw.sampling.stop_tokens = Format().stop_ids();
  const StreamEvent expected = RunOne(engine->scheduler(), raw);

  // The stream merges tokens the reader has not taken yet into one event, so a reader that the
  // machine's load keeps off the CPU while all 16 tokens decode sees one event. Streaming shows as
  // more than one event in at least one of a few runs; every run must give the same reply.
  std::vector<int32_t> tokens;
  std::string content, thinking;
  ChatEvent last;
  int most_events = 0;
  for (int run = 0; run < 8 && most_events < 2; ++run) {
    auto stream = engine->Submit(request);
    REQUIRE(stream.ok());
    tokens.clear();
    content.clear();
    thinking.clear();
    int events = 0;
    while (auto e = (*stream)->Next()) {
      ++events;
      tokens.insert(tokens.end(), e->tokens.begin(), e->tokens.end());
      content += e->content;
      thinking += e->thinking;
      last = *e;
    }
    REQUIRE(tokens == expected.tokens);
    most_events = std::max(most_events, events);
  }
  CHECK(most_events > 1);  // streamed, not one event at the end
  // Decoding the tokens and parsing the whole reply gives what was streamed.
  auto decoded = ChatTokenizer().Decode(tokens);
  REQUIRE(decoded.ok());
  auto reply = Format().ParseReplyText(*decoded);
  if (reply.ok()) {
    CHECK(content == reply->content);
    CHECK(thinking == reply->thinking);
    CHECK(last.finish == (expected.finish == FinishReason::kLength ? ChatFinish::kLength : ChatFinish::kStop));
  } else {
    // The random model wrote something the format rejects: its text comes back, and why.
    CHECK(last.finish != ChatFinish::kError);
    CHECK(last.parse_error == reply.status().message());
    CHECK_FALSE(content.empty());
  }
  CHECK(last.usage.prompt_tokens == static_cast<int64_t>(prompt->ids.size()));
  CHECK(last.usage.completion_tokens == static_cast<int64_t>(tokens.size()));
  CHECK(last.usage.total_seconds > 0);
  CHECK(last.usage.ttft_seconds > 0);
}

TEST_CASE("concurrent chat requests give the same replies as each request alone", "[engine][chat]") {
  std::vector<ChatRequest> requests;
  for (int i = 0; i < 4; ++i) {
    ChatRequest r = Ask("Question number " + std::to_string(i) + "?", 10 + i);
    if (i % 2 == 1) {
      r.sampling.temperature = 0.9f;
      r.sampling.top_k = 40;
      r.sampling.seed = 7 + static_cast<uint64_t>(i);
    }
    requests.push_back(r);
  }
  std::vector<ChatEvent> alone;
  {
    auto backend = ServingBackend();
    SchedulerOptions options;
    options.prefix_cache = false;
    auto engine = MakeChatEngine(*backend, options);
    for (const ChatRequest& r : requests) alone.push_back(RunChat(*engine, r));
  }
  auto backend = ServingBackend();
  SchedulerOptions options;
  options.max_batch_tokens = 16;  // chunked prefill interleaves with the others' decoding
  auto engine = MakeChatEngine(*backend, options);
  std::vector<ChatEvent> together(requests.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < requests.size(); ++i) {
    threads.emplace_back([&, i] { together[i] = RunChat(*engine, requests[i]); });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < requests.size(); ++i) {
    INFO("request " << i);
    CHECK(together[i].tokens == alone[i].tokens);
    CHECK(together[i].content == alone[i].content);
    CHECK(together[i].finish == alone[i].finish);
  }
}

TEST_CASE("a conversation's second turn reuses the cached prefix and replies as if uncached", "[engine][chat]") {
  ChatRequest first = Ask("Name a colour.", 8);
  auto backend = ServingBackend();
  auto engine = MakeChatEngine(*backend);
  const ChatEvent reply = RunChat(*engine, first);
  REQUIRE(reply.finish != ChatFinish::kError);
  CHECK(reply.usage.cached_prompt_tokens == 0);

  ChatRequest second = first;
  second.conversation.messages.push_back({.role = ChatRole::kModel, .content = reply.content});
  second.conversation.messages.push_back({.role = ChatRole::kUser, .content = "Another?"});
  const ChatEvent warm = RunChat(*engine, second);

  // The first prompt pinned the end of its user message, which the second prompt repeats.
  auto first_prompt = engine->RenderPrompt(first.conversation);
  REQUIRE(first_prompt.ok());
  REQUIRE(first_prompt->message_ends.size() == 2);
  CHECK(warm.usage.cached_prompt_tokens >= first_prompt->message_ends.back());

  auto cold_backend = ServingBackend();
  SchedulerOptions options;
  options.prefix_cache = false;
  auto cold_engine = MakeChatEngine(*cold_backend, options);
  const ChatEvent cold = RunChat(*cold_engine, second);
  CHECK(cold.usage.cached_prompt_tokens == 0);
  CHECK(warm.tokens == cold.tokens);
  CHECK(warm.content == cold.content);
}

TEST_CASE("chat requests are checked, cancellable, and tokens can be counted", "[engine][chat]") {
  auto backend = ServingBackend();
  auto engine = MakeChatEngine(*backend);

  ChatRequest bad = Ask("hi");
  bad.conversation.messages[1].tool_calls.push_back({.name = "run"});
  auto refused = engine->Submit(bad);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(refused.status().message(), Catch::Contains("messages[1] (user)"));

  auto too_long = engine->Submit(Ask(std::string(300, 'x')));
  REQUIRE_FALSE(too_long.ok());
  CHECK(too_long.status().code() == StatusCode::kOutOfRange);
  CHECK_THAT(too_long.status().message(), Catch::Contains("context limit"));

  ChatRequest sampling = Ask("hi");
  sampling.sampling.top_p = 0;
  auto bad_sampling = engine->Submit(sampling);
  REQUIRE_FALSE(bad_sampling.ok());
  CHECK_THAT(bad_sampling.status().message(), Catch::Contains("top_p"));

  auto stream = engine->Submit(Ask("Count to a hundred.", 200));
  REQUIRE(stream.ok());
  (*stream)->Cancel();
  const ChatEvent cancelled = (*stream)->Wait();
  CHECK(cancelled.finish == ChatFinish::kCancelled);

  // Content is counted as ChatFormat encodes it: a control token's text is ordinary text there.
  CHECK(engine->CountTokens("") == 0);
  CHECK(engine->CountTokens("user") == static_cast<int64_t>(ChatTokenizer().Encode("user").size()));
  CHECK(engine->CountTokens("<turn|>") > 1);
}

TEST_CASE("the engine compiles a request's answer schema: the reply keeps to it, and a bad one is named",
          "[engine][chat][constrain]") {
  auto backend = ServingBackend();
  auto engine = MakeChatEngine(*backend);

  // The random model's reply, under the schema's grammar, is one of the schema's values.
  ChatRequest verdict = Ask("Pass or fail?", 16);
  verdict.answer_schema = nlohmann::ordered_json::parse(R"({"enum": ["pass", "fail"]})");
  const ChatEvent reply = RunChat(*engine, verdict);
  INFO(reply.content);
  REQUIRE(reply.finish == ChatFinish::kStop);
  CHECK((reply.content == R"("pass")" || reply.content == R"("fail")"));

  // A schema the grammar cannot honour is refused before anything runs, naming what and where.
  ChatRequest lookahead = Ask("hi");
  lookahead.answer_schema = {{"type", "string"}, {"pattern", "(?=a)"}};
  auto refused = engine->Submit(lookahead);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == StatusCode::kInvalidArgument);
  CHECK(refused.status().message() == "answer_schema: schema/pattern: lookahead '(?=' at offset 0 is not supported");

  ChatRequest with_call = Ask("hi");
  with_call.conversation.tools.push_back({"run", "runs a command", {{"type", "object"}}});
  with_call.tool_choice = ToolChoice::kRequired;
  with_call.answer_schema = {{"type", "object"}};
  auto both = engine->Submit(with_call);
  REQUIRE_FALSE(both.ok());
  CHECK(both.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(both.status().message(), Catch::StartsWith("answer_schema: a required tool call"));
}

}  // namespace
}  // namespace temper::engine::testing
