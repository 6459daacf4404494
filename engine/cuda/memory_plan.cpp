#include "engine/cuda/memory_plan.h"

#include "engine/cuda/device_rank.h"
#include "engine/kv_cache.h"

#include <algorithm>

#include <fmt/format.h>

namespace temper::engine::cuda {

namespace {

constexpr uint64_t kBf16 = 2;
constexpr uint64_t kF32 = 4;
// Every buffer is rounded up to 256 bytes, as cudaMalloc aligns.
uint64_t Align(uint64_t n) { return (n + 255) / 256 * 256; }

}  // namespace

uint64_t RankWeightBytes(const ModelConfig& c, const RankShard& shard) {
  const uint64_t H = static_cast<uint64_t>(c.hidden_size);
  uint64_t total = 0;
  // One allocation per tensor, as DeviceRank uploads them.
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerGeometry& g = c.layers[l];
    const uint64_t hd = static_cast<uint64_t>(g.head_dim);
    const uint64_t q = static_cast<uint64_t>(shard.layers[l].q_heads.size()) * hd;
    const uint64_t kv = static_cast<uint64_t>(shard.layers[l].kv_heads.size()) * hd;
    const uint64_t ffn = static_cast<uint64_t>(shard.ffn.size());
    total += 2 * Align(q * H * kBf16);                      // q_proj, o_proj
    total += Align(kv * H * kBf16) * (g.k_eq_v ? 1 : 2);    // k_proj (and v_proj)
    total += 3 * Align(ffn * H * kBf16);                    // gate, up, down
    total += 2 * Align(hd * kBf16) + 4 * Align(H * kBf16);  // q/k norms, four sandwich norms
  }
  const uint64_t vocab = static_cast<uint64_t>(shard.vocab.size());
  total += Align(vocab * H * kBf16) * (c.tie_word_embeddings ? 1 : 2);
  total += Align(H * kBf16);  // final norm
  return total;
}

uint64_t RankWorkspaceBytes(const ModelConfig& c, const RankShard& shard, const MemoryPlanInput& in) {
  RankLimits limits;
  limits.max_rows = std::max(in.max_batch, in.max_prefill_tokens);
  limits.max_out_rows = std::max(in.max_sequences, in.max_batch);
  limits.max_sequences = in.max_sequences;
  limits.max_snapshots = in.max_snapshots;
  limits.max_context = in.max_context;
  limits.block_tokens = in.block_tokens;
  limits.decode_splits = in.attention_splits;
  limits.top_candidates = std::min(in.top_candidates, shard.vocab.size());
  return DeviceRankWorkspaceBytes(c, shard, limits) + kGemmWorkspaceBytes;
}

Result<GpuMemoryPlan> PlanGpuMemory(const ModelConfig& c, const RankShard& shard, const MemoryPlanInput& in) {
  if (!(in.kv_fraction > 0 && in.kv_fraction <= 1)) {
    return Status::InvalidArgument(fmt::format("GPU memory plan: kv_fraction {} is outside (0, 1]", in.kv_fraction));
  }
  if (in.ranks_on_device < 1 || in.max_batch < 1 || in.max_prefill_tokens < 1 || in.max_sequences < 1 ||
      in.max_snapshots < 0 || in.block_tokens < 1 || in.attention_splits < 1 || in.max_context < 1 ||
      in.top_candidates < 0 || in.tp < 1) {
    return Status::InvalidArgument(
        "GPU memory plan: ranks, batch, prefill, sequences, block_tokens, splits, context "
        "and tp must be positive (max_snapshots and top_candidates may be 0)");
  }
  GpuMemoryPlan p;
  p.ranks_on_device = in.ranks_on_device;
  p.rank.weights = RankWeightBytes(c, shard) + in.drafter_weight_bytes;
  p.rank.workspace = RankWorkspaceBytes(c, shard, in) + in.drafter_workspace_bytes;
  p.rank.all_reduce = in.tp > 1 ? all_reduce::DeviceBytesPerRank(in.tp, in.all_reduce_slot_bytes) : 0;
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerGeometry& g = c.layers[l];
    const uint64_t row =
        static_cast<uint64_t>(shard.layers[l].kv_heads.size()) * static_cast<uint64_t>(g.head_dim) * kBf16;
    if (g.kind == LayerKind::kSliding) {
      p.rank.ring_per_seq += 2 * row * static_cast<uint64_t>(RingSlots(c));
    } else {
      p.rank.kv_per_token += row * (g.k_eq_v ? 1 : 2);
    }
  }
  p.rank.ring_per_seq = Align(p.rank.ring_per_seq);
  p.rank.block = p.rank.kv_per_token * static_cast<uint64_t>(in.block_tokens);
  const uint64_t n = static_cast<uint64_t>(in.ranks_on_device);
  p.weight_bytes = p.rank.weights * n;
  p.workspace_bytes = p.rank.workspace * n;
  p.all_reduce_bytes = p.rank.all_reduce * n;
  p.ring_bytes = p.rank.ring_per_seq * static_cast<uint64_t>(in.max_sequences + in.max_snapshots) * n;
  p.reserve_bytes = kCudaReservePerRankBytes * n + (in.nccl ? kNcclReserveBytes : 0);
  const uint64_t fixed = p.weight_bytes + p.workspace_bytes + p.all_reduce_bytes + p.ring_bytes + p.reserve_bytes;
  if (fixed > in.free_bytes) {
    return Status::ResourceExhausted(fmt::format(
        "GPU memory plan: weights {} B + workspace {} B + all-reduce buffers {} B + sliding rings {} B for {} rank(s), "
        "and {} B kept for CUDA{}, exceed the {} B free",
        p.weight_bytes, p.workspace_bytes, p.all_reduce_bytes, p.ring_bytes, n, p.reserve_bytes,
        in.nccl ? " and NCCL" : "", in.free_bytes));
  }
  if (p.rank.block == 0) {
    return Status::InvalidArgument("GPU memory plan: the model has no full-attention layer to page");
  }
  const uint64_t pool = static_cast<uint64_t>(static_cast<double>(in.free_bytes - fixed) * in.kv_fraction);
  p.num_blocks = static_cast<int64_t>(pool / (p.rank.block * n));
  if (p.num_blocks < in.max_sequences) {
    return Status::ResourceExhausted(fmt::format(
        "GPU memory plan: {} B left for the KV pool hold {} blocks of {} B per rank, fewer than the {} sequences", pool,
        p.num_blocks, p.rank.block, in.max_sequences));
  }
  p.kv_pool_bytes = static_cast<uint64_t>(p.num_blocks) * p.rank.block * n;
  p.kv_capacity_tokens = p.num_blocks * in.block_tokens;
  p.margin_bytes = in.free_bytes - fixed - p.kv_pool_bytes;
  return p;
}

}  // namespace temper::engine::cuda
