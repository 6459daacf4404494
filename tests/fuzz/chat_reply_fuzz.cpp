// libFuzzer target: the chat formats' reply parsers on arbitrary bytes — Gemma 4's
// ChatFormat::ParseReplyText, and Gemma 3's with its streaming parser (JsonReplyStreamParser), which
// must agree with it whatever the chunking.
//
// A model's reply is untrusted (a sampled token sequence can be anything), and the roles act on the
// tool calls parsed from it, so each parser must return a reply or a Status for every input.
// Run: build-fuzz/tests/fuzz/fuzz_chat_reply CORPUS_DIR
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "engine/serve/json_reply_stream_parser.h"
#include "engine/tokenizer/chat_format.h"

namespace {

using temper::engine::ChatFamily;
using temper::engine::ChatFormat;
using temper::engine::Tokenizer;

// The test tokenizer carrying Gemma 4's control tokens, and (for Gemma 3's format, which needs only
// its four) the same with <start_of_turn> and <end_of_turn> added. Built once per fuzzing process.
const Tokenizer& MakeTokenizer(bool gemma3) {
  std::ifstream in(TEMPER_FUZZ_TOKENIZER);
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(ss.str());
  if (gemma3) {
    for (const char* token : {"<start_of_turn>", "<end_of_turn>"}) {
      const auto id = static_cast<int>(j["model"]["vocab"].size());
      j["model"]["vocab"][token] = id;
      j["added_tokens"].push_back({{"id", id},
                                   {"content", token},
                                   {"single_word", false},
                                   {"lstrip", false},
                                   {"rstrip", false},
                                   {"normalized", false},
                                   {"special", true}});
    }
  }
  auto tok = Tokenizer::FromJson(j.dump());
  if (!tok.ok()) __builtin_trap();
  return *new Tokenizer(std::move(tok).value());  // lives as long as the process
}

const ChatFormat& Format(ChatFamily family) {
  static const ChatFormat gemma4 = [] {
    auto f = ChatFormat::Create(MakeTokenizer(false), ChatFamily::kGemma4);
    if (!f.ok()) __builtin_trap();
    return std::move(f).value();
  }();
  static const ChatFormat gemma3 = [] {
    auto f = ChatFormat::Create(MakeTokenizer(true), ChatFamily::kGemma3);
    if (!f.ok()) __builtin_trap();
    return std::move(f).value();
  }();
  return family == ChatFamily::kGemma3 ? gemma3 : gemma4;
}

void CheckCalls(const temper::engine::ModelReply& reply) {
  for (const auto& call : reply.tool_calls) {
    if (!call.arguments.is_object() || call.name.empty()) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto reply = Format(ChatFamily::kGemma4).ParseReplyText(text);
  if (reply.ok()) CheckCalls(*reply);

  auto whole = Format(ChatFamily::kGemma3).ParseReplyText(text);
  if (!whole.ok()) __builtin_trap();  // Gemma 3's replies always parse: text, or calls
  CheckCalls(*whole);
  // Streamed in chunks of a size the input picks, the deltas add up to the same reply.
  temper::engine::JsonReplyStreamParser stream(Format(ChatFamily::kGemma3), {"run", "finish"});
  const size_t chunk = size == 0 ? 1 : 1 + data[0] % 8;
  std::string content;
  size_t calls = 0;
  auto take = [&](const auto& delta) {
    if (!delta.ok()) __builtin_trap();
    content += delta->content;
    calls += delta->tool_calls.size();
  };
  for (size_t i = 0; i < text.size(); i += chunk) take(stream.Push(text.substr(i, chunk)));
  take(stream.Finish());
  bool offered = true;
  for (const auto& call : whole->tool_calls) offered = offered && (call.name == "run" || call.name == "finish");
  if (offered && (content != whole->content || calls != whole->tool_calls.size())) __builtin_trap();
  if (!offered && (calls != 0 || stream.parse_error().ok())) __builtin_trap();
  return 0;
}
