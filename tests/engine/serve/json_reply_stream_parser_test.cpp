// Gemma 3's streaming reply parser must agree with Gemma3ChatFormat::ParseReplyText however the text
// arrives, stream text at once, hold a reply that may be a call until its end, and read a call only
// of a tool the request offers.
#include "engine/serve/json_reply_stream_parser.h"

#include <random>

#include <catch2/catch.hpp>

#include "engine/gemma3_tokenizer.h"

namespace temper::engine {
namespace {

using testing::Gemma3Format;

struct Streamed {
  ModelReply reply;
  std::vector<std::string> content_deltas;  // as they came
  std::string parse_error;
};

Streamed Stream(std::string_view text, size_t chunk, std::vector<std::string> tools = {"run_command", "finish"}) {
  JsonReplyStreamParser parser(Gemma3Format(), std::move(tools));
  Streamed out;
  auto take = [&](Result<ReplyDelta> d) {
    INFO(d.status().ToString());
    REQUIRE(d.ok());
    if (!d->content.empty()) out.content_deltas.push_back(d->content);
    out.reply.content += d->content;
    out.reply.tool_calls.insert(out.reply.tool_calls.end(), d->tool_calls.begin(), d->tool_calls.end());
  };
  const size_t step = chunk == 0 ? std::max<size_t>(text.size(), 1) : chunk;
  for (size_t i = 0; i < text.size(); i += step) take(parser.Push(text.substr(i, step)));
  take(parser.Finish());
  CHECK(parser.tool_call_count() == static_cast<int>(out.reply.tool_calls.size()));
  out.parse_error = parser.parse_error().ok() ? "" : parser.parse_error().message();
  return out;
}

TEST_CASE("Gemma 3's streamed reply deltas add up to ParseReplyText's reply, however the text is chunked",
          "[engine][chat][gemma3]") {
  const std::vector<std::string> replies = {
      "Hello world.",
      "  \n Hello <b>world</b> a<b  \n",
      "The answer is 4.<end_of_turn>",
      "Spelling <end_of_turn> and <eos> inside is text.  \n<eos>",
      "a <eo",
      R"({"name": "run_command", "arguments": {"command": "sshd -t"}}<end_of_turn>)",
      "\n [{\"name\":\"finish\",\"arguments\":{}}, {\"name\":\"run_command\",\"arguments\":{\"command\":\"ls\"}}]\n",
      R"({"not": "a call"}<end_of_turn>)",
      "{ broken",
      "",
      "   ",
  };
  for (const std::string& text : replies) {
    Result<ModelReply> whole = Gemma3Format().ParseReplyText(text);
    REQUIRE(whole.ok());
    for (size_t chunk : {size_t{0}, size_t{1}, size_t{2}, size_t{5}}) {
      INFO(text << " in chunks of " << chunk);
      const Streamed streamed = Stream(text, chunk);
      CHECK(streamed.reply.content == whole->content);
      REQUIRE(streamed.reply.tool_calls.size() == whole->tool_calls.size());
      for (size_t i = 0; i < whole->tool_calls.size(); ++i) {
        CHECK(streamed.reply.tool_calls[i].name == whole->tool_calls[i].name);
        CHECK(streamed.reply.tool_calls[i].arguments == whole->tool_calls[i].arguments);
      }
    }
  }
}

TEST_CASE("Gemma 3's streamed replies agree with ParseReplyText on random replies in random chunks",
          "[engine][chat][gemma3]") {
  // Fragments that meet at the parser's edges: whitespace, stop tokens' texts and their prefixes,
  // calls and their pieces, brackets.
  const std::vector<std::string> pieces = {" ",
                                           "\n",
                                           "  \n",
                                           "a",
                                           "Hello",
                                           "<",
                                           "<e",
                                           "<eo",
                                           "<eos",
                                           "<eos>",
                                           "<end_of",
                                           "<end_of_turn>",
                                           "{",
                                           "}",
                                           "[",
                                           "]",
                                           ",",
                                           "\"",
                                           R"({"name": "run_command", "arguments": {"command": "ls"}})",
                                           R"({"name":"finish","arguments":{}})",
                                           R"({"name": "other", "arguments": {}})",
                                           "x}"};
  std::mt19937_64 rng(47);
  for (int n = 0; n < 400; ++n) {
    std::string text;
    const int count = static_cast<int>(rng() % 6);
    for (int i = 0; i < count; ++i) text += pieces[rng() % pieces.size()];
    Result<ModelReply> whole = Gemma3Format().ParseReplyText(text);
    REQUIRE(whole.ok());
    const size_t chunk = 1 + rng() % 7;
    INFO("'" << text << "' in chunks of " << chunk);
    const Streamed streamed = Stream(text, chunk);
    // A call of a tool not offered ("other") is the reply's text here.
    bool offered = true;
    for (const ToolCall& call : whole->tool_calls) offered = offered && call.name != "other";
    if (offered) {
      CHECK(streamed.reply.content == whole->content);
      CHECK(streamed.reply.tool_calls.size() == whole->tool_calls.size());
    } else {
      CHECK(streamed.reply.tool_calls.empty());
      CHECK_FALSE(streamed.parse_error.empty());
    }
  }
}

TEST_CASE("Gemma 3's text streams at once, and a reply that may be a call is held to its end",
          "[engine][chat][gemma3]") {
  JsonReplyStreamParser text(Gemma3Format(), {"run_command"});
  CHECK(text.Push("Sure, ")->content == "Sure,");  // the trailing space waits for what follows
  CHECK(text.Push("running it<end_of")->content == " running it");
  CHECK(text.Push("_turn>")->content.empty());
  CHECK(text.Finish()->content.empty());

  JsonReplyStreamParser call(Gemma3Format(), {"run_command"});
  CHECK(call.Push(R"({"name": "run_command", )")->empty());
  CHECK(call.Push(R"("arguments": {"command": "id"}})")->empty());
  Result<ReplyDelta> end = call.Finish();
  REQUIRE(end.ok());
  REQUIRE(end->tool_calls.size() == 1);
  CHECK(end->tool_calls[0].arguments["command"] == "id");
}

TEST_CASE("Gemma 3: a call of a tool not offered, or JSON that is no call, is content with the reason",
          "[engine][chat][gemma3]") {
  const std::string rm = R"({"name": "rm_rf", "arguments": {"path": "/"}})";
  Streamed s = Stream(rm + "<end_of_turn>", 3);
  CHECK(s.reply.tool_calls.empty());
  CHECK(s.reply.content == rm);
  CHECK(s.parse_error == "reply at byte 0: tool call 0 names 'rm_rf', which is not one of the tools offered");

  s = Stream(" {\"answer\": 42}", 4);
  CHECK(s.reply.content == "{\"answer\": 42}");
  CHECK_THAT(s.parse_error, Catch::StartsWith("reply at byte 1: starts a JSON object or array but is not a tool call"));

  // Without tools offered (a reply under the caller's own grammar) a call's shape is content, and no error.
  const std::string call = R"({"name": "run_command", "arguments": {}})";
  s = Stream(call, 0, {});
  CHECK(s.reply.tool_calls.empty());
  CHECK(s.reply.content == call);
  CHECK(s.parse_error.empty());
}

}  // namespace
}  // namespace temper::engine
