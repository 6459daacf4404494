// WriteTokenizerJson: a TokenizerSpec as the text of a Hugging Face `tokenizer.json`, the inverse of
// ParseTokenizerJson (tokenizer_json.h). `temper-lm convert` writes a GGUF's tokenizer with it, so
// the converted directory loads in temper and in transformers (PreTrainedTokenizerFast reads it
// with Rust `tokenizers`).
//
// The layout is the one `tokenizers` saves: version, truncation, padding, added_tokens (none with
// lstrip, rstrip or single_word), normalizer, pre_tokenizer, post_processor (TemplateProcessing:
// the spec's single template, a pair template that repeats it for B with type_id 1, and each
// special token it names), decoder and a BPE model with its vocabulary in id order and its merges
// as [left, right] pairs. A list of two or more steps becomes a Sequence; none becomes null.
//
// Thread safety: a pure function.
#pragma once

#include <string>

#include "common/status.h"
#include "engine/tokenizer/tokenizer_json.h"

namespace temper::engine {

// Errors: InvalidArgument when a template names an id that is neither in the vocabulary nor an
// added token, or a string is not UTF-8 (JSON cannot hold it), naming it.
Result<std::string> WriteTokenizerJson(const TokenizerSpec& spec);

}  // namespace temper::engine
