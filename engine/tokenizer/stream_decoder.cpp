#include "engine/tokenizer/stream_decoder.h"

#include <span>

namespace temper::engine {
namespace {

bool EndsWithReplacementChar(const std::string& s) {
  return s.size() >= 3 && s.compare(s.size() - 3, 3, "\xEF\xBF\xBD") == 0;
}

}  // namespace

Result<std::string> StreamDecoder::Push(int32_t id) {
  if (!tokenizer_->IdToToken(id)) {
    return Status::OutOfRange(std::to_string(id) + " is not a token id");
  }
  ids_.push_back(id);
  const std::span<const int32_t> all(ids_);
  TEMPER_ASSIGN_OR_RETURN(
      std::string prefix,
      tokenizer_->Decode(all.subspan(prefix_offset_, read_offset_ - prefix_offset_), skip_special_));
  TEMPER_ASSIGN_OR_RETURN(std::string text, tokenizer_->Decode(all.subspan(prefix_offset_), skip_special_));
  // Wait while the newest ids end in an incomplete character, or (an invalid byte run) change text
  // already emitted.
  if (text.size() <= prefix.size() || EndsWithReplacementChar(text) || text.compare(0, prefix.size(), prefix) != 0) {
    return std::string();
  }
  std::string added = text.substr(prefix.size());
  prefix_offset_ = read_offset_;
  read_offset_ = ids_.size();
  return added;
}

Result<std::string> StreamDecoder::Finish() {
  TEMPER_ASSIGN_OR_RETURN(std::string rest,
                          tokenizer_->Decode(std::span<const int32_t>(ids_).subspan(read_offset_), skip_special_));
  prefix_offset_ = read_offset_ = ids_.size();
  return rest;
}

}  // namespace temper::engine
