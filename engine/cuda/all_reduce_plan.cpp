#include "engine/cuda/all_reduce_plan.h"

namespace temper::engine::cuda {

std::string_view AllReduceAlgoName(AllReduceAlgo a) {
  switch (a) {
    case AllReduceAlgo::kNone:
      return "none";
    case AllReduceAlgo::kOneShotP2p:
      return "one-shot-p2p";
    case AllReduceAlgo::kHostStaged:
      return "host-staged";
    case AllReduceAlgo::kNccl:
      return "nccl";
  }
  return "unknown";
}

AllReduceAlgo ChooseAllReduce(const AllReduceTopology& t, uint64_t bytes) {
  if (t.tp <= 1) return AllReduceAlgo::kNone;
  // NCCL only for large messages: decode's small ones stay on our own kernel, which is also what
  // runs inside captured graphs.
  if (t.nccl_available && bytes > t.one_shot_max_bytes) return AllReduceAlgo::kNccl;
  return t.p2p_ok ? AllReduceAlgo::kOneShotP2p : AllReduceAlgo::kHostStaged;
}

}  // namespace temper::engine::cuda
