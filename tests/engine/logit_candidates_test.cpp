// Sampling from a row's candidates (what a device backend sends) against sampling from the whole
// row: ReferenceTopCandidates (the CPU twin of the device kernel) against its definition, the
// ranks' candidates merging into the row's exact top k and tail mass, the two sampling paths
// giving the same tokens from the same seed (the candidates path asking for the full row when a
// decision falls beyond its candidates).
//
// Every case's name starts with "logit candidates:" so `ctest -R logit` runs them all.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "engine/cuda/reference_ops.h"
#include "engine/logit_candidates.h"
#include "engine/sampler.h"

namespace temper::engine {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// A row's candidates as `tp` device ranks would send them: each rank's shard reduced by the
// reference of the device kernel, then merged.
LogitCandidates Candidates(std::span<const float> row, int tp, int k, float temperature) {
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

// Ids of `row` by the candidates' order: value descending, ties to the lower id.
std::vector<int32_t> Order(std::span<const float> row) {
  std::vector<int32_t> order(row.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
  return order;
}

TEST_CASE("logit candidates: ReferenceTopCandidates is its definition (ties, k = n, -inf, row stride)",
          "[engine][sampling]") {
  // Rows of n entries in a buffer of stride ld; the padding between rows is +inf, which no row
  // may read.
  const int n = 200, ld = 207, rows = 5;
  std::vector<float> logits(static_cast<size_t>(rows) * ld, kInf);
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> level(-4, 4);
  for (int r = 0; r < rows; ++r) {
    for (int i = 0; i < n; ++i) {
      float& x = logits[static_cast<size_t>(r) * ld + i];
      switch (r) {
        case 0: x = std::normal_distribution<float>(0.0f, 2.0f)(rng); break;
        case 1: x = 0.5f * static_cast<float>(level(rng)); break;       // nine values: ties everywhere
        case 2: x = i % 3 == 0 ? -kInf : 0.25f * static_cast<float>(level(rng)); break;
        case 3: x = 1.0f; break;                                         // all equal
        case 4: x = -kInf; break;                                        // all -inf
      }
    }
  }
  const std::vector<float> temperatures = {1.0f, 0.0f, 0.7f, 1.5f, 1.0f};
  for (int k : {1, 17, n - 1, n}) {
    INFO("k " << k);
    std::vector<float> vals(static_cast<size_t>(rows) * k), max(rows), mass(rows);
    std::vector<int32_t> ids(vals.size());
    cuda::ReferenceTopCandidates(logits.data(), ld, rows, n, k, 1000, temperatures.data(), vals.data(), ids.data(),
                                 max.data(), mass.data());
    for (int r = 0; r < rows; ++r) {
      INFO("row " << r);
      const std::span<const float> row(logits.data() + static_cast<size_t>(r) * ld, n);
      const std::vector<int32_t> order = Order(row);
      for (int i = 0; i < k; ++i) {
        REQUIRE(ids[static_cast<size_t>(r) * k + i] == order[i] + 1000);
        REQUIRE(vals[static_cast<size_t>(r) * k + i] == row[order[i]]);
      }
      CHECK(max[r] == row[order[0]]);
      // Σ exp((l − max) / T), T = 0 counting as 1; an entry equal to the max weighs 1, so a row of
      // -inf counts its entries.
      const double t = temperatures[r] > 0 ? temperatures[r] : 1.0;
      double want = 0;
      for (float l : row) want += l == max[r] ? 1.0 : std::exp((l - max[r]) / t);
      CHECK(mass[r] == Approx(want).epsilon(1e-6));
      CHECK(std::isfinite(mass[r]));
    }
    CHECK(mass[4] == static_cast<float>(n));
  }
}

TEST_CASE("logit candidates: merged rank candidates are the row's top k and its tail mass", "[engine][sampling]") {
  for (int n : {1000, 262144}) {
    std::vector<float> row = Row(n, 1, 3.0f);
    row[10] = row[n - 300] = 9.5f;  // a tie across ranks, at the top: the lower id first
    for (int i = 0; i < 40; ++i) row[100 + 7 * i] = row[n / 2 + 5 * i] = 7.25f;  // ties across the k-th place
    for (int tp : {1, 2, 4}) {
      for (float t : {1.0f, 0.5f, 0.0f, 1.5f}) {
        for (int k : {1, 64, 256}) {
          INFO("n " << n << ", tp " << tp << ", temperature " << t << ", k " << k);
          const LogitCandidates c = Candidates(row, tp, k, t);
          const std::vector<int32_t> order = Order(row);
          REQUIRE(c.ids.size() == static_cast<size_t>(k));
          for (int i = 0; i < k; ++i) {
            REQUIRE(c.ids[i] == order[i]);
            REQUIRE(c.logits[i] == row[order[i]]);
          }
          const double tt = t > 0 ? t : 1.0;
          double tail = 0;
          for (size_t i = static_cast<size_t>(k); i < order.size(); ++i) tail += std::exp((row[order[i]] - row[order[0]]) / tt);
          // The ranks' masses come as fp32: the tail is exact to a few 1e-8 of the row's mass.
          double whole = tail;
          for (int i = 0; i < k; ++i) whole += std::exp((row[order[i]] - row[order[0]]) / tt);
          CHECK(std::abs(c.tail_mass - tail) <= 1e-6 * whole);
          CHECK(c.vocab_size == n);
        }
      }
    }
  }
}

TEST_CASE("logit candidates: a shard of -inf adds nothing to the tail", "[engine][sampling]") {
  std::vector<float> row = Row(512, 2, 1.0f);
  std::fill(row.begin() + 256, row.end(), -kInf);  // ranks 2 and 3 of 4 hold only -inf
  const LogitCandidates c = Candidates(row, 4, 16, 1.0f);
  double tail = 0;
  const std::vector<int32_t> order = Order(row);
  for (size_t i = 16; i < order.size(); ++i) tail += std::exp(row[order[i]] - row[order[0]]);
  REQUIRE(std::isfinite(c.tail_mass));
  CHECK(c.tail_mass == Approx(tail).epsilon(1e-6));
}

TEST_CASE("logit candidates: sampling from candidates gives the full row's tokens, asking for the row when it must", "[engine][sampling]") {
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
