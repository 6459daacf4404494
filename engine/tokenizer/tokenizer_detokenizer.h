// TokenizerDetokenizer: the Detokenizer the scheduler uses when the engine has a real tokenizer,
// so streamed text and stop strings work on the text users see.
//
// Each stream is a StreamDecoder, which holds back a character until all its byte-fallback tokens
// have arrived. Special tokens are kept in the text (`<|tool_call>`, `<|channel>`): the chat layer
// parses them out of the stream, as ChatFormat::ParseReply does for a whole reply.
//
// Thread safety: NewStream may be called concurrently (it only reads the tokenizer); each stream is
// used by one thread. Ownership: borrows the Tokenizer, which must outlive it and every stream.
#pragma once

#include <memory>

#include "engine/tokenizer/detokenizer.h"
#include "engine/tokenizer/tokenizer.h"

namespace temper::engine {

class TokenizerDetokenizer final : public Detokenizer {
 public:
  explicit TokenizerDetokenizer(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  std::unique_ptr<TextStream> NewStream() const override;

 private:
  const Tokenizer& tokenizer_;
};

}  // namespace temper::engine
