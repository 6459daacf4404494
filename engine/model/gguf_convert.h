// ConvertGgufToDirectory: a Gemma 3 GGUF file written out as a Hugging Face model directory, what
// `temper-lm convert IN.gguf OUT_DIR` does. The directory holds config.json, model.safetensors
// (bf16, tied embeddings as transformers saves them), tokenizer.json and, when the GGUF has one,
// chat_template.jinja (where transformers 5 keeps a tokenizer's template), each made as
// engine/model/gguf_model.h describes; it then loads wherever a model directory does, in temper and
// in transformers (Gemma3ForCausalLM.from_pretrained, PreTrainedTokenizerFast).
//
// The write is atomic: everything goes to a fresh directory beside OUT_DIR, which is renamed onto
// OUT_DIR at the end, so OUT_DIR is either absent (or empty) or complete. An OUT_DIR that exists
// and is not empty is refused (AlreadyExists), as is one that is not a directory.
//
// Thread safety: touches only its own paths.
#pragma once

#include <filesystem>

#include "common/status.h"

namespace temper::engine {

// Errors: AlreadyExists for a non-empty OUT_DIR (or a file there); GgufFile::Open's,
// GgufConfigJson's, GgufGemma3Tensors', GgufTokenizerSpec's and WriteTokenizerJson's errors; IOError
// naming the path for a write or rename that fails (nothing is left behind then).
Status ConvertGgufToDirectory(const std::filesystem::path& gguf, const std::filesystem::path& out_dir);

}  // namespace temper::engine
