// libFuzzer target: ChatFormat::ParseReplyText on arbitrary bytes.
//
// A model's reply is untrusted (a sampled token sequence can be anything), and the roles act on the
// tool calls parsed from it, so the parser must return a reply or a Status for every input.
// Run: build-fuzz/tests/fuzz/fuzz_chat_reply CORPUS_DIR
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "engine/tokenizer/chat_format.h"

namespace {

const temper::engine::ChatFormat& Format() {
  // Built once per fuzzing process from the test tokenizer carrying Gemma 4's control tokens.
  static const temper::engine::Tokenizer tokenizer = [] {
    std::ifstream in(TEMPER_FUZZ_TOKENIZER);
    std::stringstream ss;
    ss << in.rdbuf();
    auto tok = temper::engine::Tokenizer::FromJson(ss.str());
    if (!tok.ok()) __builtin_trap();
    return std::move(tok).value();
  }();
  static const temper::engine::ChatFormat format = [] {
    auto f = temper::engine::ChatFormat::Create(tokenizer);
    if (!f.ok()) __builtin_trap();
    return std::move(f).value();
  }();
  return format;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto reply = Format().ParseReplyText(text);
  if (reply.ok()) {
    for (const auto& call : reply->tool_calls) {
      if (!call.arguments.is_object() || call.name.empty()) __builtin_trap();
    }
  }
  return 0;
}
