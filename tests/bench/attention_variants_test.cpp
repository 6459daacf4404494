// Every attention variant (bench/attention_variants.h) against the engine's attention
// (engine::cuda::LaunchAttention, itself held to its CPU twin in cuda_kernels_test.cpp) on the same
// inputs: sliding rings with K, full layers rebuilding K from V and full layers with K, cache keys
// and this pass's fresh keys, one split or several, groups of 1 to 16 query heads, and a padding
// row. On a GPU (temper_cuda_tests; skipped without one) and in the SIMT emulator
// (temper_cuda_emulated_tests).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "bench/attention_variants.h"
#include "engine/cuda/kernel_harness.h"
#include "engine/cuda/kernels.h"
#include "engine/cuda_test_support.h"

namespace temper::bench {
namespace {

using engine::cuda::HeadRange;
using engine::cuda::KvLayerView;
using engine::cuda::RopeView;
using engine::cuda::RowTables;
using engine::cuda::testing::DeviceVec;
using engine::cuda::testing::Near;
using engine::cuda::testing::RandomBf16;
using engine::cuda::testing::RandomFloats;

struct Case {
  bool sliding;
  bool k_eq_v;
  int hd;
  int rows;     // this pass's rows of one sequence, at positions p0 .. p0 + rows - 1
  int64_t p0;   // keys before p0 are in the cache, from p0 on they are this pass's
  int q_heads;  // over kv_heads KV heads
  int kv_heads;
  int splits;
};

// The engine's kernel and every variant for the head_dim on the same inputs, plus one padding row
// (position -1) after the sequence's rows.
void Compare(const Case& c) {
  INFO((c.sliding  ? "sliding"
        : c.k_eq_v ? "full, K from V"
                   : "full with K")
       << ", head_dim " << c.hd << ", " << c.rows << " rows from " << c.p0 << ", " << c.q_heads << " query heads over "
       << c.kv_heads << ", " << c.splits << " splits");
  const int window = 16, ring = 20, bt = 8, angles = c.hd / 8, rows = c.rows + 1;
  const int width = c.kv_heads * c.hd, group = c.q_heads / c.kv_heads;
  const int64_t last = c.p0 + c.rows - 1;
  const int max_blocks = static_cast<int>(last / bt + 1);
  const int64_t cache_rows = c.sliding ? 2 * ring : int64_t{2} * max_blocks * bt;
  // Slot 1's blocks in reverse order, so the block table matters.
  std::vector<int32_t> tables(size_t(2) * max_blocks, 0);
  for (int b = 0; b < max_blocks; ++b) tables[max_blocks + b] = 2 * max_blocks - 1 - b;
  std::vector<float> cos(size_t(last + 1) * angles), sin(cos.size());
  for (int64_t p = 0; p <= last; ++p) {
    for (int j = 0; j < angles; ++j) {
      cos[p * angles + j] = std::cos(p * std::pow(1e4f, -2.0f * j / c.hd));
      sin[p * angles + j] = std::sin(p * std::pow(1e4f, -2.0f * j / c.hd));
    }
  }
  std::vector<int64_t> positions(rows, -1), chunk_start(rows, c.p0), chunk_end(rows, last + 1);
  for (int r = 0; r < c.rows; ++r) positions[r] = c.p0 + r;
  DeviceVec v(RandomBf16(size_t(cache_rows) * width, 9));
  DeviceVec k(RandomBf16(size_t(cache_rows) * width, 10));
  DeviceVec k_norm(RandomBf16(c.hd, 11));
  DeviceVec q(RandomFloats(size_t(rows) * c.q_heads * c.hd, 12));
  DeviceVec fresh_k(RandomFloats(size_t(rows) * width, 13));
  DeviceVec fresh_v(RandomFloats(size_t(rows) * width, 14));
  DeviceVec dcos(cos), dsin(sin);
  DeviceVec dtables(tables);
  DeviceVec slots(std::vector<int32_t>(rows, 1));
  DeviceVec dpos(positions), dstart(chunk_start), dend(chunk_end);
  DeviceVec first_row(std::vector<int32_t>(rows, 0));
  const KvLayerView kv{.k = c.k_eq_v ? nullptr : k.get(),
                       .v = v.get(),
                       .k_norm = k_norm.get(),
                       .sliding = c.sliding,
                       .window = window,
                       .ring = ring,
                       .kv_heads = c.kv_heads,
                       .head_dim = c.hd,
                       .block_tokens = bt,
                       .rope = RopeView{dcos.get(), dsin.get(), angles}};
  const RowTables t{.positions = dpos.get(),
                    .slots = slots.get(),
                    .chunk_start = dstart.get(),
                    .first_row = first_row.get(),
                    .chunk_end = dend.get(),
                    .blocks = dtables.get(),
                    .max_blocks = max_blocks};
  const HeadRange heads{c.q_heads, 0, group, 0};
  const size_t outputs = size_t(rows) * c.q_heads * c.hd, partials = outputs / c.hd * c.splits * (c.hd + 2);
  DeviceVec want(std::vector<float>(outputs, NAN));
  DeviceVec want_part(std::vector<float>(partials, NAN));
  REQUIRE(engine::cuda::LaunchAttention(kv, q.get(), fresh_k.get(), fresh_v.get(), want.get(), rows, t, heads, c.splits,
                                        want_part.get(), nullptr)
              .ok());
  const std::vector<float> expected = want.Read();
  for (size_t i = outputs - size_t(c.q_heads) * c.hd; i < outputs; ++i) REQUIRE(expected[i] == 0.0f);  // padding
  const std::vector<AttentionVariant> variants = AttentionVariantsFor(c.hd);
  REQUIRE(!variants.empty());
  for (const AttentionVariant variant : variants) {
    INFO(variant.heads_per_block << " query heads a block, " << variant.keys_at_once << " keys at once");
    DeviceVec got(std::vector<float>(outputs, NAN));
    DeviceVec got_part(std::vector<float>(partials, NAN));
    REQUIRE(LaunchAttentionVariant(kv, q.get(), fresh_k.get(), fresh_v.get(), got.get(), rows, t, heads, c.splits,
                                   got_part.get(), variant, nullptr)
                .ok());
    Near(got.Read(), expected, 1e-4f, 1e-3f);  // as the kernels against their twins: scores over 512 dims are large
  }
}

TEST_CASE("every attention variant equals the engine's attention on the same inputs") {
  TEMPER_SKIP_WITHOUT_KERNELS();
  // Decode rows (one row, many splits) at positions where a split holds 32 keys or fewer, and a
  // long sliding row whose window wraps the ring; prefill chunks (one split) with fresh keys.
  for (int splits : {1, 3, 16}) {
    Compare({true, false, 256, 1, 40, 4, 2, splits});
    Compare({false, true, 512, 1, 100, 8, 1, splits});
    Compare({false, false, 512, 1, 100, 8, 2, splits});
  }
  Compare({true, false, 256, 5, 30, 4, 2, 1});
  Compare({true, false, 256, 3, 60, 6, 2, 1});  // groups of 3
  Compare({false, true, 512, 5, 30, 16, 1, 1});
}

TEST_CASE("an attention variant refuses what the engine's attention refuses, and a variant it does not build") {
  TEMPER_SKIP_WITHOUT_KERNELS();
  const KvLayerView v_only{.head_dim = 256};  // no K, and no k_norm or RoPE tables to rebuild it
  const Status s = LaunchAttentionVariant(v_only, nullptr, nullptr, nullptr, nullptr, 1, RowTables{},
                                          HeadRange{8, 0, 2, 0}, 1, nullptr, {2, 8}, nullptr);
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains("a V-only layer needs k_norm and RoPE tables"));
  const KvLayerView with_k{.k = reinterpret_cast<uint16_t*>(16), .head_dim = 512};
  CHECK_THAT(LaunchAttentionVariant(with_k, nullptr, nullptr, nullptr, nullptr, 1, RowTables{}, HeadRange{8, 0, 2, 0},
                                    1, nullptr, {3, 4}, nullptr)
                 .message(),
             Catch::Contains("head_dim 512 with 3 query heads a block and 4 keys at once is not a built variant"));
  CHECK(AttentionVariantsFor(128).empty());
}

}  // namespace
}  // namespace temper::bench
