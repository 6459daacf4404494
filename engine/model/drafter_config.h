// DrafterConfig: Gemma 4's multi-token-prediction drafter (the "-assistant" checkpoints,
// model_type `gemma4_assistant`), read from its config.json and checked against the target model
// it drafts for.
//
// The drafter is a small decoder (four layers: three sliding, one full, for the 31B) that computes
// no keys or values of its own: each layer attends over the target's cache of the target's last
// layer of the same kind. One step takes the target's embedding of a token and a hidden state of
// the target's width (the target's final-norm output for the first step, the drafter's own
// projected output after that), and predicts the token after it (drafter.h runs it; the layout
// and its sources are in shared/notes/mtp.md).
//
// Refused with an error naming the key: the E2B/E4B drafters' centroid-masked head
// (`use_ordered_embeddings`), and any geometry that does not fit the target: a different
// `backbone_hidden_size`, vocabulary, head width, KV head count or sliding window than the target
// layer a drafter layer reads, or a layer kind the target does not have.
//
// Thread safety: a DrafterConfig is a plain value.
#pragma once

#include <filesystem>
#include <span>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "engine/model/model_config.h"
#include "engine/model/tensor_parallel.h"

namespace temper::engine {

struct DrafterConfig {
  // Its decoder: hidden_size is the drafter's width; weights under `model.`; the head is tied to
  // its own embedding unless tie_word_embeddings is false (then `lm_head.weight`).
  ModelConfig text;
  int backbone_hidden_size = 0;  // the target's hidden size: the width of the hidden state it takes
  // For each drafter layer, the target layer whose stored K and V it reads.
  std::vector<int> target_layers;
};

// Parses an assistant config.json for `target`; `source` names it in errors.
// Errors: InvalidArgument for malformed JSON, a bad value or a mismatch with the target, naming the
// key; Unimplemented for a refused feature.
Result<DrafterConfig> ParseDrafterConfig(std::string_view json_text, std::string_view source,
                                         const ModelConfig& target);

// The query heads of the drafter each rank computes: the drafter's heads split evenly over the
// ranks of `shards` (the target's plan for `target`), so that each rank's heads read KV heads the
// rank holds of the target layers the drafter reads. InvalidArgument, naming the rank and layer,
// when the drafter was not made for `target` or its heads cannot be split so.
Result<std::vector<Range>> PlanDrafterHeads(const DrafterConfig& drafter, const ModelConfig& target,
                                            std::span<const RankShard> shards);

// Reads and parses DIR/config.json. IOError (with errno's text) if it cannot be read.
Result<DrafterConfig> LoadDrafterConfig(const std::filesystem::path& path, const ModelConfig& target);

}  // namespace temper::engine
