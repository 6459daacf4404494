// LoadedModel: what a model directory holds, loaded and checked — its config, its weights and the
// tokenizer that belongs to it. The one way a model directory is loaded: `temper-lm` and the
// roles' `inprocess` endpoint both come through here, so they agree on what a model directory
// holds and what a bad one is told. Which backend runs the weights, with how much context and KV
// memory, is the caller's choice (engine/open_backend.h: OpenBackend(spec, model)).
//
// A model directory holds config.json, model.safetensors (or shards listed in
// model.safetensors.index.json) and tokenizer.json. A Gemma 3 GGUF file (llama.cpp's format, named
// *.gguf) may stand where the directory does: its config, tokenizer and weights (dequantized to
// bf16 in memory) are what `temper-lm convert` would write as a directory, see
// engine/model/gguf_model.h, and go through the same checks. A synthetic source replaces the directory with
// a config.json whose shapes get seeded random weights (benchmarks); it has no tokenizer of its own.
//
// The tokenizer must fit the model: every id it can produce must be inside the model's vocabulary
// (config.json vocab_size). Ids past the vocabulary are allowed only for special added tokens, which
// message content is never encoded to (Gemma 3's tokenizer ends with <image_soft_token> at id 262144, one past a
// 262144-entry text vocabulary).
//
// Ownership: a LoadedModel owns the tokenizer and shares the weights (a backend holds them too).
// The tokenizer sits behind a unique_ptr, so moving a LoadedModel keeps it at its address (a
// ChatEngine may borrow it meanwhile).
// Thread safety: loading is a pure function of the files; see CpuBackend and Tokenizer for use.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "engine/model/drafter_weights.h"
#include "engine/model/model_config.h"
#include "engine/model/weights.h"
#include "engine/tokenizer/tokenizer.h"

namespace temper::engine {

enum class TokenizerNeed {
  kNone,       // do not load one
  kIfPresent,  // DIR/tokenizer.json when it exists
  kRequired,   // NotFound naming the path when there is none
};

struct ModelSource {
  std::string dir;               // config.json, safetensors, tokenizer.json (or a Gemma 3 .gguf); or
  std::string synthetic_config;  // a config.json whose shapes get random weights (seeded)
  uint64_t synthetic_seed = 0;
  // A tokenizer.json elsewhere, instead of DIR/tokenizer.json. Named explicitly, it must exist
  // whatever `tokenizer_need` says (except kNone).
  std::string tokenizer;
  TokenizerNeed tokenizer_need = TokenizerNeed::kIfPresent;
  // Gemma 4's MTP drafter for the model (an "-assistant" checkpoint: config.json and safetensors),
  // or empty for none.
  std::string drafter_dir;
};

struct LoadedModel {
  ModelConfig config;
  std::shared_ptr<const ModelWeights> weights;
  std::unique_ptr<const Tokenizer> tokenizer;     // null when none was asked for or found
  std::shared_ptr<const DrafterWeights> drafter;  // null without a drafter_dir
};

// The tokenizer file `source` names: `tokenizer`, else DIR/tokenizer.json (the GGUF itself for a
// .gguf source); "" for a synthetic source that names none.
std::string ModelTokenizerPath(const ModelSource& source);

// The tokenizer `source` names (see ModelSource and TokenizerNeed); null when none is needed or
// present. Errors: InvalidArgument when a synthetic source needs one but names none; NotFound
// naming the path when a required or named file is missing; Tokenizer::FromFile's errors; for a
// GGUF, GgufFile::Open's and GgufTokenizerSpec's.
Result<std::unique_ptr<const Tokenizer>> LoadModelTokenizer(const ModelSource& source);

// InvalidArgument when `tokenizer` can produce an id outside the model's vocabulary, naming the
// token, its id, the vocabulary size and `tokenizer_name` (its path, for the message).
Status CheckTokenizerFitsModel(const Tokenizer& tokenizer, const ModelConfig& config,
                               const std::string& tokenizer_name);

// Loads the config, (per `source.tokenizer_need`) the tokenizer, and the weights, and checks that
// the tokenizer fits the model.
// Errors: InvalidArgument unless exactly one of dir and synthetic_config is set; NotFound when
// `dir` is not a directory; then LoadModelConfig's, LoadModelTokenizer's, CheckTokenizerFitsModel's
// and ModelWeights' errors, each naming its file; with a drafter_dir, NotFound when it is not a
// directory, then LoadDrafterConfig's and DrafterWeights::Load's errors.
Result<LoadedModel> LoadModel(const ModelSource& source);

}  // namespace temper::engine
