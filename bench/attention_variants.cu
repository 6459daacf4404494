// The split kernel's variants (attention_variants.h). Why these: on an H200 (2026-11-27,
// bench/history/issue-25-cuda-decode-kernels.md) a full layer's split kernel at head_dim 512 took 15 us more for each
// further round of keys (137 us at 8,192 keys), where its bytes would take 2 us. Its 4 query heads a block and 4 keys
// at once need 241-255 registers a thread (ptxas), so 2 blocks (8 warps) fit a multiprocessor and each warp's round of
// loads, RoPE and dots runs with little to overlap it. Fewer heads a block (more blocks, each key re-read from L2) and
// fewer keys at once (more rounds, fewer registers) trade against that.
#include "bench/attention_variants.h"

#include <cuda_runtime.h>

#include <string>

#include "engine/cuda/attention_kernel.h"
#include "engine/cuda/attention_launch.h"
#include "engine/cuda/cuda_status.h"
#include "engine/cuda/kernels.h"

namespace temper::bench {
namespace {

using engine::cuda::HeadRange;
using engine::cuda::KvLayerView;
using engine::cuda::RowTables;
namespace attention = engine::cuda::attention;

template <int HD, int GM, int KW>
void Launch(const KvLayerView& kv, const float* q, const float* k, const float* v, float* out, int rows,
            const RowTables& t, const HeadRange& heads, int splits, float* partials, cudaStream_t stream) {
  const attention::GroupGrid grid = attention::GroupGridOf(kv, heads, splits, rows, GM);
  if (kv.k) {
    attention::GroupAttentionKernel<HD, GM, KW, false><<<grid.blocks, attention::kWarps * 32, 0, stream>>>(
        kv, q, k, v, t, heads, splits, grid.head_chunks, partials, out);
  } else {
    attention::GroupAttentionKernel<HD, GM, KW, true><<<grid.blocks, attention::kWarps * 32, 0, stream>>>(
        kv, q, k, v, t, heads, splits, grid.head_chunks, partials, out);
  }
}

// Calls Launch<HD, GM, KW> for the listed variant equal to `want`; false for none.
template <int HD, int GM, int KW, typename... Args>
bool LaunchIf(AttentionVariant want, Args&&... args) {
  if (want.heads_per_block != GM || want.keys_at_once != KW) return false;
  Launch<HD, GM, KW>(args...);
  return true;
}

}  // namespace

std::vector<AttentionVariant> AttentionVariantsFor(int head_dim) {
  if (head_dim == 256) return {{2, 4}, {2, 8}, {2, 16}};
  if (head_dim == 512) return {{4, 4}, {4, 2}, {2, 4}, {2, 2}};
  return {};
}

Status LaunchAttentionVariant(const KvLayerView& kv, const float* q, const float* k, const float* v, float* out,
                              int rows, const RowTables& t, const HeadRange& heads, int splits, float* partials,
                              AttentionVariant variant, cudaStream_t stream) {
  constexpr const char* kWhat = "attention variant";
  TEMPER_RETURN_IF_ERROR(engine::cuda::CheckAttentionArguments(kWhat, kv, rows, heads, splits, partials));
  bool launched = false;
  if (kv.head_dim == 256) {
    launched = LaunchIf<256, 2, 4>(variant, kv, q, k, v, out, rows, t, heads, splits, partials, stream) ||
               LaunchIf<256, 2, 8>(variant, kv, q, k, v, out, rows, t, heads, splits, partials, stream) ||
               LaunchIf<256, 2, 16>(variant, kv, q, k, v, out, rows, t, heads, splits, partials, stream);
  } else if (kv.head_dim == 512) {
    launched = LaunchIf<512, 4, 4>(variant, kv, q, k, v, out, rows, t, heads, splits, partials, stream) ||
               LaunchIf<512, 4, 2>(variant, kv, q, k, v, out, rows, t, heads, splits, partials, stream) ||
               LaunchIf<512, 2, 4>(variant, kv, q, k, v, out, rows, t, heads, splits, partials, stream) ||
               LaunchIf<512, 2, 2>(variant, kv, q, k, v, out, rows, t, heads, splits, partials, stream);
  }
  if (!launched) {
    return Status::InvalidArgument(std::string(kWhat) + ": head_dim " + std::to_string(kv.head_dim) + " with " +
                                   std::to_string(variant.heads_per_block) + " query heads a block and " +
                                   std::to_string(variant.keys_at_once) + " keys at once is not a built variant");
  }
  TEMPER_CUDA_TRY(cudaGetLastError());
  if (splits == 1) return Status::OK();
  return engine::cuda::LaunchAttentionMerge(partials, out, rows, heads.q_heads, kv.head_dim, splits, t.positions,
                                            kv.window, kv.sliding, stream);
}

}  // namespace temper::bench
