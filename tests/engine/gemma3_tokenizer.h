// Test helper: the real Gemma 3 tokenizer (tests/data/tokenizer/gemma3-tokenizer.json.gz, 33 MB
// unpacked), loaded once per test process, and the chat format it selects.
#pragma once

#include <string>

#include <catch2/catch.hpp>

#include "engine/gzip_file.h"
#include "engine/tokenizer/chat_format.h"
#include "engine/tokenizer/tokenizer.h"

namespace temper::engine::testing {

inline const Tokenizer& Gemma3Tokenizer() {
  static const Tokenizer tokenizer = [] {
    Result<std::string> text = ReadGzipFile(std::string(TEMPER_TEST_DATA_DIR) + "/tokenizer/gemma3-tokenizer.json.gz");
    if (!text.ok()) FAIL(text.status().ToString());
    Result<Tokenizer> tok = Tokenizer::FromJson(*text);
    if (!tok.ok()) FAIL(tok.status().ToString());
    return std::move(tok).value();
  }();
  return tokenizer;
}

inline const ChatFormat& Gemma3Format() {
  static const ChatFormat format = [] {
    Result<ChatFormat> f = ChatFormat::Create(Gemma3Tokenizer());
    if (!f.ok()) FAIL(f.status().ToString());
    return std::move(f).value();
  }();
  return format;
}

}  // namespace temper::engine::testing
