// The streaming reply parser must agree with ChatFormat::ParseReplyText however the text arrives
// (whole, per character, in odd chunks, per token from the tokenizer's stream decoder): the same
// content, thinking and tool calls, and the same words for malformed tool calls. These tests drive
// it with written replies, because the random tiny model never writes a tool call on its own.
#include <catch2/catch.hpp>

#include "engine/serve/reply_stream_parser.h"
#include "engine/serving_fixture.h"
#include "engine/tokenizer/chat_format.h"
#include "engine/tokenizer/tokenizer_detokenizer.h"

namespace temper::engine::testing {
namespace {

ChatFormat Format() {
  auto f = ChatFormat::Create(ChatTokenizer());
  if (!f.ok()) FAIL(f.status().ToString());
  return std::move(*f);
}

// Feeds `text` in chunks of `chunk` bytes (0: whole) and merges what comes out; `parse_error`, when
// given, gets the parser's note on a reply that broke the format.
Result<ModelReply> Streamed(const ChatFormat& format, std::string_view text, size_t chunk,
                            std::string* parse_error = nullptr) {
  ReplyStreamParser parser(format);
  ModelReply out;
  auto take = [&](const ReplyDelta& d) {
    out.content += d.content;
    out.thinking += d.thinking;
    out.tool_calls.insert(out.tool_calls.end(), d.tool_calls.begin(), d.tool_calls.end());
  };
  const size_t step = chunk == 0 ? std::max<size_t>(text.size(), 1) : chunk;
  for (size_t i = 0; i < text.size(); i += step) {
    TEMPER_ASSIGN_OR_RETURN(ReplyDelta d, parser.Push(text.substr(i, step)));
    take(d);
  }
  TEMPER_ASSIGN_OR_RETURN(ReplyDelta d, parser.Finish());
  take(d);
  if (parse_error != nullptr) *parse_error = parser.parse_error().ok() ? "" : parser.parse_error().message();
  return out;
}

TEST_CASE("streamed reply deltas add up to ParseReplyText's reply, however the text is chunked", "[engine][chat]") {
  const ChatFormat format = Format();
  const std::vector<std::string> replies = {
      "Hello world.",
      "  \n Hello <b>world</b> a<b  \n",
      "<|channel>thought\nLet me think.  <channel|>\n\nThe answer is 4.<turn|>",
      "<|channel>thought one<channel|>A <|channel>thought\n two \n<channel|> B",
      "I will run it.<|tool_call>call:run{cmd:<|\"|>sshd -t<|\"|>,timeout:30}<tool_call|><|tool_response>",
      "<|tool_call>call:read_file{path:<|\"|>/etc/ssh/sshd_config<|\"|>,opts:{lines:[1,2],raw:true}}<tool_call|>"
      "<|tool_call>call:noop{}<tool_call|>",
      "a < b and c <| d",
      "Done.<turn|>\n  ",
  };
  for (const std::string& text : replies) {
    auto whole = format.ParseReplyText(text);
    REQUIRE(whole.ok());
    for (size_t chunk : {size_t{0}, size_t{1}, size_t{3}, size_t{7}}) {
      INFO(text << " in chunks of " << chunk);
      auto streamed = Streamed(format, text, chunk);
      REQUIRE(streamed.ok());
      CHECK(streamed->content == whole->content);
      CHECK(streamed->thinking == whole->thinking);
      REQUIRE(streamed->tool_calls.size() == whole->tool_calls.size());
      for (size_t i = 0; i < whole->tool_calls.size(); ++i) {
        CHECK(streamed->tool_calls[i].name == whole->tool_calls[i].name);
        CHECK(streamed->tool_calls[i].arguments == whole->tool_calls[i].arguments);
      }
    }
  }
}

TEST_CASE("a token stream encoding a tool call, decoded token by token, yields the call once it closes",
          "[engine][chat]") {
  const ChatFormat format = Format();
  const std::string text = "Checking.<|tool_call>call:run{cmd:<|\"|>ls -l €<|\"|>}<tool_call|><|tool_response>";
  const std::vector<int32_t> ids = ChatTokenizer().Encode(text);
  TokenizerDetokenizer detokenizer(ChatTokenizer());
  auto stream = detokenizer.NewStream();
  ReplyStreamParser parser(format);
  std::string content;
  std::vector<ToolCall> calls;
  size_t call_seen_at = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    auto piece = stream->Push(ids[i]);
    REQUIRE(piece.ok());
    auto d = parser.Push(*piece);
    REQUIRE(d.ok());
    content += d->content;
    if (!d->tool_calls.empty() && calls.empty()) call_seen_at = i;
    calls.insert(calls.end(), d->tool_calls.begin(), d->tool_calls.end());
  }
  auto rest = stream->Finish();
  REQUIRE(rest.ok());
  auto d = parser.Push(*rest);
  REQUIRE(d.ok());
  REQUIRE(parser.Finish().ok());
  CHECK(content == "Checking.");
  REQUIRE(calls.size() == 1);
  CHECK(calls[0].name == "run");
  CHECK(calls[0].arguments == nlohmann::json{{"cmd", "ls -l €"}});
  // The call is reported at its <tool_call|>, not before.
  CHECK(ids[call_seen_at] == *ChatTokenizer().TokenToId("<tool_call|>"));
}

TEST_CASE("a reply that breaks the format is text from there on, with the parser's words for why", "[engine][chat]") {
  const ChatFormat format = Format();
  auto expect = [&](const std::string& text, const std::string& message, const std::string& content,
                    size_t tool_calls = 0) {
    for (size_t chunk : {size_t{0}, size_t{1}, size_t{5}}) {
      INFO(text << " in chunks of " << chunk);
      std::string parse_error;
      auto streamed = Streamed(format, text, chunk, &parse_error);
      REQUIRE(streamed.ok());
      CHECK(streamed->content == content);
      CHECK(streamed->tool_calls.size() == tool_calls);
      CHECK_THAT(parse_error, Catch::Contains(message));
      // The same words as the whole-reply parser.
      auto whole = format.ParseReplyText(text);
      REQUIRE_FALSE(whole.ok());
      CHECK(whole.status().message() == parse_error);
    }
  };
  const std::string unterminated = "<|tool_call>call:run{cmd:<|\"|>ls}<tool_call|>";
  expect("Go." + unterminated, "tool call 0 at byte 28: argument 'cmd': unterminated string", "Go." + unterminated);
  expect("<|tool_call>call:run{cmd:ls}<tool_call|>", "bare value 'ls'", "<|tool_call>call:run{cmd:ls}<tool_call|>");
  expect("<|tool_call>call:a{}<tool_call|><|tool_call>run{}<tool_call|>", "tool call 1 at byte 44: expected 'call:'",
         "<|tool_call>run{}<tool_call|>", 1);
  expect("<|tool_call>call:run{cmd:1}", "not closed with <tool_call|>", "<|tool_call>call:run{cmd:1}");
  expect("Hi <tool_call|> and on", "reply at byte 3: unexpected <tool_call|>", "Hi <tool_call|> and on");
  expect("Hi<|channel>thought", "thought channel not closed", "Hi");
  expect("Hi<turn|>more", "reply at byte 9: text after the end of the turn", "Hi<turn|>more");
  expect("Hi<turn|> \n x", "reply at byte 9: text after the end of the turn", "Hi<turn|> \n x");
}

}  // namespace
}  // namespace temper::engine::testing
