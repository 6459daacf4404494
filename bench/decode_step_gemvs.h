// The GEMV launches of one decode step of one tensor-parallel rank, as engine/cuda/rank_forward.cpp
// runs them, with how many times a step launches each: what temper-kernel-bench times (the step's
// kernels for the 4xL4 estimate). Pure host code,
// tested on its own (tests/bench/decode_step_gemvs_test.cpp). Thread safety: values only.
#pragma once

#include <string>
#include <vector>

#include "engine/model/model_config.h"
#include "engine/model/tensor_parallel.h"

namespace temper::bench {

// A layer kind the model has: its first layer (every layer of a kind has the same shapes on a
// rank) and how many layers are of that kind.
struct LayerKindSpan {
  engine::LayerKind kind;
  int first = 0;
  int count = 0;
};
// Sliding first, then full; kinds without layers left out.
std::vector<LayerKindSpan> LayerKinds(const engine::ModelConfig& config);

// One GEMV launch of a decode step: `widths` outputs from `in` inputs, the parts of one launch (q,
// k and v); or gate_proj and up_proj with the GeGLU in the epilogue (`geglu`, widths {ffn}: the
// launch reads 2 · ffn weight rows).
struct StepGemv {
  std::string name;  // e.g. "q_proj/k_proj/v_proj sliding"
  int per_step = 0;  // launches in one decode step
  std::vector<int> widths;
  int in = 0;
  bool geglu = false;

  int WeightRows() const {
    int rows = 0;
    for (int w : widths) rows += w;
    return geglu ? 2 * rows : rows;
  }
  double Bytes() const { return 2.0 * WeightRows() * in; }  // the bf16 weights, read once
};

// The GEMVs of rank `shard.rank`'s decode step: for each layer kind its q/k(/v) and o_proj, then
// every layer's gate/up and down, then the LM head (the tied embedding).
std::vector<StepGemv> DecodeStepGemvs(const engine::ModelConfig& config, const engine::RankShard& shard);

}  // namespace temper::bench
