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
#include "engine/cuda/attention_inputs.h"
#include "engine/cuda/kernel_harness.h"
#include "engine/cuda/kernels.h"
#include "engine/cuda_test_support.h"

namespace temper::bench {
namespace {

using engine::cuda::HeadRange;
using engine::cuda::KvLayerView;
using engine::cuda::RowTables;
using engine::cuda::testing::DeviceVec;
using engine::cuda::testing::Near;

using engine::cuda::testing::AttentionCase;
using engine::cuda::testing::AttentionDevice;
using engine::cuda::testing::AttentionHost;

// The engine's kernel and every variant for the head_dim on the same inputs, plus one padding row
// (position -1) after the sequence's rows.
void Compare(const AttentionCase& c) {
  INFO(engine::cuda::testing::Describe(c));
  const AttentionHost h(c, /*window_tokens=*/16, /*ring_rows=*/20, /*q_scale=*/1.0f);
  const AttentionDevice d(c, h);
  DeviceVec want(std::vector<float>(d.outputs, NAN));
  DeviceVec want_part(std::vector<float>(d.partials, NAN));
  REQUIRE(engine::cuda::LaunchAttention(d.kv, d.q.get(), d.fresh_k.get(), d.fresh_v.get(), want.get(), h.rows, d.t,
                                        d.heads, c.splits, want_part.get(), nullptr)
              .ok());
  const std::vector<float> expected = want.Read();
  for (size_t i = d.outputs - size_t(c.q_heads) * c.hd; i < d.outputs; ++i) REQUIRE(expected[i] == 0.0f);  // padding
  const std::vector<AttentionVariant> variants = AttentionVariantsFor(c.hd);
  REQUIRE(!variants.empty());
  for (const AttentionVariant variant : variants) {
    INFO(variant.heads_per_block << " query heads a block, " << variant.keys_at_once << " keys at once");
    DeviceVec got(std::vector<float>(d.outputs, NAN));
    DeviceVec got_part(std::vector<float>(d.partials, NAN));
    REQUIRE(LaunchAttentionVariant(d.kv, d.q.get(), d.fresh_k.get(), d.fresh_v.get(), got.get(), h.rows, d.t, d.heads,
                                   c.splits, got_part.get(), variant, nullptr)
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
