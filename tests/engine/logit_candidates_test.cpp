// Sampling from a row's candidates (what a device backend sends) against sampling from the whole
// row: ReferenceTopCandidates (the CPU twin of the device kernel) against its definition, the
// ranks' candidates merging into the row's exact top k and tail mass, the two sampling paths
// giving the same tokens from the same seed for every setting (the candidates path asking for the
// full row when a decision falls beyond its candidates), and the scheduler on a backend that sends
// candidates generating what it generates from full rows.
//
// Every case's name starts with "logit candidates:" so `ctest -R logit` runs them all.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "engine/cuda/reference_ops.h"
#include "engine/logit_candidates.h"
#include "engine/sampler.h"
#include "serving_fixture.h"

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
        case 0:
          x = std::normal_distribution<float>(0.0f, 2.0f)(rng);
          break;
        case 1:
          x = 0.5f * static_cast<float>(level(rng));
          break;  // nine values: ties everywhere
        case 2:
          x = i % 3 == 0 ? -kInf : 0.25f * static_cast<float>(level(rng));
          break;
        case 3:
          x = 1.0f;
          break;  // all equal
        case 4:
          x = -kInf;
          break;  // all -inf
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
          for (size_t i = static_cast<size_t>(k); i < order.size(); ++i)
            tail += std::exp((row[order[i]] - row[order[0]]) / tt);
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

struct Setting {
  float temperature;
  int top_k;
  float top_p;
  float min_p;
};

// Greedy, and every combination of T 0.7/1/1.5, top_k 0/5/40/300, top_p 0.5/0.9/1, min_p 0/0.05.
std::vector<Setting> AllSettings() {
  std::vector<Setting> out = {{0, 0, 1, 0}};
  for (float t : {0.7f, 1.0f, 1.5f}) {
    for (int top_k : {0, 5, 40, 300}) {
      for (float top_p : {0.5f, 0.9f, 1.0f}) {
        for (float min_p : {0.0f, 0.05f}) out.push_back({t, top_k, top_p, min_p});
      }
    }
  }
  return out;
}

// Draws that needed the full row, of all draws.
struct Fallbacks {
  int full_rows = 0, draws = 0;
};

// For each setting and seed, two samplers with the same seed follow rows of `n` logits: one gets
// the full rows, the other the rows' candidates (tp 4 ranks, `k` candidates) and the full row
// only when it asks. Their tokens must be equal at every step. Returns the fallbacks per setting.
std::vector<Fallbacks> CompareSamplers(const std::vector<Setting>& settings, int n, int k, float scale,
                                       const std::vector<uint64_t>& seeds, int steps, uint32_t row_seed) {
  struct Pair {
    Sampler full, cand;
  };
  std::vector<std::vector<Pair>> samplers(settings.size());
  for (size_t s = 0; s < settings.size(); ++s) {
    for (uint64_t seed : seeds) {
      const SamplingParams p{.temperature = settings[s].temperature,
                             .top_k = settings[s].top_k,
                             .top_p = settings[s].top_p,
                             .min_p = settings[s].min_p,
                             .seed = seed};
      auto full = Sampler::Create(p);
      auto cand = Sampler::Create(p);
      REQUIRE(full.ok());
      REQUIRE(cand.ok());
      samplers[s].push_back({std::move(*full), std::move(*cand)});
    }
  }
  std::vector<Fallbacks> fallbacks(settings.size());
  for (int step = 0; step < steps; ++step) {
    // A peak of a few tokens over the noise, as a language model's rows have.
    std::vector<float> row = Row(n, row_seed + step, scale);
    for (int i = 0; i < 3; ++i) row[(step * 977 + i * 131) % n] += 2.0f * scale;
    for (float t : {0.0f, 0.7f, 1.0f, 1.5f}) {
      const LogitCandidates c = Candidates(row, 4, k, t);
      for (size_t s = 0; s < settings.size(); ++s) {
        if (settings[s].temperature != t) continue;
        for (size_t i = 0; i < seeds.size(); ++i) {
          Pair& p = samplers[s][i];
          const int32_t want = p.full.Sample(row);
          Sampler::Outcome got = p.cand.Sample(c);
          ++fallbacks[s].draws;
          if (got.needs_full_row) {
            ++fallbacks[s].full_rows;
            got.token = p.cand.Sample(row);
          }
          INFO("n " << n << ", k " << k << ", scale " << scale << ", T " << settings[s].temperature << ", top_k "
                    << settings[s].top_k << ", top_p " << settings[s].top_p << ", min_p " << settings[s].min_p
                    << ", seed " << seeds[i] << ", step " << step);
          REQUIRE(got.token == want);
        }
      }
    }
  }
  return fallbacks;
}

void Report(const char* what, const std::vector<Setting>& settings, const std::vector<Fallbacks>& f) {
  int full_rows = 0, draws = 0;
  for (const Fallbacks& x : f) {
    full_rows += x.full_rows;
    draws += x.draws;
  }
  std::printf("logit candidates, %s: %d of %d draws needed the full row\n", what, full_rows, draws);
  for (size_t s = 0; s < settings.size(); ++s) {
    if (f[s].full_rows == 0) continue;
    std::printf("  T %.1f top_k %d top_p %.2f min_p %.2f: %d of %d\n", settings[s].temperature, settings[s].top_k,
                settings[s].top_p, settings[s].min_p, f[s].full_rows, f[s].draws);
  }
}

TEST_CASE("logit candidates: sampling from candidates gives the full row's tokens (small vocabularies)",
          "[engine][sampling]") {
  const std::vector<Setting> settings = AllSettings();
  int full_rows = 0, draws = 0;
  for (int k : {8, 64}) {
    for (float scale : {6.0f, 2.0f, 0.3f}) {  // peaked to flat
      const auto f = CompareSamplers(settings, 512, k, scale, {1, 2, 3, 4, 5}, 16, 100);
      for (size_t s = 0; s < settings.size(); ++s) {
        full_rows += f[s].full_rows;
        draws += f[s].draws;
        // Greedy, and top_k within the candidates, never need the row.
        if (settings[s].temperature == 0 || (settings[s].top_k > 0 && settings[s].top_k <= k)) {
          CHECK(f[s].full_rows == 0);
        }
      }
    }
  }
  std::printf("logit candidates, 512 entries: %d of %d draws needed the full row\n", full_rows, draws);
  CHECK(full_rows > 0);
  CHECK(full_rows < draws);
}

TEST_CASE("logit candidates: sampling from candidates gives the full row's tokens (262,144 entries)",
          "[engine][sampling]") {
  const std::vector<Setting> settings = AllSettings();
  for (float scale : {8.0f, 3.0f, 0.5f}) {
    const auto f = CompareSamplers(settings, 262144, 64, scale, {7, 8}, 2, 500);
    char what[64];
    std::snprintf(what, sizeof what, "262,144 entries, 64 candidates, scale %.1f", scale);
    Report(what, settings, f);
    if (scale == 0.5f) {
      // Flat rows at a high temperature without top_k put most of the mass beyond any 64: the
      // fallback must happen there.
      for (size_t s = 0; s < settings.size(); ++s) {
        if (settings[s].temperature == 1.5f && settings[s].top_k == 0 && settings[s].top_p == 1 &&
            settings[s].min_p == 0) {
          CHECK(f[s].full_rows > 0);
        }
      }
    }
  }
}

// A top_k past the candidates, or a top_p cut past them, is decided from the candidates when the
// bounds on the unseen entries leave one answer: on peaked rows that is most draws.
TEST_CASE("logit candidates: cuts past the candidates are decided from the bounds when they can be",
          "[engine][sampling]") {
  const std::vector<Setting> settings = {{1.0f, 300, 1, 0}, {1.0f, 0, 0.9f, 0}, {1.0f, 300, 0.95f, 0}};
  const auto f = CompareSamplers(settings, 262144, 64, 6.0f, {1, 2, 3, 4, 5, 6, 7, 8}, 3, 900);
  Report("peaked 262,144 entries, cuts past 64 candidates", settings, f);
  for (const Fallbacks& x : f) CHECK(x.full_rows < x.draws / 2);
}

TEST_CASE("logit candidates: candidates of the whole vocabulary never need the row", "[engine][sampling]") {
  // 4 ranks of 32 entries, 32 candidates each: the merge keeps all 128.
  const std::vector<Setting> settings = AllSettings();
  const auto f = CompareSamplers(settings, 128, 128, 0.3f, {1, 2}, 8, 40);
  for (const Fallbacks& x : f) CHECK(x.full_rows == 0);
}

TEST_CASE("logit candidates: a needs_full_row step keeps the generator in step", "[engine][sampling]") {
  // Flat rows and no cut: the draw falls beyond 4 candidates of 4096 nearly always.
  const SamplingParams p{.temperature = 1.0f, .seed = 5};
  auto full = Sampler::Create(p);
  auto cand = Sampler::Create(p);
  REQUIRE(full.ok());
  REQUIRE(cand.ok());
  int asked = 0;
  for (int step = 0; step < 20; ++step) {
    const std::vector<float> row = Row(4096, 60 + step, 0.1f);
    Sampler::Outcome got = cand->Sample(Candidates(row, 2, 4, 1.0f));
    if (got.needs_full_row) {
      ++asked;
      got.token = cand->Sample(row);
    }
    CHECK(got.token == full->Sample(row));
  }
  CHECK(asked > 10);
}

// ---- the scheduler on a backend that sends candidates ----

// A CpuBackend whose Forward turns each row into candidates as `tp` device ranks would send them
// (ReferenceTopCandidates per shard, MergeRankCandidates), keeping the rows for LogitsRow.
class CandidatesBackend final : public Backend {
 public:
  CandidatesBackend(std::unique_ptr<Backend> inner, int tp, int k) : inner_(std::move(inner)), tp_(tp), k_(k) {}

  const ModelConfig& config() const override { return inner_->config(); }
  Result<SequenceId> AddSequence() override { return inner_->AddSequence(); }
  Status ReleaseSequence(SequenceId seq) override { return inner_->ReleaseSequence(seq); }
  Result<int64_t> SequenceLength(SequenceId seq) const override { return inner_->SequenceLength(seq); }
  Status Truncate(SequenceId seq, int64_t length) override { return inner_->Truncate(seq, length); }
  int64_t context_limit() const override { return inner_->context_limit(); }
  KvUsage kv_usage() const override { return inner_->kv_usage(); }
  Result<SnapshotId> TakeSnapshot(SequenceId seq) override { return inner_->TakeSnapshot(seq); }
  Result<SequenceId> ForkSnapshot(SnapshotId snap) override { return inner_->ForkSnapshot(snap); }
  Status ReleaseSnapshot(SnapshotId snap) override { return inner_->ReleaseSnapshot(snap); }

  Result<ForwardResult> Forward(std::span<const ForwardItem> batch, const ForwardOptions& options) override {
    rows_.clear();
    TEMPER_ASSIGN_OR_RETURN(ForwardResult out, inner_->Forward(batch, options));
    bool candidates = options.candidates;
    for (const ForwardItem& item : batch) candidates = candidates && !item.all_logits;
    if (!candidates) return out;
    // No all_logits: row i is item i's last token.
    const size_t vocab = static_cast<size_t>(config().vocab_size);
    rows_ = std::move(out.logits);
    out.logits.clear();
    for (int64_t r = 0; r < out.rows; ++r) {
      const std::span<const float> row(rows_.data() + r * vocab, vocab);
      out.candidates.push_back(Candidates(row, tp_, k_, batch[r].temperature));
    }
    ++forwards_;
    return out;
  }
  int sample_candidates() const override { return k_; }
  Result<std::vector<float>> LogitsRow(int64_t row) const override {
    const size_t vocab = static_cast<size_t>(config().vocab_size);
    if (row < 0 || static_cast<size_t>(row + 1) * vocab > rows_.size()) {
      return Status::FailedPrecondition("logit row not held");
    }
    ++rows_asked_;
    return std::vector<float>(rows_.begin() + row * vocab, rows_.begin() + (row + 1) * vocab);
  }

  int64_t forwards() const { return forwards_; }
  int64_t rows_asked() const { return rows_asked_; }

 private:
  std::unique_ptr<Backend> inner_;
  const int tp_, k_;
  std::vector<float> rows_;
  int64_t forwards_ = 0;
  mutable int64_t rows_asked_ = 0;
};

TEST_CASE("logit candidates: the scheduler samples from candidates as from full rows", "[engine][scheduler]") {
  std::vector<GenerateRequest> requests;
  const std::vector<Setting> settings = {{0, 0, 1, 0},      {0.8f, 0, 1, 0},     {1.5f, 0, 1, 0},
                                         {1.0f, 5, 1, 0},   {1.0f, 40, 0.9f, 0}, {1.2f, 0, 0.9f, 0.05f},
                                         {1.0f, 300, 1, 0}, {0.7f, 0, 0.5f, 0}};
  for (size_t i = 0; i < settings.size(); ++i) {
    GenerateRequest r = testing::Greedy(testing::RandomPrompt(40 + i, 6 + 3 * static_cast<int>(i)), 20);
    r.sampling.temperature = settings[i].temperature;
    r.sampling.top_k = settings[i].top_k;
    r.sampling.top_p = settings[i].top_p;
    r.sampling.min_p = settings[i].min_p;
    r.sampling.seed = 300 + i;
    requests.push_back(r);
  }
  // Every request at once (batched rows), on the plain CPU backend and on candidates of it.
  auto generate = [&](Backend& backend) {
    auto scheduler = testing::MakeScheduler(backend);
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (const GenerateRequest& r : requests) {
      auto s = scheduler->Submit(r);
      REQUIRE(s.ok());
      streams.push_back(std::move(*s));
    }
    std::vector<std::vector<int32_t>> tokens;
    for (auto& s : streams) {
      const StreamEvent e = s->Wait();
      REQUIRE(e.error.ok());
      tokens.push_back(e.tokens);
    }
    const SchedulerMetrics m = testing::SettledMetrics(*scheduler, [&](const SchedulerMetrics& x) {
      return x.finished_requests == static_cast<int64_t>(requests.size());
    });
    return std::make_pair(tokens, m.full_row_samples);
  };
  auto plain = testing::ServingBackend();
  const auto [want, none] = generate(*plain);
  CHECK(none == 0);
  for (int tp : {1, 2, 4}) {
    for (int k : {4, 32}) {
      INFO("tp " << tp << ", k " << k);
      CandidatesBackend backend(testing::ServingBackend(), tp, k);
      const auto [got, full_rows] = generate(backend);
      for (size_t i = 0; i < requests.size(); ++i) {
        INFO("request " << i << " (T " << settings[i].temperature << ", top_k " << settings[i].top_k << ")");
        CHECK(got[i] == want[i]);
      }
      CHECK(backend.forwards() > 0);
      CHECK(full_rows == backend.rows_asked());
      std::printf("logit candidates, scheduler at tp %d, k %d: %lld full rows\n", tp, k,
                  static_cast<long long>(full_rows));
    }
  }
}

}  // namespace
}  // namespace temper::engine
