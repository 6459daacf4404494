// Detokenizer: how the scheduler turns generated ids into text, for streamed text and stop strings.
//
// The scheduler works on token ids and does not know the tokenizer; whoever builds the engine hands
// it a Detokenizer (the tokenizer's streaming decoder, or a table for a test vocabulary). Text must
// be produced incrementally because one character can span several byte-fallback tokens.
//
// Thread safety: a Detokenizer is shared by every request and must allow concurrent NewStream()
// calls; each TextStream is used by one request on the scheduler's thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"

namespace temper::engine {

class TextStream {
 public:
  virtual ~TextStream() = default;
  // The text `id` completes (possibly empty while a multi-byte character is incomplete).
  virtual Result<std::string> Push(int32_t id) = 0;
  // Whatever is still held back at the end of generation.
  virtual Result<std::string> Finish() = 0;
};

class Detokenizer {
 public:
  virtual ~Detokenizer() = default;
  virtual std::unique_ptr<TextStream> NewStream() const = 0;
};

}  // namespace temper::engine
