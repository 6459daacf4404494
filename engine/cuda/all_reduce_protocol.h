// The one-shot all-reduce's protocol: which block sums which elements, where a sender's data and
// flag go, and which sequence number a call carries. Compiled for host and device, so the kernel
// (all_reduce.cu) and the host model that checks the protocol with threads
// (tests/engine/cuda/all_reduce_protocol_test.cpp) follow the very same rules.
//
// A call on one rank is one kernel of OneShotGrid(n) blocks; block b owns OneShotChunk(n, grid, b)
// (every rank cuts the message alike: every rank passes the same n). With seq = the rank's calls + 1,
// the same for every block of the call:
//   push:  write my chunk into slot[parity(seq)][me] of every receiver, fence, then raise
//          flag[parity(seq)][me][b] = seq there (release)
//   wait:  until FlagReached(flag[parity(seq)][s][b], seq) in my buffer, for every sender s (acquire)
//   sum:   chunk = Σ_{s = 0..tp-1} slot[parity(seq)][s], in rank order
//   end:   each block counts its arrival; the last one (LastToArrive) stores calls = seq
//
// Why two parities are enough whatever the message sizes: rank r writes slot[p] in call k only after
// its call k-1 ended, and every block of that call saw peer q's flag of call k-1. q raised it inside
// its call k-1, which q's stream began only after q's call k-2, the last one to read slot[p], ended.
// That argument needs ONE sequence per call. The first protocol counted calls per block: when the grid
// changed with the message size, blocks that sat out a call fell behind, blocks of one call disagreed
// on the parity, and a block could write a range that a peer's other block was still summing in the
// call before (the host model shows the corruption).
//
// Host-staged (pinned host memory, where P2P is absent) carries the sequence in the data instead of
// in flags, as NCCL's LL protocol does: each element travels as one 8-byte word, the value's bits
// beside the call's seq, written with one store and polled by the reader until the seq is the
// call's. A word cannot be seen without its value, so no fence orders data before a flag, and no
// flag word is shared by the blocks of a sender. The first host-staged kernel ran the P2P protocol
// over host memory; on an H200 (2026-11-26) it returned a value from no call in temper-bench's
// check (4 ranks, 172,032 B) while the same protocol in device memory stayed exact. Why was not
// established; this variant does not depend on it.
//   push:  word[parity(seq)][me][i] = {value, seq} for my chunk
//   sum:   for every sender s, poll word[parity(seq)][s][i] until WordReached, add its value
//   end:   as above
// The two-parity argument holds unchanged: seeing sender q's words of call k-1 means q began call
// k-1, so q's call k-2, the last to read parity(k)'s slots, had ended.
//
// Thread safety: pure functions and constants.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define TEMPER_AR_HD __host__ __device__ __forceinline__
#else
#define TEMPER_AR_HD inline
#endif

namespace temper::engine::cuda::all_reduce {

constexpr int kMaxRanks = 8;
// Grids stay small so that the kernels of every rank are resident at once (a rank spins until its
// peers' blocks have pushed): 8 ranks × 32 blocks of 256 threads fit even one L4.
constexpr int kMaxBlocks = 32;
constexpr int kThreads = 256;
constexpr int64_t kFloatsPerBlock = 2048;

// One rank's slot in a receive buffer, by default; larger messages go in rounds.
constexpr uint64_t kDefaultSlotBytes = 1 << 20;

// A call's counters on one rank: `calls` made so far, the blocks of the running call that ended, and
// whether a block of this rank claimed its Stall record.
struct CallState {
  uint32_t calls;
  uint32_t arrivals;
  uint32_t stalled;
};

struct Chunk {
  int64_t begin, end;
};

TEMPER_AR_HD int OneShotGrid(int64_t n) {
  const int64_t blocks = (n + kFloatsPerBlock - 1) / kFloatsPerBlock;
  return static_cast<int>(blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks));
}

TEMPER_AR_HD Chunk OneShotChunk(int64_t n, int grid, int block) { return {n * block / grid, n * (block + 1) / grid}; }

TEMPER_AR_HD int Parity(uint32_t seq) { return static_cast<int>(seq & 1u); }

// Offset, in floats, of `sender`'s slot of parity(seq) in a receive buffer [2][tp][slot_floats].
TEMPER_AR_HD int64_t SlotOffset(uint32_t seq, int tp, int sender, int64_t slot_floats) {
  return (int64_t{Parity(seq)} * tp + sender) * slot_floats;
}

// Offset of `sender`'s flag for `block` of parity(seq) in a flag array [2][tp][kMaxBlocks].
TEMPER_AR_HD int64_t FlagOffset(uint32_t seq, int tp, int sender, int block) {
  return (int64_t{Parity(seq)} * tp + sender) * kMaxBlocks + block;
}

// Whether a flag holding `flag` shows call `seq` (or a later one), wrap-safe: calls wrap after 2^32.
TEMPER_AR_HD bool FlagReached(uint32_t flag, uint32_t seq) { return static_cast<int32_t>(flag - seq) >= 0; }

// A host-staged word: the value's bits in the low half, the call's seq in the high half.
TEMPER_AR_HD uint64_t PackWord(uint32_t value_bits, uint32_t seq) { return (uint64_t{seq} << 32) | value_bits; }
TEMPER_AR_HD uint32_t WordValueBits(uint64_t word) { return static_cast<uint32_t>(word); }
TEMPER_AR_HD bool WordReached(uint64_t word, uint32_t seq) {
  return FlagReached(static_cast<uint32_t>(word >> 32), seq);
}

// What a rank that waited past the spin limit saw, written to pinned host memory (one record per
// rank) before its kernel traps: the trap ends the CUDA context, and only host memory can still say
// which rank waited for whom. The first waiting block of a rank claims the record (CallState::
// stalled, an atomic in device memory: atomics on mapped host memory need PCIe atomics); `complete`
// is 1 once every field is written. `seen` is the flag's call (P2P) or the word's (host-staged).
struct Stall {
  uint32_t complete;
  int32_t block, grid, sender;
  uint32_t seq, seen;
  uint32_t sender_calls;  // P2P: the calls the sender had ended, read from its counters; host-staged: kNoCount
  int64_t n, element;     // the call's floats; host-staged: the element whose word was awaited, else -1
};
constexpr uint32_t kNoCount = 0xffffffffu;

// Whether the block whose arrival found `arrived_before` blocks already ended is the call's last.
TEMPER_AR_HD bool LastToArrive(uint32_t arrived_before, int grid) {
  return arrived_before + 1 == static_cast<uint32_t>(grid);
}

// Pinned host bytes of the host-staged words, shared by all ranks: [2][tp][slot floats] of 8 bytes.
inline uint64_t HostStagedBytes(int tp, uint64_t slot_bytes) { return 2 * static_cast<uint64_t>(tp) * slot_bytes * 2; }

// Device bytes one rank's all-reduce buffers take on its GPU where P2P is up (host-staged uses
// pinned host memory): receive slots [2][tp][slot], flags [2][tp][kMaxBlocks], two CallStates, each
// allocation rounded to cudaMalloc's 512 bytes.
inline uint64_t DeviceBytesPerRank(int tp, uint64_t slot_bytes) {
  auto rounded = [](uint64_t b) { return (b + 511) / 512 * 512; };
  const uint64_t ranks = static_cast<uint64_t>(tp);
  return rounded(2 * ranks * slot_bytes) + rounded(2 * ranks * kMaxBlocks * sizeof(uint32_t)) +
         rounded(2 * sizeof(CallState));
}

}  // namespace temper::engine::cuda::all_reduce
