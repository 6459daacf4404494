// Which all-reduce algorithm a message takes, decided from facts measured at start-up.
//
// Decode all-reduces are tiny (one fp32 hidden vector per row: 21,504 B at batch 1 for the 31B
// model), so latency, not bandwidth, decides. Where every pair of GPUs passed a
// real peer-to-peer transfer test (values written by one device read back bit-exact by the other),
// a one-shot push (each rank writes its partial into every peer's receive buffer, then sums all tp
// buffers in rank order) beats NCCL's ring for messages up to `one_shot_max_bytes`. Without P2P the
// same one-shot sum runs through pinned host memory (host-staged), still for every message up to
// that size, so that a decode step never runs NCCL inside a captured graph. Larger messages
// (prefill) go to NCCL where it came up, else to the one-shot path in rounds. When all ranks live on one GPU, "peers"
// are the same device and the one-shot path is plain device memory: that is how tp 2/4 is tested on one card. Every
// algorithm sums in rank order 0..tp-1, so all ranks hold identical results.
//
// Pure host logic, unit-tested everywhere. Thread safety: values only.
#pragma once

#include <cstdint>
#include <string_view>

namespace temper::engine::cuda {

enum class AllReduceAlgo { kNone, kOneShotP2p, kHostStaged, kNccl };
std::string_view AllReduceAlgoName(AllReduceAlgo a);

struct AllReduceTopology {
  int tp = 1;
  bool p2p_ok = false;          // every device pair passed the start-up transfer test
  bool nccl_available = false;  // built with NCCL and its communicators came up
  uint64_t one_shot_max_bytes = 256 * 1024;
};

// kNone for tp 1 (nothing to reduce).
AllReduceAlgo ChooseAllReduce(const AllReduceTopology& t, uint64_t bytes);

}  // namespace temper::engine::cuda
