#include "engine/kv_cache.h"

#include <algorithm>
#include <new>

#include <fmt/format.h>

namespace temper::engine {

KvPager::KvPager(const KvCacheOptions& options)
    : options_(options),
      num_blocks_(static_cast<int>((options.max_tokens + options.block_tokens - 1) / options.block_tokens)),
      seqs_(options.max_sequences) {
  free_.reserve(num_blocks_);
  for (int b = num_blocks_ - 1; b >= 0; --b) free_.push_back(b);
}

Result<int> KvPager::AddSequence() {
  for (int s = 0; s < options_.max_sequences; ++s) {
    if (!seqs_[s].live) {
      seqs_[s] = Sequence{true, 0, {}};
      return s;
    }
  }
  return Status::ResourceExhausted(fmt::format("all {} KV-cache sequence slots are in use", options_.max_sequences));
}

bool KvPager::Live(int seq) const { return seq >= 0 && seq < options_.max_sequences && seqs_[seq].live; }

Status KvPager::Release(int seq) {
  if (!Live(seq)) return Status::NotFound(fmt::format("KV-cache sequence {} is not live", seq));
  for (int32_t b : seqs_[seq].blocks) free_.push_back(b);
  seqs_[seq] = Sequence{};
  return Status::OK();
}

Status KvPager::Reserve(int seq, int64_t length) {
  Sequence& s = seqs_[seq];
  const int64_t needed = (length + options_.block_tokens - 1) / options_.block_tokens;
  while (static_cast<int64_t>(s.blocks.size()) < needed) {
    if (free_.empty()) {
      return Status::ResourceExhausted(fmt::format(
          "KV cache full: sequence {} needs {} tokens but the pool of {} tokens is used up", seq, length,
          int64_t{num_blocks_} * options_.block_tokens));
    }
    s.blocks.push_back(free_.back());
    free_.pop_back();
  }
  return Status::OK();
}

CpuKvStore::CpuKvStore(const ModelConfig& c, const RankShard& shard, const KvPager& pager)
    : window_(c.sliding_window), block_tokens_(pager.block_tokens()), rings_(pager.max_sequences()) {
  int sliding = 0, full = 0;
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerGeometry& g = c.layers[l];
    LayerSlot s;
    s.sliding = g.kind == LayerKind::kSliding;
    s.stores_k = !g.k_eq_v;
    s.row_floats = int64_t{shard.layers[l].kv_heads.size()} * g.head_dim;
    if (s.sliding) {
      s.index = sliding++;
      s.offset = ring_floats_;
      ring_floats_ += 2 * int64_t{window_} * s.row_floats;  // K then V
    } else {
      s.index = full++;
      s.offset = block_floats_;
      block_floats_ += (s.stores_k ? 2 : 1) * int64_t{block_tokens_} * s.row_floats;  // [K,] V
    }
    layers_.push_back(s);
  }
  pool_.resize(static_cast<size_t>(int64_t{pager.num_blocks()} * block_floats_));
}

Status CpuKvStore::Attach(int seq) {
  try {
    rings_[seq].assign(static_cast<size_t>(ring_floats_), 0.0f);
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted(fmt::format("cannot allocate {} bytes of sliding-window KV cache", ring_floats_ * 4));
  }
  return Status::OK();
}

void CpuKvStore::Detach(int seq) { std::vector<float>().swap(rings_[seq]); }

float* CpuKvStore::Cell(int seq, const LayerSlot& l, int64_t pos, std::span<const int32_t> blocks, bool value) {
  if (l.sliding) {
    const int64_t slot = pos % window_;
    return rings_[seq].data() + l.offset + (value ? int64_t{window_} * l.row_floats : 0) + slot * l.row_floats;
  }
  const int64_t block = blocks[static_cast<size_t>(pos / block_tokens_)];
  const int64_t row = pos % block_tokens_;
  const int64_t v_offset = l.stores_k ? int64_t{block_tokens_} * l.row_floats : 0;
  return pool_.data() + block * block_floats_ + l.offset + (value ? v_offset : 0) + row * l.row_floats;
}

float* CpuKvStore::K(int seq, int layer, int64_t pos, std::span<const int32_t> blocks) {
  return Cell(seq, layers_[layer], pos, blocks, /*value=*/false);
}

float* CpuKvStore::V(int seq, int layer, int64_t pos, std::span<const int32_t> blocks) {
  return Cell(seq, layers_[layer], pos, blocks, /*value=*/true);
}

}  // namespace temper::engine
