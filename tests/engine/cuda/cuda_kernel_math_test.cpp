// The CUDA kernels' shared scalar math (engine/cuda/kernel_math.h), checked on the CPU against the
// reference forward's definitions: split-KV attention assembled from partitions with the kernels'
// merge equals one softmax over all keys, and the cache addressing finds the CPU cache's cells.
#include "engine/cuda/kernel_math.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>
#include <vector>

namespace temper::engine::cuda {
namespace {

// out = Σ softmax(scores) v, directly (as engine/cpu/forward.cpp's Attention does).
std::vector<float> DirectAttention(const std::vector<float>& scores, const std::vector<float>& v, int hd) {
  const float max = *std::max_element(scores.begin(), scores.end());
  float sum = 0;
  std::vector<float> p(scores.size()), out(hd, 0.0f);
  for (size_t i = 0; i < scores.size(); ++i) sum += (p[i] = std::exp(scores[i] - max));
  for (size_t i = 0; i < scores.size(); ++i) {
    for (int d = 0; d < hd; ++d) out[d] += p[i] / sum * v[i * hd + d];
  }
  return out;
}

// The decode kernels' decomposition: a running merge per split (the attention kernel), then the
// splits merged at once with weights from their largest maximum (MergeKernel, SplitWeight).
std::vector<float> SplitAttention(const std::vector<float>& scores, const std::vector<float>& v, int hd, int splits) {
  const int64_t n = static_cast<int64_t>(scores.size());
  std::vector<math::SoftmaxState> states(splits, math::SoftmaxState{-INFINITY, 0.0f});
  std::vector<std::vector<float>> accs(splits, std::vector<float>(hd, 0.0f));
  for (int s = 0; s < splits; ++s) {
    const math::SplitSpan span = math::SplitKeys(n, splits, s);
    for (int64_t i = span.begin; i < span.end; ++i) {
      float sa, sb;
      math::MergeSoftmax(states[s], {scores[i], 1.0f}, sa, sb);
      for (int d = 0; d < hd; ++d) accs[s][d] = accs[s][d] * sa + v[i * hd + d] * sb;
    }
  }
  float m = -INFINITY;
  for (const math::SoftmaxState& st : states) m = std::max(m, st.max);
  std::vector<float> out(hd, 0.0f);
  float denominator = 0;
  for (int s = 0; s < splits; ++s) {
    const float w = math::SplitWeight(states[s], m);
    denominator += w * states[s].sum;
    for (int d = 0; d < hd; ++d) out[d] += w * accs[s][d];
  }
  for (float& o : out) o /= denominator;
  return out;
}

TEST_CASE("split-KV attention with the kernels' merge equals one softmax, empty splits included") {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  const int hd = 16;
  for (int n : {1, 3, 17, 256, 1000}) {
    std::vector<float> scores(n), v(static_cast<size_t>(n) * hd);
    for (float& s : scores) s = normal(rng);
    for (float& x : v) x = normal(rng);
    const std::vector<float> want = DirectAttention(scores, v, hd);
    for (int splits : {1, 2, 7, 16, 64}) {
      const std::vector<float> got = SplitAttention(scores, v, hd, splits);
      for (int d = 0; d < hd; ++d) {
        INFO("n " << n << " splits " << splits << " d " << d);
        CHECK(std::abs(got[d] - want[d]) <= 1e-5f + 1e-5f * std::abs(want[d]));
      }
    }
  }
}

TEST_CASE("split ranges cover the keys once, in order") {
  for (int64_t n : {1, 5, 64, 1023}) {
    for (int splits : {1, 3, 16, 100}) {
      int64_t next = 0;
      for (int s = 0; s < splits; ++s) {
        const math::SplitSpan span = math::SplitKeys(n, splits, s);
        CHECK(span.begin == next);
        CHECK(span.end >= span.begin);
        CHECK(span.end - span.begin <= n / splits + 1);
        next = span.end;
      }
      CHECK(next == n);
    }
  }
}

TEST_CASE("a query's splits take its visible keys once, in order, and a padding row none") {
  for (bool sliding : {false, true}) {
    for (int64_t pos : {0, 5, 31, 40, 300}) {
      for (int splits : {1, 3, 16}) {
        INFO((sliding ? "sliding" : "full") << ", position " << pos << ", " << splits << " splits");
        int64_t next = math::WindowStart(pos, 16, sliding);
        const int64_t visible = pos + 1 - next;
        for (int s = 0; s < splits; ++s) {
          const math::SplitSpan span = math::SplitPositions(pos, 16, sliding, splits, s);
          if (span.begin == span.end) continue;  // a split past the used ones
          CHECK(span.begin == next);
          CHECK(span.end - span.begin >= std::min<int64_t>(math::kMinKeysPerSplit, visible));
          next = span.end;
        }
        CHECK(next == pos + 1);
      }
      const math::SplitSpan padding = math::SplitPositions(-1, 16, sliding, 4, 0);
      CHECK(padding.begin == padding.end);
    }
  }
}

TEST_CASE("attention blocks take each of a rank's query heads once, with the KV head it reads") {
  // 8 query heads over 4 KV heads (groups of 2) and 16 over 2 (groups of 8), split over 1, 2 and
  // 4 ranks, 2 to 8 heads a block.
  for (auto [q_total, kv_total] : {std::pair{8, 4}, std::pair{16, 2}}) {
    const int group = q_total / kv_total;
    for (int tp : {1, 2, 4}) {
      for (int per_block : {2, 4, 8}) {
        for (int rank = 0; rank < tp; ++rank) {
          const int q_heads = q_total / tp, q_begin = rank * q_heads;
          const int kv_begin = q_begin / group, kv_heads = std::max(1, kv_total / tp);
          std::vector<int> taken(q_heads, 0);
          for (int kvh = 0; kvh < kv_heads; ++kvh) {
            for (int chunk = 0; chunk < (group + per_block - 1) / per_block; ++chunk) {
              const math::HeadSpan span = math::BlockHeads(q_heads, q_begin, group, kv_begin + kvh, chunk, per_block);
              CHECK(span.count <= per_block);
              for (int h = span.first; h < span.first + span.count; ++h) {
                INFO(q_total << " q heads over " << kv_total << ", tp " << tp << ", rank " << rank << ", head " << h);
                REQUIRE(h >= 0);
                REQUIRE(h < q_heads);
                CHECK((q_begin + h) / group == kv_begin + kvh);
                ++taken[h];
              }
            }
          }
          for (int h = 0; h < q_heads; ++h) CHECK(taken[h] == 1);
        }
      }
    }
  }
}

TEST_CASE("cache addressing: the ring slot and the paged row of a position") {
  // The strict window of point 7: a query at pos sees pos - window + 1 .. pos.
  CHECK(math::WindowStart(0, 8, true) == 0);
  CHECK(math::WindowStart(7, 8, true) == 0);
  CHECK(math::WindowStart(8, 8, true) == 1);
  CHECK(math::WindowStart(100, 8, false) == 0);
  // Ring: sequence slot 3 of window 8 owns rows 24..31, position p at 24 + p % 8.
  CHECK(math::KvRow(0, true, 8, 3, nullptr, 16) == 24);
  CHECK(math::KvRow(13, true, 8, 3, nullptr, 16) == 29);
  // Pages: block table {5, 2}, 16 tokens a block.
  const int32_t blocks[] = {5, 2};
  CHECK(math::KvRow(0, false, 8, 0, blocks, 16) == 80);
  CHECK(math::KvRow(15, false, 8, 0, blocks, 16) == 95);
  CHECK(math::KvRow(16, false, 8, 0, blocks, 16) == 32);
  CHECK(math::KvRow(20, false, 8, 0, blocks, 16) == 36);
  // Every position of a window lands on a distinct ring row.
  std::vector<int64_t> rows;
  for (int64_t p = 40; p < 48; ++p) rows.push_back(math::KvRow(p, true, 8, 1, nullptr, 16));
  std::sort(rows.begin(), rows.end());
  CHECK(std::unique(rows.begin(), rows.end()) == rows.end());
}

TEST_CASE("element math matches the CPU forward's definitions") {
  // gelu_pytorch_tanh at a few points (values from torch.nn.functional.gelu(x, approximate='tanh')).
  CHECK(math::GeluTanh(0.0f) == 0.0f);
  CHECK(math::GeluTanh(1.0f) == Approx(0.8411920).epsilon(1e-6));
  CHECK(math::GeluTanh(-2.0f) == Approx(-0.0454023).epsilon(1e-5));
  // rotate_half: (x1, x2) -> (x1 c - x2 s, x2 c + x1 s); a quarter turn maps (1, 0) to (0, 1).
  float a = 1, b = 0;
  math::RopePair(a, b, 0.0f, 1.0f);
  CHECK(a == 0.0f);
  CHECK(b == 1.0f);
  CHECK(math::Softcap(1000.0f, 30.0f) == Approx(30.0f));
  CHECK(math::Softcap(3.0f, 0.0f) == 3.0f);
  // (mean(x²) + eps)^-½ for x = (3, 4): mean 12.5.
  CHECK(math::RmsScale(25.0f, 2, 0.0f) == Approx(1.0f / std::sqrt(12.5f)));
  CHECK(math::Bf16ToFloat(0x3f80) == 1.0f);
  CHECK(math::Bf16ToFloat(0xc000) == -2.0f);
}

}  // namespace
}  // namespace temper::engine::cuda
