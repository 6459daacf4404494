// Sampling from a row's candidates (what a device backend sends) against sampling from the whole
// row: the ranks' candidates merge into the row's exact top k and tail mass, and for every sampling
// setting the two paths give the same tokens from the same seed, the candidates path asking for
// the full row exactly when a decision falls beyond its candidates.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "engine/cuda/reference_ops.h"
#include "engine/logit_candidates.h"
#include "engine/sampler.h"

namespace temper::engine {
namespace {

// A row's candidates as `tp` device ranks would send them: each rank's shard reduced by the
// reference of the device kernel, then merged.
LogitCandidates Candidates(const std::vector<float>& row, int tp, int k, float temperature) {
  const int n = static_cast<int>(row.size());
  std::vector<std::vector<float>> vals(tp), max(tp, std::vector<float>(1)), mass(tp, std::vector<float>(1));
  std::vector<std::vector<int32_t>> ids(tp);
  std::vector<RankCandidates> ranks;
  for (int r = 0; r < tp; ++r) {
    const int begin = n * r / tp, end = n * (r + 1) / tp;
    const int kr = std::min(k, end - begin);
    vals[r].resize(kr);
    ids[r].resize(kr);
    cuda::ReferenceTopCandidates(row.data() + begin, end - begin, 1, end - begin, kr, begin, &temperature,
                                 vals[r].data(), ids[r].data(), max[r].data(), mass[r].data());
    ranks.push_back({vals[r], ids[r], max[r][0], mass[r][0]});
  }
  return MergeRankCandidates(ranks, k, temperature, n);
}

std::vector<float> Row(int n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> row(static_cast<size_t>(n));
  for (float& x : row) x = d(rng);
  return row;
}

TEST_CASE("merged rank candidates are the row's top k and its tail mass", "[engine][sampling]") {
  std::vector<float> row = Row(1000, 1, 3.0f);
  row[10] = row[700] = 9.5f;  // a tie across ranks, at the top: the lower id first
  for (int tp : {1, 2, 4}) {
    for (float t : {1.0f, 0.5f, 0.0f}) {
      INFO("tp " << tp << ", temperature " << t);
      const LogitCandidates c = Candidates(row, tp, 64, t);
      std::vector<int32_t> order(row.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
      std::sort(order.begin(), order.end(), [&](int a, int b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
      REQUIRE(c.ids.size() == 64);
      for (int i = 0; i < 64; ++i) {
        CHECK(c.ids[i] == order[i]);
        CHECK(c.logits[i] == row[order[i]]);
      }
      const double tt = t > 0 ? t : 1.0;
      double tail = 0;
      for (size_t i = 64; i < order.size(); ++i) tail += std::exp((row[order[i]] - row[order[0]]) / tt);
      CHECK(c.tail_mass == Approx(tail).epsilon(1e-4));
      CHECK(c.vocab_size == 1000);
    }
  }
}

TEST_CASE("sampling from candidates gives the full row's tokens, asking for the row when it must", "[engine][sampling]") {
  struct Setting {
    float temperature;
    int top_k;
    float top_p;
    float min_p;
  };
  const std::vector<Setting> settings = {{0, 0, 1, 0},     {1, 0, 1, 0},     {0.7f, 0, 0.9f, 0}, {1.5f, 0, 1, 0},
                                         {1, 5, 1, 0},     {1, 40, 0.9f, 0}, {1, 300, 1, 0},     {1, 0, 0.5f, 0},
                                         {1, 0, 1, 0.05f}, {2, 0, 0.95f, 0}, {0.7f, 0, 1, 0.05f}};
  int full_rows = 0, draws = 0;
  for (int n : {512, 262144}) {
    for (float scale : {8.0f, 1.0f, 0.1f}) {  // peaked to flat
      for (const Setting& s : settings) {
        SamplingParams p{.temperature = s.temperature, .top_k = s.top_k, .top_p = s.top_p, .min_p = s.min_p, .seed = 7};
        auto full = Sampler::Create(p);
        auto cand = Sampler::Create(p);
        REQUIRE(full.ok());
        REQUIRE(cand.ok());
        for (int step = 0; step < (n > 1000 ? 4 : 12); ++step) {
          const std::vector<float> row = Row(n, 100 + step, scale);
          const int32_t want = full->Sample(row);
          Sampler::Outcome got = cand->Sample(Candidates(row, 4, 64, s.temperature));
          ++draws;
          if (got.needs_full_row) {
            ++full_rows;
            got.token = cand->Sample(row);
          }
          INFO("n " << n << ", scale " << scale << ", T " << s.temperature << ", top_k " << s.top_k << ", top_p "
                    << s.top_p << ", min_p " << s.min_p << ", step " << step);
          REQUIRE(got.token == want);
        }
      }
    }
  }
  // The fallback is exercised: flat rows over 262,144 entries put most of the mass beyond any 64.
  std::printf("candidates sampling: %d of %d draws needed the full row\n", full_rows, draws);
  CHECK(full_rows > 0);
  CHECK(full_rows < draws);
}

}  // namespace
}  // namespace temper::engine
