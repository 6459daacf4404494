// What the attention launcher checks (attention.cu's) and how it picks and loads its kernel for a
// head_dim: one argument check and one head_dim dispatch.
//
// Host code. Thread safety: pure functions.
#pragma once

#include <string>
#include <type_traits>

#include "common/status.h"
#include "engine/cuda/rank_ops.h"

namespace temper::engine::cuda {

// InvalidArgument, prefixed by `what`, for a shape no attention kernel runs: no rows or heads, no
// splits, several splits without partials, or a V-only (k_eq_v) layer without k_norm and RoPE
// tables to rebuild its keys.
inline Status CheckAttentionArguments(const char* what, const KvLayerView& kv, int rows, const HeadRange& heads,
                                      int splits, const float* partials) {
  if (rows < 1 || heads.q_heads < 1 || heads.group < 1 || splits < 1 || (splits > 1 && !partials) ||
      (!kv.k && (!kv.k_norm || !kv.rope.cos || !kv.rope.sin))) {
    return Status::InvalidArgument(std::string(what) + ": rows " + std::to_string(rows) + ", q_heads " +
                                   std::to_string(heads.q_heads) + ", group " + std::to_string(heads.group) +
                                   ", splits " + std::to_string(splits) +
                                   " (several splits need partials; a V-only layer needs k_norm and RoPE tables)");
  }
  return Status::OK();
}

// launch(std::integral_constant<int, HD>{}) where head_dim is one of kDims, HD being it; false
// (and no launch) for any other.
template <int... kDims, typename Launch>
bool ForHeadDimIn(int head_dim, Launch&& launch) {
  return ((head_dim == kDims && (launch(std::integral_constant<int, kDims>{}), true)) || ...);
}

// launch(std::integral_constant<int, HD>{}) for head_dim HD in 32, 64, 128, 256 or 512 (the
// kernel's); InvalidArgument, prefixed by `what`, for any other.
template <typename Launch>
Status ForAttentionHeadDim(const char* what, int head_dim, Launch&& launch) {
  if (ForHeadDimIn<32, 64, 128, 256, 512>(head_dim, launch)) return Status::OK();
  return Status::InvalidArgument(std::string(what) + ": head_dim " + std::to_string(head_dim) +
                                 " is not 32, 64, 128, 256 or 512");
}

}  // namespace temper::engine::cuda
