#include "engine/kv_cache.h"

#include <algorithm>
#include <new>

#include <fmt/format.h>

namespace temper::engine {

KvPager::KvPager(const KvCacheOptions& options)
    : options_(options),
      num_blocks_(static_cast<int>((options.max_tokens + options.block_tokens - 1) / options.block_tokens)),
      refs_(static_cast<size_t>(num_blocks_), 0),
      seqs_(options.max_sequences),
      snaps_(std::max(0, options.max_snapshots)) {
  free_.reserve(num_blocks_);
  for (int b = num_blocks_ - 1; b >= 0; --b) free_.push_back(b);
}

Result<int> KvPager::AddSequence() {
  for (int s = 0; s < options_.max_sequences; ++s) {
    if (!seqs_[s].live) {
      seqs_[s] = Sequence{.live = true};
      return s;
    }
  }
  return Status::ResourceExhausted(fmt::format("all {} KV-cache sequence slots are in use", options_.max_sequences));
}

bool KvPager::Live(int seq) const { return seq >= 0 && seq < options_.max_sequences && seqs_[seq].live; }

void KvPager::Unref(const std::vector<int32_t>& blocks) {
  for (int32_t b : blocks) {
    if (--refs_[b] == 0) free_.push_back(b);
  }
}

Status KvPager::Release(int seq) {
  if (!Live(seq)) return Status::NotFound(fmt::format("KV-cache sequence {} is not live", seq));
  Unref(seqs_[seq].blocks);
  seqs_[seq] = Sequence{};
  return Status::OK();
}

int KvPager::live_sequences() const {
  return static_cast<int>(std::count_if(seqs_.begin(), seqs_.end(), [](const Sequence& s) { return s.live; }));
}

int KvPager::live_snapshots() const {
  return static_cast<int>(std::count_if(snaps_.begin(), snaps_.end(), [](const Sequence& s) { return s.live; }));
}

bool KvPager::SnapshotLive(int snap) const {
  return snap >= 0 && snap < static_cast<int>(snaps_.size()) && snaps_[snap].live;
}

Result<int> KvPager::TakeSnapshot(int seq) {
  if (!Live(seq)) return Status::NotFound(fmt::format("KV-cache sequence {} is not live", seq));
  for (size_t s = 0; s < snaps_.size(); ++s) {
    if (snaps_[s].live) continue;
    const Sequence& from = seqs_[seq];
    const size_t used = static_cast<size_t>((from.length + options_.block_tokens - 1) / options_.block_tokens);
    snaps_[s] = Sequence{.live = true,
                         .length = from.length,
                         .blocks = {from.blocks.begin(), from.blocks.begin() + static_cast<long>(used)}};
    for (int32_t b : snaps_[s].blocks) ++refs_[b];
    // The snapshot reads the rows below its length in blocks the sequence still writes.
    seqs_[seq].floor = from.length;
    return static_cast<int>(s);
  }
  return Status::ResourceExhausted(fmt::format("all {} KV-cache snapshot slots are in use", snaps_.size()));
}

Status KvPager::ReleaseSnapshot(int snap) {
  if (!SnapshotLive(snap)) return Status::NotFound(fmt::format("KV-cache snapshot {} is not live", snap));
  Unref(snaps_[snap].blocks);
  snaps_[snap] = Sequence{};
  return Status::OK();
}

Result<KvFork> KvPager::ForkSnapshot(int snap) {
  if (!SnapshotLive(snap)) return Status::NotFound(fmt::format("KV-cache snapshot {} is not live", snap));
  const Sequence& from = snaps_[snap];
  const bool partial = from.length % options_.block_tokens != 0;
  if (partial && free_.empty()) {
    return Status::ResourceExhausted("KV cache full: no free block to fork a cached prefix into");
  }
  TEMPER_ASSIGN_OR_RETURN(int seq, AddSequence());
  KvFork fork;
  fork.seq = seq;
  Sequence& to = seqs_[seq];
  to.length = from.length;
  to.floor = from.length;
  to.blocks = from.blocks;
  if (partial) {
    // The last block receives the fork's next tokens: it gets a private copy.
    fork.copy_from = to.blocks.back();
    fork.copy_to = free_.back();
    free_.pop_back();
    to.blocks.back() = fork.copy_to;
  }
  for (int32_t b : to.blocks) ++refs_[b];
  return fork;
}

Status KvPager::Reserve(int seq, int64_t length) {
  Sequence& s = seqs_[seq];
  const int64_t needed = (length + options_.block_tokens - 1) / options_.block_tokens;
  while (static_cast<int64_t>(s.blocks.size()) < needed) {
    if (free_.empty()) {
      return Status::ResourceExhausted(
          fmt::format("KV cache full: sequence {} needs {} tokens but the pool of {} tokens is used up", seq, length,
                      int64_t{num_blocks_} * options_.block_tokens));
    }
    s.blocks.push_back(free_.back());
    refs_[free_.back()] = 1;
    free_.pop_back();
  }
  return Status::OK();
}

void KvPager::Append(int seq, int64_t tokens) {
  Sequence& s = seqs_[seq];
  s.floor = tokens <= kMaxDraftTokens + 1 ? s.length : s.length + tokens;
  s.length += tokens;
}

Status KvPager::Truncate(int seq, int64_t length) {
  if (!Live(seq)) return Status::NotFound(fmt::format("KV-cache sequence {} is not live", seq));
  Sequence& s = seqs_[seq];
  if (length < s.floor || length > s.length) {
    return Status::FailedPrecondition(fmt::format(
        "KV-cache sequence {}: cannot truncate to {} tokens; it holds {} and can go back to {} (the start of its "
        "last pass of at most {} tokens, or a snapshot)",
        seq, length, s.length, s.floor, kMaxDraftTokens + 1));
  }
  s.length = length;
  const size_t needed = static_cast<size_t>((length + options_.block_tokens - 1) / options_.block_tokens);
  if (s.blocks.size() > needed) {
    Unref({s.blocks.begin() + static_cast<long>(needed), s.blocks.end()});
    s.blocks.resize(needed);
  }
  return Status::OK();
}

CpuKvStore::CpuKvStore(const ModelConfig& c, const RankShard& shard, const KvPager& pager)
    : ring_slots_(RingSlots(c)),
      block_tokens_(pager.block_tokens()),
      rings_(pager.max_sequences()),
      snap_rings_(std::max(0, pager.max_snapshots())) {
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
      ring_floats_ += 2 * int64_t{ring_slots_} * s.row_floats;  // K then V
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
    return Status::ResourceExhausted(
        fmt::format("cannot allocate {} bytes of sliding-window KV cache", ring_floats_ * 4));
  }
  return Status::OK();
}

void CpuKvStore::Detach(int seq) { std::vector<float>().swap(rings_[seq]); }

Status CpuKvStore::SaveRings(int seq, int snap) {
  try {
    snap_rings_[snap] = rings_[seq];
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted(
        fmt::format("cannot allocate {} bytes for a sliding-window snapshot", ring_floats_ * 4));
  }
  return Status::OK();
}

void CpuKvStore::LoadRings(int snap, int seq) {
  std::copy(snap_rings_[snap].begin(), snap_rings_[snap].end(), rings_[seq].begin());
}

void CpuKvStore::DropSnapshot(int snap) { std::vector<float>().swap(snap_rings_[snap]); }

void CpuKvStore::CopyBlock(int32_t from, int32_t to) {
  const float* src = pool_.data() + int64_t{from} * block_floats_;
  std::copy(src, src + block_floats_, pool_.data() + int64_t{to} * block_floats_);
}

float* CpuKvStore::Cell(int seq, const LayerSlot& l, int64_t pos, std::span<const int32_t> blocks, bool value) {
  if (l.sliding) {
    const int64_t slot = pos % ring_slots_;
    return rings_[seq].data() + l.offset + (value ? int64_t{ring_slots_} * l.row_floats : 0) + slot * l.row_floats;
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

Result<int64_t> KvPager::LiveLength(int seq) const {
  if (!Live(seq)) return Status::NotFound(fmt::format("sequence {} is not live", seq));
  return Length(seq);
}

KvUsage KvPager::Usage() const {
  KvUsage u;
  u.block_tokens = block_tokens();
  u.total_blocks = num_blocks();
  u.free_blocks = free_blocks();
  u.live_sequences = live_sequences();
  u.max_sequences = max_sequences();
  u.live_snapshots = live_snapshots();
  u.max_snapshots = max_snapshots();
  return u;
}

}  // namespace temper::engine
