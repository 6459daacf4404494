#include "engine/tokenizer/tokenizer_detokenizer.h"

#include "engine/tokenizer/stream_decoder.h"

namespace temper::engine {
namespace {

class DecoderStream final : public TextStream {
 public:
  explicit DecoderStream(const Tokenizer& tokenizer) : decoder_(tokenizer) {}
  Result<std::string> Push(int32_t id) override { return decoder_.Push(id); }
  Result<std::string> Finish() override { return decoder_.Finish(); }

 private:
  StreamDecoder decoder_;
};

}  // namespace

std::unique_ptr<TextStream> TokenizerDetokenizer::NewStream() const {
  return std::make_unique<DecoderStream>(tokenizer_);
}

}  // namespace temper::engine
