// The KV cache, in two parts: KvPager (which blocks and ring each sequence owns: bookkeeping every
// backend shares) and CpuKvStore (the CPU backend's storage for one tensor-parallel rank).
//
// Layout, chosen for Gemma 4's two layer kinds:
//  * sliding layers keep a ring of RingSlots = sliding_window + kMaxDraftTokens + 2 token slots
//    per sequence (slot = position % RingSlots). A target query at L reads positions > L - window
//    and the MTP drafter's (at L, not stored) the last window + 1 below L; a pass may append
//    kMaxDraftTokens + 1 positions and be truncated back to where it began, and the slack keeps
//    every position either reader needs until Truncate has dropped what that pass overwrote;
//  * full layers use paged blocks of `block_tokens` tokens from a shared pool; a sequence's block
//    table maps position p to block blocks[p / block_tokens], row p % block_tokens;
//  * k_eq_v layers store one copy, V (= v_norm(raw k_proj output)); K is rebuilt from it as
//    RoPE(V ⊙ k_norm.weight) at the key's position when it is read.
// Every rank of a tensor-parallel group makes the same paging decisions (one KvPager), and stores
// only its own KV heads.
//
// Snapshots serve the prefix cache. A snapshot pins a sequence's state at its current length L:
// it shares the sequence's blocks (blocks carry reference counts and return to the pool when the
// last holder lets go) and keeps a private copy of the sliding rings, the only state that is
// overwritten as the sequence goes on. A fork is a new sequence that starts from a snapshot: it
// shares the snapshot's full blocks and gets its own copy of the partly filled last block (the
// block that receives its next tokens) and of the rings. Invariant that makes sharing safe: a
// block is written only at rows >= the writer's length, and every other holder reads only rows
// below its own length, so writers never touch rows a sharer reads.
//
// Thread safety: KvPager is used by the one thread that schedules a forward pass. CpuKvStore's
// pointers may be written by its rank's threads for distinct (sequence, layer, position) cells.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"
#include "engine/backend.h"
#include "engine/model/model_config.h"
#include "engine/model/tensor_parallel.h"

namespace temper::engine {

// Token slots of one sequence's ring on a sliding layer.
inline int RingSlots(const ModelConfig& c) { return c.sliding_window + kMaxDraftTokens + 2; }

struct KvCacheOptions {
  int max_sequences = 8;       // live sequences at once
  int block_tokens = 16;       // tokens per paged block (full layers)
  int64_t max_tokens = 16384;  // paged capacity, summed over all live sequences and snapshots
  int max_snapshots = 0;       // sliding-window snapshots the prefix cache may pin
};

// What ForkSnapshot decided: the new sequence, and the block whose rows the storage must copy into
// the sequence's private last block (copy_from < 0: the snapshot ends on a block boundary).
struct KvFork {
  int seq = -1;
  int32_t copy_from = -1;
  int32_t copy_to = -1;
};

class KvPager {
 public:
  explicit KvPager(const KvCacheOptions& options);

  // A free sequence slot in [0, max_sequences). ResourceExhausted when all are taken.
  Result<int> AddSequence();
  // Frees the slot and drops its references to its blocks. NotFound if `seq` is not live.
  Status Release(int seq);
  bool Live(int seq) const;

  // A snapshot slot holding a reference to each of `seq`'s blocks at its current length.
  // NotFound if `seq` is not live; ResourceExhausted when all max_snapshots slots are taken.
  Result<int> TakeSnapshot(int seq);
  // Drops the snapshot's block references. NotFound if `snap` is not live.
  Status ReleaseSnapshot(int snap);
  bool SnapshotLive(int snap) const;
  int64_t SnapshotLength(int snap) const { return snaps_[snap].length; }
  // A new sequence of length SnapshotLength(snap), as the header describes. NotFound for a dead
  // snapshot; ResourceExhausted (nothing taken) when no sequence slot or no block is free.
  Result<KvFork> ForkSnapshot(int snap);

  // Makes the block table cover `length` tokens (allocating from the pool; never shrinks).
  // ResourceExhausted when the pool runs out; the blocks taken so far stay with the sequence.
  Status Reserve(int seq, int64_t length);
  int64_t Length(int seq) const { return seqs_[seq].length; }
  // Length(seq), or NotFound if `seq` is not live.
  Result<int64_t> LiveLength(int seq) const;
  // Records that a forward pass appended `tokens` to `seq` (whose blocks Reserve made room for).
  void Append(int seq, int64_t tokens);
  // Backend::Truncate's bookkeeping: checks the range it documents, shortens `seq` and returns
  // the blocks past its new end to the pool.
  Status Truncate(int seq, int64_t length);
  std::span<const int32_t> Blocks(int seq) const { return seqs_[seq].blocks; }

  int block_tokens() const { return options_.block_tokens; }
  int num_blocks() const { return num_blocks_; }
  int free_blocks() const { return static_cast<int>(free_.size()); }
  int max_sequences() const { return options_.max_sequences; }
  int max_snapshots() const { return options_.max_snapshots; }
  int live_sequences() const;
  int live_snapshots() const;
  // The counts of a backend's KvUsage (its byte sizes are the backend's to fill in).
  KvUsage Usage() const;

 private:
  struct Sequence {
    bool live = false;
    int64_t length = 0;
    std::vector<int32_t> blocks;
    // The shortest length Truncate may leave: the length before the last Append when that one was
    // short enough for the rings' slack, else the length; never below a snapshot's.
    int64_t floor = 0;
  };
  void Unref(const std::vector<int32_t>& blocks);

  KvCacheOptions options_;
  int num_blocks_;
  std::vector<int32_t> free_;  // a stack: the most recently freed block is reused first
  std::vector<int32_t> refs_;  // holders of each block (sequences and snapshots)
  std::vector<Sequence> seqs_;
  std::vector<Sequence> snaps_;
};

// One rank's KV storage in fp32 (the CPU backend's reference precision).
class CpuKvStore {
 public:
  CpuKvStore(const ModelConfig& config, const RankShard& shard, const KvPager& pager);
  CpuKvStore(const CpuKvStore&) = delete;
  CpuKvStore& operator=(const CpuKvStore&) = delete;

  // Allocates (or clears) the sliding rings of sequence slot `seq`. ResourceExhausted if the
  // memory cannot be had.
  Status Attach(int seq);
  // Frees the rings of `seq`.
  void Detach(int seq);

  // Copies `seq`'s rings into snapshot slot `snap` (allocating it) / snapshot `snap`'s rings into
  // sequence `seq` (which must be attached). ResourceExhausted if the memory cannot be had.
  Status SaveRings(int seq, int snap);
  void LoadRings(int snap, int seq);
  void DropSnapshot(int snap);
  // Copies every full layer's rows of block `from` into block `to`.
  void CopyBlock(int32_t from, int32_t to);

  // Whether layer `layer` stores K (false on k_eq_v layers, which store V only).
  bool StoresK(int layer) const { return layers_[layer].stores_k; }
  // [n_kv_local][head_dim] floats for the key / value at `pos` (K only when StoresK).
  float* K(int seq, int layer, int64_t pos, std::span<const int32_t> blocks);
  float* V(int seq, int layer, int64_t pos, std::span<const int32_t> blocks);

  uint64_t paged_bytes() const { return pool_.size() * sizeof(float); }
  uint64_t block_bytes() const { return static_cast<uint64_t>(block_floats_) * sizeof(float); }
  uint64_t ring_bytes() const { return static_cast<uint64_t>(ring_floats_) * sizeof(float); }

 private:
  struct LayerSlot {
    bool sliding = false;
    bool stores_k = true;
    int index = 0;           // among the sliding layers (ring) or the full layers (pool)
    int64_t row_floats = 0;  // n_kv_local * head_dim
    int64_t offset = 0;      // sliding: into a sequence's ring; full: into a block
  };
  float* Cell(int seq, const LayerSlot& l, int64_t pos, std::span<const int32_t> blocks, bool value);

  int ring_slots_;
  int block_tokens_;
  std::vector<LayerSlot> layers_;
  int64_t ring_floats_ = 0;                     // per sequence, all sliding layers, K and V
  int64_t block_floats_ = 0;                    // per block, all full layers
  std::vector<std::vector<float>> rings_;       // [max_sequences]
  std::vector<std::vector<float>> snap_rings_;  // [max_snapshots]
  std::vector<float> pool_;                     // [num_blocks * block_floats_]
};

}  // namespace temper::engine
