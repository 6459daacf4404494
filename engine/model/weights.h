// ModelWeights: a Gemma 4 or Gemma 3 text decoder's bf16 weights, as views into a memory-mapped
// checkpoint (or into a buffer of seeded random values of the same shapes, for benchmarks).
//
// Loading checks the checkpoint against the config: every tensor the config implies must be there
// with that exact shape and dtype BF16, and no other tensor may sit under the decoder's prefix
// (`model.`, `model.language_model.` or `language_model.model.`); tensors outside it (vision and
// audio towers of a multimodal checkpoint) are ignored and never touched. Linear weights are
// [out, in] (y = x W^T).
//
// Ownership: ModelWeights owns the map (or buffer); every view is valid while it lives.
// Thread safety: immutable after construction; any number of threads may read it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include "common/status.h"
#include "engine/model/checkpoint.h"
#include "engine/model/model_config.h"

namespace temper::engine {

// A row-major bf16 matrix view [rows][cols] whose rows are `stride` elements apart, so that a
// column slice (a row-parallel shard) is a view too, with no copy.
struct Bf16Matrix {
  const uint16_t* data = nullptr;
  int rows = 0;
  int cols = 0;
  int64_t stride = 0;

  bool empty() const { return data == nullptr; }
  const uint16_t* Row(int r) const { return data + static_cast<int64_t>(r) * stride; }
  Bf16Matrix Rows(int begin, int end) const { return {data + int64_t{begin} * stride, end - begin, cols, stride}; }
  Bf16Matrix Cols(int begin, int end) const { return {data + begin, rows, end - begin, stride}; }
  uint64_t Bytes() const { return uint64_t(rows) * uint64_t(cols) * 2; }
};

struct LayerWeights {
  Bf16Matrix q_proj;                         // [num_heads * head_dim, hidden]
  Bf16Matrix k_proj;                         // [num_kv_heads * head_dim, hidden]
  Bf16Matrix v_proj;                         // same as k_proj; empty on k_eq_v layers
  Bf16Matrix o_proj;                         // [hidden, num_heads * head_dim]
  Bf16Matrix gate_proj;                      // [intermediate, hidden]
  Bf16Matrix up_proj;                        // [intermediate, hidden]
  Bf16Matrix down_proj;                      // [hidden, intermediate]
  std::span<const uint16_t> q_norm, k_norm;  // [head_dim]
  std::span<const uint16_t> input_norm, post_attention_norm, pre_feedforward_norm, post_feedforward_norm;  // [hidden]
  float layer_scalar = 1;  // 1 on Gemma 3, which has none
};

// Writes the weights ModelWeights::Synthetic(config, seed) makes as a safetensors checkpoint (the
// tensor names a checkpoint of `config` has), so that a synthetic model can be loaded from a model
// directory like a real one. Errors: ResourceExhausted, or WriteSafetensors' IOError.
Status WriteSyntheticCheckpoint(const std::filesystem::path& file, const ModelConfig& config, uint64_t seed);

class ModelWeights {
 public:
  // Loads DIR's safetensors (single or sharded) for `config`.
  // Errors: those of Checkpoint::Open; DataLoss naming the tensor when one is missing, unexpected,
  // of the wrong dtype or shape, or misaligned.
  static Result<std::unique_ptr<ModelWeights>> Load(const std::filesystem::path& dir, const ModelConfig& config);
  // The same checks and views over a checkpoint already open (a GGUF's weights in memory).
  static Result<std::unique_ptr<ModelWeights>> Load(std::unique_ptr<Checkpoint> checkpoint, const ModelConfig& config);

  // Seeded random weights of `config`'s shapes (same seed, same weights), scaled like the golden
  // fixture's so activations stay in a sane range. ResourceExhausted if they cannot be allocated.
  static Result<std::unique_ptr<ModelWeights>> Synthetic(const ModelConfig& config, uint64_t seed);

  ModelWeights(const ModelWeights&) = delete;
  ModelWeights& operator=(const ModelWeights&) = delete;

  const Bf16Matrix& embed() const { return embed_; }      // [vocab, hidden]
  const Bf16Matrix& lm_head() const { return lm_head_; }  // [vocab, hidden]; == embed() when tied
  std::span<const uint16_t> final_norm() const { return final_norm_; }
  const LayerWeights& layer(int i) const { return layers_[i]; }
  int num_layers() const { return static_cast<int>(layers_.size()); }

 private:
  ModelWeights() = default;
  std::unique_ptr<Checkpoint> checkpoint_;
  std::vector<uint16_t> synthetic_;
  Bf16Matrix embed_, lm_head_;
  std::span<const uint16_t> final_norm_;
  std::vector<LayerWeights> layers_;
  friend class WeightBinder;
};

}  // namespace temper::engine
