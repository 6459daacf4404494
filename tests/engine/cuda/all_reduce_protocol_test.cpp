// A host model of the one-shot all-reduce (engine/cuda/all_reduce_protocol.h), run without a GPU: tp
// ranks, each a thread making the same sequence of calls; each call launches its grid of blocks as
// threads and joins them (a stream runs one kernel after another); every block runs the kernel's
// steps with the protocol's own functions, over atomics in place of device memory (flags with
// release and acquire, data relaxed). Blocks are held back at random before they push, sum or end,
// as a slow or late multiprocessor would be; a block held back before it sums is when a peer's next
// call, if the protocol let it, would write over what the block is about to read.
//
// Host-staged runs the protocol's word variant (each element an 8-byte word carrying its call's
// sequence, one shared buffer), as HostStagedKernel does.
//
// The model runs the protocol the kernel runs (one sequence number per call) and, as the
// counterexample, the first protocol's rule (each block counting its own calls), which corrupts sums
// as soon as the grid changes between calls: that bug is why the rule changed.
#include "engine/cuda/all_reduce_protocol.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <bit>
#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace temper::engine::cuda::all_reduce {
namespace {

using std::chrono::microseconds;

// Where a block takes its call's sequence number from.
enum class SequenceRule {
  kPerCall,                // all_reduce_protocol.h: the rank's call count, moved on by the call's last block
  kPerBlockFirstProtocol,  // the first protocol: each block's own count of the calls it took part in
};

struct ModelOptions {
  int tp = 4;
  int64_t slot_floats = 65536;
  bool host_staged = false;  // one shared buffer of words that every rank writes once and reads whole
  SequenceRule rule = SequenceRule::kPerCall;
  uint64_t seed = 1;
};

// Exact in fp32 and in any summation order (multiples of 1/8 below 2^12), and distinct per (rank,
// call, element) often enough that a value from another call or sender shows in the sum.
float Input(int rank, int call, int64_t i) {
  uint64_t h = (static_cast<uint64_t>(rank) << 48) ^ (static_cast<uint64_t>(call) << 24) ^ static_cast<uint64_t>(i);
  h = (h ^ (h >> 31)) * 0x9E3779B97F4A7C15ull;
  h ^= h >> 29;
  return static_cast<float>(h % 8192) / 8.0f;
}

// A slow or late multiprocessor: now and then, a block sleeps 0.1-1.6 ms.
void MaybeStall(std::mt19937_64& rng, int one_in) {
  if (rng() % one_in == 0) std::this_thread::sleep_for(microseconds(100 + rng() % 1500));
}

class ProtocolModel {
 public:
  explicit ProtocolModel(const ModelOptions& o) : o_(o) {
    if (o.host_staged) {
      words_ = std::vector<std::atomic<uint64_t>>(static_cast<size_t>(2 * o.tp * o.slot_floats));
    } else {
      for (int q = 0; q < o.tp; ++q) {
        buffers_.push_back(std::make_unique<Buffer>(static_cast<size_t>(2 * o.tp * o.slot_floats),
                                                    static_cast<size_t>(2 * o.tp * kMaxBlocks)));
      }
    }
    for (int r = 0; r < o.tp; ++r) ranks_.push_back(std::make_unique<RankState>());
  }

  // Every rank makes one all-reduce of sizes[c] floats per call c (messages larger than a slot in
  // rounds, as DeviceAllReduce does). Returns "" when every rank holds every exact sum, else the
  // first wrong element or the wait that never ended.
  std::string Run(const std::vector<int64_t>& sizes) {
    const int tp = o_.tp;
    std::vector<std::vector<std::vector<float>>> data(tp);  // [rank][call][element]
    for (int r = 0; r < tp; ++r) {
      for (size_t c = 0; c < sizes.size(); ++c) {
        std::vector<float> v(static_cast<size_t>(sizes[c]));
        for (int64_t i = 0; i < sizes[c]; ++i) v[i] = Input(r, static_cast<int>(c), i);
        data[r].push_back(std::move(v));
      }
    }
    std::vector<std::thread> ranks;
    for (int r = 0; r < tp; ++r) {
      ranks.emplace_back([&, r] {
        for (size_t c = 0; c < sizes.size() && !abort_; ++c) {
          float* d = data[r][c].data();
          for (int64_t offset = 0; offset < sizes[c]; offset += o_.slot_floats) {
            Launch(r, d + offset, std::min(o_.slot_floats, sizes[c] - offset));
          }
        }
      });
    }
    for (auto& t : ranks) t.join();
    if (abort_) return failure_;
    for (size_t c = 0; c < sizes.size(); ++c) {
      for (int64_t i = 0; i < sizes[c]; ++i) {
        float want = 0;
        for (int s = 0; s < tp; ++s) want += Input(s, static_cast<int>(c), i);
        for (int r = 0; r < tp; ++r) {
          if (data[r][c][i] != want) {
            return "call " + std::to_string(c) + " (" + std::to_string(sizes[c]) + " floats), rank " +
                   std::to_string(r) + ", element " + std::to_string(i) + ": " + std::to_string(data[r][c][i]) +
                   " instead of " + std::to_string(want);
          }
        }
      }
    }
    return "";
  }

 private:
  struct Buffer {
    Buffer(size_t slots, size_t flags) : slot(slots), flag(flags) {}
    std::vector<std::atomic<float>> slot;     // [2][tp][slot_floats]
    std::vector<std::atomic<uint32_t>> flag;  // [2][tp][kMaxBlocks]
  };
  struct RankState {
    std::atomic<uint32_t> calls{0}, arrivals{0};  // the protocol's CallState
    uint32_t block_calls[kMaxBlocks] = {};        // the first protocol's per-block counts
  };

  // One kernel launch: its blocks run at once; the launch ends when all of them have.
  void Launch(int rank, float* data, int64_t n) {
    const int grid = OneShotGrid(n);
    const uint32_t launch = launches_[rank]++;
    std::vector<std::thread> blocks;
    for (int b = 0; b < grid; ++b) blocks.emplace_back([=, this] { Block(rank, b, grid, data, n, launch); });
    for (auto& t : blocks) t.join();
  }

  void Block(int rank, int b, int grid, float* data, int64_t n, uint32_t launch) {
    RankState& state = *ranks_[rank];
    std::mt19937_64 rng(o_.seed * 1000003 + (uint64_t{launch} << 16) + (uint64_t(rank) << 8) + uint64_t(b));
    const uint32_t seq =
        o_.rule == SequenceRule::kPerCall ? state.calls.load(std::memory_order_relaxed) + 1 : state.block_calls[b] + 1;
    const Chunk chunk = OneShotChunk(n, grid, b);

    MaybeStall(rng, 12);
    if (o_.host_staged) {
      if (!PushAndSumWords(rank, seq, chunk, data, rng)) return;
    } else if (!PushAndSumFlagged(rank, b, seq, chunk, data, rng)) {
      return;
    }

    MaybeStall(rng, 12);
    if (o_.rule == SequenceRule::kPerBlockFirstProtocol) {
      state.block_calls[b] = seq;
    } else if (LastToArrive(state.arrivals.fetch_add(1, std::memory_order_acq_rel), grid)) {
      state.arrivals.store(0, std::memory_order_relaxed);
      state.calls.store(seq, std::memory_order_relaxed);
    }
  }

  // P2P: push into every rank's buffer, raise the flags, wait for every sender's, sum. False when
  // the run was aborted.
  bool PushAndSumFlagged(int rank, int b, uint32_t seq, Chunk chunk, float* data, std::mt19937_64& rng) {
    const int tp = o_.tp;
    const int64_t my_slot = SlotOffset(seq, tp, rank, o_.slot_floats);
    for (auto& q : buffers_) {
      for (int64_t i = chunk.begin; i < chunk.end; ++i) q->slot[my_slot + i].store(data[i], std::memory_order_relaxed);
      q->flag[FlagOffset(seq, tp, rank, b)].store(seq, std::memory_order_release);
    }

    Buffer& mine = *buffers_[rank];
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    for (int s = 0; s < tp; ++s) {
      const bool arrived = Await(
          deadline,
          [&] { return FlagReached(mine.flag[FlagOffset(seq, tp, s, b)].load(std::memory_order_acquire), seq); },
          [&] {
            return "rank " + std::to_string(rank) + " block " + std::to_string(b) + " waited 20 s for sender " +
                   std::to_string(s) + "'s flag of call " + std::to_string(seq);
          });
      if (!arrived) return false;
    }

    MaybeStall(rng, 6);
    for (int64_t i = chunk.begin; i < chunk.end; ++i) {
      float acc = 0;
      for (int s = 0; s < tp; ++s) {
        acc += mine.slot[SlotOffset(seq, tp, s, o_.slot_floats) + i].load(std::memory_order_relaxed);
      }
      data[i] = acc;
    }
    return true;
  }

  // Host-staged: write my words once into the shared buffer, then poll every sender's word of each
  // element until it carries this call's seq. Relaxed atomics: the word itself is the message.
  bool PushAndSumWords(int rank, uint32_t seq, Chunk chunk, float* data, std::mt19937_64& rng) {
    const int tp = o_.tp;
    const int64_t my_slot = SlotOffset(seq, tp, rank, o_.slot_floats);
    for (int64_t i = chunk.begin; i < chunk.end; ++i) {
      words_[my_slot + i].store(PackWord(std::bit_cast<uint32_t>(data[i]), seq), std::memory_order_relaxed);
      if (i == chunk.begin) MaybeStall(rng, 6);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    for (int64_t i = chunk.begin; i < chunk.end; ++i) {
      float acc = 0;
      for (int s = 0; s < tp; ++s) {
        uint64_t word = 0;
        const bool arrived = Await(
            deadline,
            [&] {
              word = words_[SlotOffset(seq, tp, s, o_.slot_floats) + i].load(std::memory_order_relaxed);
              return WordReached(word, seq);
            },
            [&] {
              return "rank " + std::to_string(rank) + " waited 20 s for sender " + std::to_string(s) + "'s element " +
                     std::to_string(i) + " of call " + std::to_string(seq);
            });
        if (!arrived) return false;
        acc += std::bit_cast<float>(WordValueBits(word));
      }
      data[i] = acc;
    }
    return true;
  }

  // Polls until `ready()`; false when the run was aborted, or when `deadline` passed (the run then
  // fails with `waited()`'s words).
  template <typename Ready, typename Waited>
  bool Await(std::chrono::steady_clock::time_point deadline, Ready ready, Waited waited) {
    while (!ready()) {
      if (abort_) return false;
      if (std::chrono::steady_clock::now() > deadline) {
        Fail(waited());
        return false;
      }
      std::this_thread::yield();
    }
    return true;
  }

  void Fail(const std::string& why) {
    bool expected = false;
    if (abort_.compare_exchange_strong(expected, true)) failure_ = why;
  }

  ModelOptions o_;
  std::vector<std::unique_ptr<Buffer>> buffers_;  // P2P: one per rank
  std::vector<std::atomic<uint64_t>> words_;      // host-staged: [2][tp][slot_floats]
  std::vector<std::unique_ptr<RankState>> ranks_;
  uint32_t launches_[kMaxRanks] = {};  // each rank's own thread counts its launches (seeds the stalls)
  std::atomic<bool> abort_{false};
  std::string failure_;
};

// What a decode step and a prefill ask of the all-reduce at the model's slot of 65,536 floats: the
// 31B shape's hidden row (5,376 floats, 3 blocks) and 8 rows (21 blocks), one float, odd sizes, a
// message one float over a slot (a 32-block round, then a 1-block round) and one of four rounds,
// in an order that changes the grid at almost every call, plus an odd run of decode-sized calls.
std::vector<int64_t> MixedSizes(uint64_t seed, int calls) {
  const std::vector<int64_t> menu = {5376, 43008, 1, 12347, 2049, 65537, 200000, 4095, 31};
  std::mt19937_64 rng(seed);
  std::vector<int64_t> sizes;
  for (int c = 0; c < calls; ++c) sizes.push_back(menu[rng() % menu.size()]);
  for (int c = 0; c < 7; ++c) sizes.push_back(5376);
  return sizes;
}

TEST_CASE("all-reduce protocol (host model): every rank holds the exact sum, call after call, whatever the sizes",
          "[engine][cuda][all_reduce]") {
  for (int tp : {2, 3, 4}) {
    for (bool host_staged : {false, true}) {
      for (uint64_t seed : {1u, 2u}) {
        ModelOptions o;
        o.tp = tp;
        o.host_staged = host_staged;
        o.seed = seed;
        INFO("tp " << tp << (host_staged ? ", host-staged" : ", P2P") << ", seed " << seed);
        CHECK(ProtocolModel(o).Run(MixedSizes(seed, 24)) == "");
      }
    }
  }
}

TEST_CASE(
    "all-reduce protocol (host model): the first protocol's per-block call counts hold while the grid "
    "stays, and corrupt sums once it changes",
    "[engine][cuda][all_reduce]") {
  ModelOptions o;
  o.tp = 4;
  o.rule = SequenceRule::kPerBlockFirstProtocol;
  // Same size every call: every block takes part in every call, so per-block counts agree.
  CHECK(ProtocolModel(o).Run(std::vector<int64_t>(40, 43008)) == "");
  // Sizes that change the grid: blocks that sit out a call fall behind, and a block writes a range a
  // peer is still summing. A race needs a stall at the right moment, so a few tries are allowed.
  std::string corrupted;
  for (uint64_t seed = 1; seed <= 8 && corrupted.empty(); ++seed) {
    o.seed = seed;
    corrupted = ProtocolModel(o).Run(MixedSizes(seed, 40));
  }
  INFO("the first protocol must lose a sum: " << corrupted);
  CHECK_FALSE(corrupted.empty());
}

TEST_CASE("all-reduce protocol: grids, chunks and offsets", "[engine][cuda][all_reduce]") {
  CHECK(OneShotGrid(1) == 1);
  CHECK(OneShotGrid(2048) == 1);
  CHECK(OneShotGrid(2049) == 2);
  CHECK(OneShotGrid(5376) == 3);
  CHECK(OneShotGrid(1 << 30) == kMaxBlocks);
  // The chunks of a grid tile the message exactly.
  for (int64_t n : {int64_t{1}, int64_t{31}, int64_t{5376}, int64_t{65537}}) {
    const int grid = OneShotGrid(n);
    int64_t next = 0;
    for (int b = 0; b < grid; ++b) {
      const Chunk c = OneShotChunk(n, grid, b);
      CHECK(c.begin == next);
      CHECK(c.end >= c.begin);
      next = c.end;
    }
    CHECK(next == n);
  }
  // Consecutive calls use the two parities; flags compare across the 2^32 wrap.
  CHECK(SlotOffset(7, 4, 2, 100) == (1 * 4 + 2) * 100);
  CHECK(SlotOffset(8, 4, 2, 100) == 2 * 100);
  CHECK(FlagOffset(7, 4, 3, 5) == (1 * 4 + 3) * kMaxBlocks + 5);
  CHECK(FlagReached(5, 5));
  CHECK_FALSE(FlagReached(4, 5));
  CHECK(FlagReached(1, 0xFFFFFFFFu));
  CHECK_FALSE(FlagReached(0xFFFFFFFFu, 1));
  CHECK(LastToArrive(2, 3));
  CHECK_FALSE(LastToArrive(1, 3));
}

}  // namespace
}  // namespace temper::engine::cuda::all_reduce
