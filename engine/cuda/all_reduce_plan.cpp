#include "engine/cuda/all_reduce_plan.h"

namespace temper::engine::cuda {

std::string_view AllReduceAlgoName(AllReduceAlgo a) {
  switch (a) {
    case AllReduceAlgo::kNone: return "none";
    case AllReduceAlgo::kOneShotP2p: return "one-shot-p2p";
    case AllReduceAlgo::kHostStaged: return "host-staged";
    case AllReduceAlgo::kNccl: return "nccl";
  }
  return "unknown";
}

AllReduceAlgo ChooseAllReduce(const AllReduceTopology& t, uint64_t bytes) {
  if (t.tp <= 1) return AllReduceAlgo::kNone;
  const bool small = bytes <= t.one_shot_max_bytes;
  if (t.p2p_ok && (small || !t.nccl_available)) return AllReduceAlgo::kOneShotP2p;
  if (t.nccl_available) return AllReduceAlgo::kNccl;
  return AllReduceAlgo::kHostStaged;
}

}  // namespace temper::engine::cuda
