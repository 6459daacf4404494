#include "engine/cuda/memory_plan.h"

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
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerGeometry& g = c.layers[l];
    const uint64_t hd = static_cast<uint64_t>(g.head_dim);
    const uint64_t q = static_cast<uint64_t>(shard.layers[l].q_heads.size()) * hd;
    const uint64_t kv = static_cast<uint64_t>(shard.layers[l].kv_heads.size()) * hd;
    const uint64_t ffn = static_cast<uint64_t>(shard.ffn.size());
    uint64_t elems = q * H + kv * H * (g.k_eq_v ? 1 : 2) + H * q + 3 * ffn * H;
    elems += 2 * hd + 4 * H;  // q_norm, k_norm, four sandwich norms
    total += Align(elems * kBf16);
  }
  const uint64_t vocab = static_cast<uint64_t>(shard.vocab.size());
  total += Align(vocab * H * kBf16) * (c.tie_word_embeddings ? 1 : 2);
  total += Align(H * kBf16);  // final norm
  return total;
}

uint64_t RankWorkspaceBytes(const ModelConfig& c, const RankShard& shard, const MemoryPlanInput& in) {
  const uint64_t rows = static_cast<uint64_t>(std::max(in.max_batch, in.max_prefill_tokens));
  const uint64_t H = static_cast<uint64_t>(c.hidden_size);
  uint64_t q_width = 0, kv_width = 0, max_hd = 0;
  for (int l = 0; l < c.num_layers; ++l) {
    const uint64_t hd = static_cast<uint64_t>(c.layers[l].head_dim);
    q_width = std::max(q_width, static_cast<uint64_t>(shard.layers[l].q_heads.size()) * hd);
    kv_width = std::max(kv_width, static_cast<uint64_t>(shard.layers[l].kv_heads.size()) * hd);
    max_hd = std::max(max_hd, hd);
  }
  const uint64_t ffn = static_cast<uint64_t>(shard.ffn.size());
  uint64_t b = 0;
  b += 3 * Align(rows * H * kF32);                     // residual x, normed xn, projection partial sum
  b += Align(rows * H * kBf16);                        // bf16 copy of xn for the matrix products
  b += Align(rows * q_width * kF32) * 2;               // q, attention output
  b += Align(rows * q_width * kBf16);                  // bf16 attention output for o_proj
  b += Align(rows * kv_width * kF32) * 2;              // fresh k, v
  b += Align(rows * ffn * kF32) * 2;                   // gate, up
  b += Align(rows * ffn * kBf16);                      // bf16 GeGLU output for down_proj
  // Split-KV partials: per (decode row, local head, split) a max, a sum and a head_dim accumulator.
  const uint64_t heads = q_width / std::max<uint64_t>(1, max_hd) + 1;
  b += Align(static_cast<uint64_t>(in.max_batch) * heads * static_cast<uint64_t>(in.attention_splits) * (max_hd + 2) *
             kF32);
  b += Align(static_cast<uint64_t>(in.max_batch) * static_cast<uint64_t>(shard.vocab.size()) * kF32);  // logits
  b += Align(rows * 4 * 8);                            // row tables (positions, slots, token ids)
  b += Align(static_cast<uint64_t>(in.max_sequences) * 4 * 1024);  // block tables on the device
  return b;
}

Result<GpuMemoryPlan> PlanGpuMemory(const ModelConfig& c, const RankShard& shard, const MemoryPlanInput& in) {
  if (!(in.kv_fraction > 0 && in.kv_fraction <= 1)) {
    return Status::InvalidArgument(fmt::format("GPU memory plan: kv_fraction {} is outside (0, 1]", in.kv_fraction));
  }
  if (in.ranks_on_device < 1 || in.max_batch < 1 || in.max_prefill_tokens < 1 || in.max_sequences < 1 ||
      in.max_snapshots < 0 || in.block_tokens < 1 || in.attention_splits < 1) {
    return Status::InvalidArgument("GPU memory plan: ranks, batch, prefill, sequences, block_tokens and splits must be "
                                   "positive (max_snapshots may be 0)");
  }
  GpuMemoryPlan p;
  p.ranks_on_device = in.ranks_on_device;
  p.rank.weights = RankWeightBytes(c, shard);
  p.rank.workspace = RankWorkspaceBytes(c, shard, in);
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerGeometry& g = c.layers[l];
    const uint64_t row = static_cast<uint64_t>(shard.layers[l].kv_heads.size()) * static_cast<uint64_t>(g.head_dim) *
                         kBf16;
    if (g.kind == LayerKind::kSliding) {
      p.rank.ring_per_seq += 2 * row * static_cast<uint64_t>(c.sliding_window);
    } else {
      p.rank.kv_per_token += row * (g.k_eq_v ? 1 : 2);
    }
  }
  p.rank.ring_per_seq = Align(p.rank.ring_per_seq);
  p.rank.block = p.rank.kv_per_token * static_cast<uint64_t>(in.block_tokens);
  const uint64_t n = static_cast<uint64_t>(in.ranks_on_device);
  p.weight_bytes = p.rank.weights * n;
  p.workspace_bytes = p.rank.workspace * n;
  p.ring_bytes = p.rank.ring_per_seq * static_cast<uint64_t>(in.max_sequences + in.max_snapshots) * n;
  const uint64_t fixed = p.weight_bytes + p.workspace_bytes + p.ring_bytes;
  if (fixed > in.free_bytes) {
    return Status::ResourceExhausted(fmt::format(
        "GPU memory plan: weights {} B + workspace {} B + sliding rings {} B for {} rank(s) exceed the {} B free",
        p.weight_bytes, p.workspace_bytes, p.ring_bytes, n, in.free_bytes));
  }
  if (p.rank.block == 0) {
    return Status::InvalidArgument("GPU memory plan: the model has no full-attention layer to page");
  }
  const uint64_t pool = static_cast<uint64_t>(static_cast<double>(in.free_bytes - fixed) * in.kv_fraction);
  p.num_blocks = static_cast<int64_t>(pool / (p.rank.block * n));
  if (p.num_blocks < in.max_sequences) {
    return Status::ResourceExhausted(fmt::format(
        "GPU memory plan: {} B left for the KV pool hold {} blocks of {} B per rank, fewer than the {} sequences",
        pool, p.num_blocks, p.rank.block, in.max_sequences));
  }
  p.kv_pool_bytes = static_cast<uint64_t>(p.num_blocks) * p.rank.block * n;
  p.kv_capacity_tokens = p.num_blocks * in.block_tokens;
  return p;
}

}  // namespace temper::engine::cuda
