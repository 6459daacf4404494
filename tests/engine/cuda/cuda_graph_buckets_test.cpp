// Decode graph buckets and all-reduce algorithm selection: the host-side choices of the CUDA
// backend, which run on every machine.
#include <catch2/catch.hpp>

#include "engine/cuda/all_reduce_plan.h"
#include "engine/cuda/graph_buckets.h"

namespace temper::engine::cuda {
namespace {

TEST_CASE("graph buckets are powers of two capped by max_batch") {
  CHECK(GraphBuckets(1) == std::vector<int>{1});
  CHECK(GraphBuckets(8) == std::vector<int>{1, 2, 4, 8});
  CHECK(GraphBuckets(6) == std::vector<int>{1, 2, 4, 6});
}

TEST_CASE("a batch runs the smallest bucket that holds it, or eagerly") {
  const std::vector<int> b = GraphBuckets(6);
  CHECK(SelectGraphBucket(b, 1) == 0);
  CHECK(SelectGraphBucket(b, 3) == 2);
  CHECK(SelectGraphBucket(b, 4) == 2);
  CHECK(SelectGraphBucket(b, 5) == 3);
  CHECK(SelectGraphBucket(b, 6) == 3);
  CHECK(SelectGraphBucket(b, 7) == -1);
  CHECK(SelectGraphBucket(b, 0) == -1);
}

TEST_CASE("all-reduce selection follows the measured topology and the message size") {
  AllReduceTopology t;
  CHECK(ChooseAllReduce(t, 1 << 20) == AllReduceAlgo::kNone);
  t.tp = 4;
  t.p2p_ok = true;
  t.nccl_available = true;
  CHECK(ChooseAllReduce(t, 21504) == AllReduceAlgo::kOneShotP2p);
  CHECK(ChooseAllReduce(t, 8 * 21504) == AllReduceAlgo::kOneShotP2p);
  CHECK(ChooseAllReduce(t, 2048 * 21504) == AllReduceAlgo::kNccl);
  t.p2p_ok = false;  // the L4 box without peer access: small messages through host memory, not NCCL
  CHECK(ChooseAllReduce(t, 21504) == AllReduceAlgo::kHostStaged);
  CHECK(ChooseAllReduce(t, 8 * 21504) == AllReduceAlgo::kHostStaged);
  CHECK(ChooseAllReduce(t, 2048 * 21504) == AllReduceAlgo::kNccl);
  t.nccl_available = false;
  CHECK(ChooseAllReduce(t, 21504) == AllReduceAlgo::kHostStaged);
  CHECK(ChooseAllReduce(t, 2048 * 21504) == AllReduceAlgo::kHostStaged);
  t.p2p_ok = true;
  CHECK(ChooseAllReduce(t, 2048 * 21504) == AllReduceAlgo::kOneShotP2p);
  CHECK(AllReduceAlgoName(AllReduceAlgo::kHostStaged) == "host-staged");
}

}  // namespace
}  // namespace temper::engine::cuda
