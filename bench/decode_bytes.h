// Bytes one decode step must read on one tensor-parallel rank: the yardstick behind every decode
// GB/s figure of temper-bench --gpus and temper-kernel-bench.
#pragma once

#include <algorithm>
#include <cstdint>

#include "engine/cuda/memory_plan.h"
#include "engine/model/model_config.h"
#include "engine/model/tensor_parallel.h"

namespace temper::bench {

// bf16 KV one sequence's attention visits at `context` tokens on `shard`: per layer the visible
// keys (the window on sliding layers) × the rank's KV heads × head_dim, V only on k_eq_v layers.
inline double RankKvReadBytes(const engine::ModelConfig& c, const engine::RankShard& shard, int64_t context) {
  double bytes = 0;
  for (int l = 0; l < c.num_layers; ++l) {
    const engine::LayerGeometry& g = c.layers[l];
    const double width = 1.0 * shard.layers[l].kv_heads.size() * g.head_dim;
    const double visible = static_cast<double>(
        g.kind == engine::LayerKind::kSliding ? std::min<int64_t>(context, c.sliding_window) : context);
    bytes += 2.0 * visible * width * (g.k_eq_v ? 1 : 2);
  }
  return bytes;
}

// Weights read once per step whatever the batch (an untied embedding table only by one row per
// token, so not counted), plus each of `batch` sequences' KV at `context`.
inline double RankDecodeReadBytes(const engine::ModelConfig& c, const engine::RankShard& shard, int64_t context,
                                  int batch) {
  double weights = static_cast<double>(engine::cuda::RankWeightBytes(c, shard));
  if (!c.tie_word_embeddings) weights -= 2.0 * shard.vocab.size() * c.hidden_size;
  return weights + batch * RankKvReadBytes(c, shard, context);
}

}  // namespace temper::bench
