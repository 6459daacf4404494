// DeviceAllReduce: the sum over tensor-parallel ranks of one fp32 buffer per rank, for the CUDA
// backend's ranks, which live in one process: one host thread and one stream per rank, several
// ranks possibly on one GPU (that is how tp 2/4 are tested on a single card).
//
// Algorithms (all_reduce_plan.h picks one per message size):
//  * one-shot push over P2P: each rank writes its data into a slot reserved for it in every rank's
//    receive buffer (peer stores; plain stores when the ranks share a GPU), raises a flag there,
//    waits for every rank's flag in its own buffer, and sums the tp slots in rank order. Posted
//    writes and local polling only: "pull" variants are reported to hang over PCIe.
//  * host-staged, where P2P is absent or failed the start-up transfer test: through pinned host
//    memory, each rank writing its slot once and reading all of them, every element an 8-byte word
//    that carries the call's sequence beside its value (NCCL's LL protocol; all_reduce_protocol.h).
//  * NCCL, for large messages, when every rank has its own GPU and libnccl loads (at run time:
//    the library is found where the machine has it, and a build needs no NCCL).
// Every algorithm sums in rank order 0..tp-1, so all ranks hold bitwise identical results.
//
// The custom algorithms are one kernel per call that keeps its state on the device (a call count per
// rank; flags carry the call's number; slots alternate by its parity: all_reduce_protocol.h), so a
// call can be captured in a CUDA graph and replayed. Messages larger than a slot go in several
// rounds, each a call of its own.
//
// Built only with nvcc. Thread safety: AllReduceSum is called by each rank's own thread, with the
// rank's device current; every rank makes the same sequence of calls with the same n, on a stream
// readied by PrepareAllReduceStream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/cuda/all_reduce_plan.h"
#include "engine/cuda/all_reduce_protocol.h"

namespace temper::engine::cuda {

// Asks the CUDA driver for 32 hardware queues per device instead of its default 8
// (CUDA_DEVICE_MAX_CONNECTIONS, unless the environment already sets it): streams beyond the queue
// count share one, and a rank's kernel queued behind a peer's spinning all-reduce on a shared queue
// never starts. The driver reads it when it creates a device's context, so the CUDA backend calls
// this before its first CUDA call. Returns the count in effect for contexts created from now on.
int RequestQueueConnections();

// Readies `stream` (on the current device) to carry all-reduces: one kernel launched on it and
// waited for. Every rank's stream must pass through this, from any thread, before its first
// all-reduce: on an H100 and an H200 (2026-11-26) the first all-reduce on freshly created streams
// stalled in 9 of 10 test runs, and the stall record (StallReport) showed each time that a peer had
// not begun call 1: its first kernel on a new stream did not start while a kernel on another stream
// spun. With one launch on each stream first, 3 runs of 3 passed. Why a stream's first launch waits
// was not established (a probe with plain kernels on fresh streams did not show it).
Status PrepareAllReduceStream(cudaStream_t stream);

class DeviceAllReduce {
 public:
  struct Options {
    uint64_t slot_bytes = all_reduce::kDefaultSlotBytes;  // one rank's slot; larger messages take rounds
    uint64_t one_shot_max_bytes = 256 * 1024;             // above this, NCCL where it is up
    bool allow_p2p = true;
    bool allow_nccl = true;
    // How long a rank waits for a peer before it records the stall (StallReport) and traps, ending
    // the CUDA context: a lost peer must not hang the GPU for ever.
    uint32_t spin_limit_ms = 20'000;
  };

  // devices[r]: CUDA ordinal of rank r (may repeat). Enables peer access between distinct devices
  // and runs a real transfer test on every ordered pair (a kernel on one device writes a pattern
  // into the other's memory, which is read back bit-exact): drivers can over-report P2P. Brings up
  // NCCL when all devices are distinct and the library loads. Allocates every buffer now.
  // Errors name the device and the failing call; InvalidArgument when more ranks share a device
  // than it has hardware queues (RequestQueueConnections).
  static Result<std::unique_ptr<DeviceAllReduce>> Create(std::span<const int> devices, const Options& options);
  ~DeviceAllReduce();
  DeviceAllReduce(const DeviceAllReduce&) = delete;
  DeviceAllReduce& operator=(const DeviceAllReduce&) = delete;

  const AllReduceTopology& topology() const { return topology_; }
  int tp() const { return topology_.tp; }

  // Enqueues on `stream` the in-place sum over all ranks of the n floats at `data` (rank `rank`'s
  // device memory), with the algorithm ChooseAllReduce picks for n · 4 bytes.
  Status AllReduceSum(int rank, float* data, size_t n, cudaStream_t stream);
  // The same with a given algorithm (tests, the microbenchmark): FailedPrecondition naming why it
  // is not available.
  Status AllReduceSumWith(AllReduceAlgo algo, int rank, float* data, size_t n, cudaStream_t stream);

  // Empty, or, once ranks' waits for a peer passed Options::spin_limit_ms and trapped (the stream
  // then reports cudaErrorLaunchFailure and the context is gone), which block and call of each such
  // rank waited for which sender and what it saw, e.g. "all-reduce stalled: rank 1, block 0 of 1,
  // call 3 of 1 floats, waited 20000 ms for rank 0's flag, which showed call 1; rank 0 had ended 1
  // calls" (" / " before each further rank). Read from host memory, so it works after the context
  // died.
  std::string StallReport() const;

 private:
  struct Nccl;
  struct RankBuffers {
    int device = 0;
    float* slots = nullptr;                  // P2P: [2 parities][tp senders][slot floats], on this rank's device
    uint32_t* flags = nullptr;               // P2P: [2][tp][kMaxBlocks], on this rank's device
    all_reduce::CallState* calls = nullptr;  // [2]: the P2P and the host-staged call counts
  };
  DeviceAllReduce() = default;
  Status OneShot(bool host_staged, int rank, float* data, size_t n, cudaStream_t stream);

  AllReduceTopology topology_;
  Options options_;
  size_t slot_floats_ = 0;
  std::vector<RankBuffers> ranks_;
  // Host-staged: pinned, mapped host memory shared by all ranks, words of all_reduce_protocol.h.
  uint64_t* host_words_ = nullptr;  // [2][tp][slot floats]
  // Each rank's stall record (all_reduce_protocol.h), pinned and mapped: host and device pointers.
  all_reduce::Stall* stalls_ = nullptr;  // [tp]
  all_reduce::Stall* stalls_device_ = nullptr;
  std::unique_ptr<Nccl> nccl_;
};

}  // namespace temper::engine::cuda
