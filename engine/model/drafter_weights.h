// DrafterWeights: the bf16 weights of Gemma 4's MTP drafter (drafter_config.h), as views into its
// memory-mapped checkpoint (or into seeded random values of the same shapes, for benchmarks).
//
// Loading checks the checkpoint against the config as ModelWeights does: every tensor the config
// implies must be there with that exact shape and dtype BF16, and no other tensor may be in it.
// Tensors (save_pretrained's names): `model.embed_tokens.weight` [vocab, Hd] (also the head when
// tied), `model.norm.weight`, per layer `model.layers.{i}.self_attn.{q_proj,q_norm,o_proj}.weight`,
// the four layer norms, `mlp.{gate,up,down}_proj.weight` and `layer_scalar` (no k/v projections or
// norms: the target's cache stands in for them), `pre_projection.weight` [Hd, 2·Hb] and
// `post_projection.weight` [Hb, Hd]; `lm_head.weight` when not tied.
//
// Ownership: owns the map (or buffer) and a copy of the config; every view is valid while it lives.
// Thread safety: immutable after construction.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/model/checkpoint.h"
#include "engine/model/drafter_config.h"
#include "engine/model/weights.h"

namespace temper::engine {

struct DrafterLayerWeights {
  Bf16Matrix q_proj;                 // [num_heads * head_dim, Hd]
  Bf16Matrix o_proj;                 // [Hd, num_heads * head_dim]
  Bf16Matrix gate_proj, up_proj;     // [intermediate, Hd]
  Bf16Matrix down_proj;              // [Hd, intermediate]
  std::span<const uint16_t> q_norm;  // [head_dim]
  std::span<const uint16_t> input_norm, post_attention_norm, pre_feedforward_norm, post_feedforward_norm;  // [Hd]
  float layer_scalar = 1;
};

class DrafterWeights {
 public:
  // Loads DIR's safetensors for `config`. Errors: those of Checkpoint::Open; DataLoss naming the
  // tensor when one is missing, unexpected, of the wrong dtype or shape, or misaligned.
  static Result<std::unique_ptr<DrafterWeights>> Load(const std::filesystem::path& dir, const DrafterConfig& config);
  // Seeded random weights of `config`'s shapes, drawn as ModelWeights::Synthetic draws (benchmarks).
  // ResourceExhausted if they cannot be allocated.
  static Result<std::unique_ptr<DrafterWeights>> Synthetic(const DrafterConfig& config, uint64_t seed);

  // Parameters of `config`'s drafter, every one of which a draft step reads.
  static int64_t ParameterCount(const DrafterConfig& config);

  DrafterWeights(const DrafterWeights&) = delete;
  DrafterWeights& operator=(const DrafterWeights&) = delete;

  const DrafterConfig& config() const { return config_; }
  const Bf16Matrix& embed() const { return embed_; }      // [vocab, Hd]
  const Bf16Matrix& lm_head() const { return lm_head_; }  // [vocab, Hd]; == embed() when tied
  std::span<const uint16_t> final_norm() const { return final_norm_; }
  const Bf16Matrix& pre_projection() const { return pre_projection_; }    // [Hd, 2·Hb]: [embedding, hidden] in
  const Bf16Matrix& post_projection() const { return post_projection_; }  // [Hb, Hd]
  const DrafterLayerWeights& layer(int i) const { return layers_[i]; }
  int num_layers() const { return static_cast<int>(layers_.size()); }

 private:
  explicit DrafterWeights(const DrafterConfig& config) : config_(config) {}
  void Bind(const std::map<std::string, const uint16_t*, std::less<>>& data);

  DrafterConfig config_;
  std::unique_ptr<Checkpoint> checkpoint_;
  std::vector<uint16_t> synthetic_;
  Bf16Matrix embed_, lm_head_, pre_projection_, post_projection_;
  std::span<const uint16_t> final_norm_;
  std::vector<DrafterLayerWeights> layers_;
};

}  // namespace temper::engine
