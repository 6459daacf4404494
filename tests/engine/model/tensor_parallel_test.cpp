// Tensor parallelism on the CPU: tp = 2 and 4 shard the weights as the GPUs will and must give
// the logits of tp = 1 (the tiny model has 4 query heads, 2 KV heads on sliding layers and 1 on
// full layers, so tp = 4 replicates KV heads on both kinds of layer).
#include <cmath>
#include <cstdio>
#include <thread>

#include <catch2/catch.hpp>

#include "engine/golden_fixture.h"
#include "engine/model/tensor_parallel.h"

namespace temper::engine::testing {
namespace {

std::vector<float> Logits(int tp, const std::vector<int32_t>& ids, int prefill) {
  auto backend = TinyBackend(tp, /*threads=*/tp);
  auto seq = backend->AddSequence();
  REQUIRE(seq.ok());
  std::vector<float> logits;
  for (size_t pos = 0; pos < ids.size();) {
    const size_t n = pos == 0 ? static_cast<size_t>(prefill) : 1;
    ForwardItem item{*seq, std::span<const int32_t>(ids).subspan(pos, n), true};
    auto out = backend->Forward({&item, 1}, {});
    REQUIRE(out.ok());
    logits.insert(logits.end(), out->logits.begin(), out->logits.end());
    pos += n;
  }
  return logits;
}

TEST_CASE("tp 1, 2 and 4 give the same logits", "[engine][tp]") {
  for (int prompt : {0, 1}) {
    const std::vector<int32_t> ids = TeacherForcedIds(prompt);
    const std::vector<float> ref = Logits(1, ids, 11);
    for (int tp : {2, 4}) {
      const std::vector<float> got = Logits(tp, ids, 11);
      REQUIRE(got.size() == ref.size());
      const float d = MaxAbsDiff(got.data(), ref.data(), ref.size());
      std::printf("prompt %d: max |logits(tp=%d) - logits(tp=1)| %.3g\n", prompt, tp, d);
      INFO("prompt " << prompt << " tp " << tp);
      CHECK(d <= 1e-4f);
    }
  }
}

TEST_CASE("PlanShards splits and replicates heads like vLLM", "[engine][tp]") {
  const ModelConfig& c = Tiny().config;
  auto plan = PlanShards(c, 4);
  REQUIRE(plan.ok());
  for (int r = 0; r < 4; ++r) {
    const RankShard& s = (*plan)[r];
    CHECK(s.layers[0].q_heads.begin == r);
    CHECK(s.layers[0].kv_heads.begin == r / 2);  // 2 KV heads, each on two ranks
    CHECK(s.layers[5].kv_heads.begin == 0);      // 1 global KV head, on every rank
    CHECK(s.ffn.size() == 80);
    CHECK(s.vocab.begin == r * 128);
  }
  auto two = PlanShards(c, 2);
  REQUIRE(two.ok());
  CHECK((*two)[1].layers[0].kv_heads.begin == 1);
  CHECK((*two)[1].layers[0].kv_heads.size() == 1);
  CHECK(PlanShards(c, 3).status().code() == StatusCode::kInvalidArgument);
  CHECK(PlanShards(c, 0).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("Communicator sums in rank order, identically on every rank", "[engine][tp]") {
  constexpr int kRanks = 4;
  constexpr size_t kN = 1000;
  Communicator comm(kRanks);
  std::vector<std::vector<float>> data(kRanks, std::vector<float>(kN));
  std::vector<float> expected(kN);
  for (size_t i = 0; i < kN; ++i) {
    // Magnitudes far apart, so that another summation order gives other bits.
    for (int r = 0; r < kRanks; ++r)
      data[r][i] = std::ldexp(static_cast<float>((i * 7919 + r * 104729) % 1000) - 500.f, (r * 9) % 23);
    expected[i] = ((data[0][i] + data[1][i]) + data[2][i]) + data[3][i];
  }
  for (int round = 0; round < 3; ++round) {  // the barrier is reusable
    std::vector<std::vector<float>> work = data;
    std::vector<std::thread> threads;
    for (int r = 0; r < kRanks; ++r) threads.emplace_back([&, r] { comm.AllReduceSum(r, work[r].data(), kN); });
    for (auto& t : threads) t.join();
    for (int r = 0; r < kRanks; ++r) CHECK(work[r] == expected);
  }
}

}  // namespace
}  // namespace temper::engine::testing
