#include "engine/loaded_model.h"

#include <filesystem>
#include <system_error>
#include <utility>

#include <fmt/format.h>

#include "engine/model/gguf_model.h"

namespace temper::engine {

namespace fs = std::filesystem;

namespace {

Result<std::unique_ptr<const Tokenizer>> GgufTokenizer(const GgufFile& file) {
  TEMPER_ASSIGN_OR_RETURN(TokenizerSpec spec, GgufTokenizerSpec(file));
  Result<Tokenizer> tokenizer = Tokenizer::FromSpec(std::move(spec));
  if (!tokenizer.ok()) return tokenizer.status().WithContext(fmt::format("the tokenizer of {}", file.name()));
  return std::make_unique<const Tokenizer>(std::move(tokenizer).value());
}

// Adds the drafter `source` names, if any, to `out`.
Status LoadDrafter(const ModelSource& source, LoadedModel& out);

// A .gguf source: the config, tokenizer and weights all come from the one file.
Result<LoadedModel> LoadGgufModel(const ModelSource& source) {
  LoadedModel out;
  TEMPER_ASSIGN_OR_RETURN(GgufFile file, GgufFile::Open(source.dir));
  TEMPER_ASSIGN_OR_RETURN(std::string config_json, GgufConfigJson(file));
  TEMPER_ASSIGN_OR_RETURN(
      out.config, ParseModelConfig(config_json, fmt::format("{} (its gemma3 metadata as config.json)", source.dir)));
  if (source.tokenizer.empty() && source.tokenizer_need != TokenizerNeed::kNone) {
    TEMPER_ASSIGN_OR_RETURN(out.tokenizer, GgufTokenizer(file));
  } else {
    TEMPER_ASSIGN_OR_RETURN(out.tokenizer, LoadModelTokenizer(source));
  }
  if (out.tokenizer != nullptr) {
    TEMPER_RETURN_IF_ERROR(CheckTokenizerFitsModel(*out.tokenizer, out.config, ModelTokenizerPath(source)));
  }
  TEMPER_ASSIGN_OR_RETURN(GgufBf16Tensors tensors, GgufGemma3Tensors(file));
  TEMPER_ASSIGN_OR_RETURN(SafetensorsFile memory,
                          SafetensorsFile::FromMemory(fmt::format("{} (dequantized to bf16)", source.dir),
                                                      std::move(tensors.storage), std::move(tensors.tensors)));
  TEMPER_ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> checkpoint, Checkpoint::FromFile(std::move(memory)));
  Result<std::unique_ptr<ModelWeights>> weights = ModelWeights::Load(std::move(checkpoint), out.config);
  if (!weights.ok()) return weights.status().WithContext(fmt::format("weights in {}", source.dir));
  out.weights = std::move(*weights);
  return out;
}

}  // namespace

std::string ModelTokenizerPath(const ModelSource& source) {
  if (!source.tokenizer.empty()) return source.tokenizer;
  if (source.dir.empty()) return "";
  if (IsGgufPath(source.dir)) return source.dir;
  return (fs::path(source.dir) / "tokenizer.json").string();
}

Result<std::unique_ptr<const Tokenizer>> LoadModelTokenizer(const ModelSource& source) {
  if (source.tokenizer_need == TokenizerNeed::kNone) return std::unique_ptr<const Tokenizer>();
  const std::string path = ModelTokenizerPath(source);
  const bool optional = source.tokenizer.empty() && source.tokenizer_need == TokenizerNeed::kIfPresent;
  if (path.empty()) {
    if (optional) return std::unique_ptr<const Tokenizer>();
    return Status::InvalidArgument(fmt::format(
        "a synthetic model ({}) has no tokenizer.json of its own; name a tokenizer file", source.synthetic_config));
  }
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    if (optional) return std::unique_ptr<const Tokenizer>();
    return Status::NotFound(fmt::format("tokenizer {} does not exist", path));
  }
  if (IsGgufPath(path)) {
    TEMPER_ASSIGN_OR_RETURN(GgufFile file, GgufFile::Open(path));
    return GgufTokenizer(file);
  }
  TEMPER_ASSIGN_OR_RETURN(Tokenizer tokenizer, Tokenizer::FromFile(path));
  return std::make_unique<const Tokenizer>(std::move(tokenizer));
}

Status CheckTokenizerFitsModel(const Tokenizer& tokenizer, const ModelConfig& config,
                               const std::string& tokenizer_name) {
  const int64_t vocab = config.vocab_size;
  // Ids past the vocabulary may only be special tokens, which content is never encoded to; the
  // first ordinary one shows the tokenizer belongs to another model.
  for (int64_t id = vocab; id < tokenizer.id_limit(); ++id) {
    const auto id32 = static_cast<int32_t>(id);
    const std::optional<std::string_view> token = tokenizer.IdToToken(id32);
    if (token && !tokenizer.IsSpecial(id32)) {
      return Status::InvalidArgument(fmt::format(
          "tokenizer {} has token '{}' at id {}, outside the model's vocabulary of {} (config.json vocab_size): "
          "the tokenizer belongs to another model",
          tokenizer_name, *token, id, vocab));
    }
  }
  return Status::OK();
}

Result<LoadedModel> LoadModel(const ModelSource& source) {
  if (source.dir.empty() == source.synthetic_config.empty()) {
    return Status::InvalidArgument("a model source needs exactly one of a model directory and a synthetic config.json");
  }
  LoadedModel out;
  const bool from_dir = !source.dir.empty();
  if (from_dir && IsGgufPath(source.dir)) {
    TEMPER_ASSIGN_OR_RETURN(out, LoadGgufModel(source));
    TEMPER_RETURN_IF_ERROR(LoadDrafter(source, out));
    return out;
  }
  if (from_dir) {
    std::error_code ec;
    if (!fs::is_directory(source.dir, ec)) {
      return Status::NotFound(fmt::format("model directory {} {}", source.dir,
                                          fs::exists(source.dir, ec) ? "is not a directory" : "does not exist"));
    }
  }
  TEMPER_ASSIGN_OR_RETURN(
      out.config, LoadModelConfig(from_dir ? fs::path(source.dir) / "config.json" : fs::path(source.synthetic_config)));
  // The tokenizer before the weights: a wrong one is found without mapping gigabytes.
  TEMPER_ASSIGN_OR_RETURN(out.tokenizer, LoadModelTokenizer(source));
  if (out.tokenizer != nullptr) {
    TEMPER_RETURN_IF_ERROR(CheckTokenizerFitsModel(*out.tokenizer, out.config, ModelTokenizerPath(source)));
  }
  if (from_dir) {
    Result<std::unique_ptr<ModelWeights>> loaded = ModelWeights::Load(source.dir, out.config);
    if (!loaded.ok()) return loaded.status().WithContext(fmt::format("weights in {}", source.dir));
    out.weights = std::move(*loaded);
  } else {
    TEMPER_ASSIGN_OR_RETURN(out.weights, ModelWeights::Synthetic(out.config, source.synthetic_seed));
  }
  TEMPER_RETURN_IF_ERROR(LoadDrafter(source, out));
  return out;
}

namespace {

Status LoadDrafter(const ModelSource& source, LoadedModel& out) {
  if (!source.drafter_dir.empty()) {
    std::error_code ec;
    if (!fs::is_directory(source.drafter_dir, ec)) {
      return Status::NotFound(
          fmt::format("drafter directory {} {}", source.drafter_dir,
                      fs::exists(source.drafter_dir, ec) ? "is not a directory" : "does not exist"));
    }
    TEMPER_ASSIGN_OR_RETURN(DrafterConfig drafter,
                            LoadDrafterConfig(fs::path(source.drafter_dir) / "config.json", out.config));
    Result<std::unique_ptr<DrafterWeights>> weights = DrafterWeights::Load(source.drafter_dir, drafter);
    if (!weights.ok()) return weights.status().WithContext(fmt::format("drafter weights in {}", source.drafter_dir));
    out.drafter = std::move(*weights);
  }
  return Status::OK();
}

}  // namespace

}  // namespace temper::engine
