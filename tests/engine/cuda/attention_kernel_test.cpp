// The attention kernel on the tensor cores (engine::cuda::LaunchAttention) against a CPU model of
// its numerics (queries and keys rounded to bf16 as its MMA operands are, scores and weights in
// double): sliding rings with K, full layers rebuilding K from V and full layers with K, cache keys
// and this pass's fresh keys, tiles cut short, one split or several, groups of 2 to 16 query
// heads, head dims 32 to 512 (16-dim pieces at 32; 1, 2 and 4 warps a block), and a padding row.
// On a GPU (temper_cuda_tests; skipped without one) and in the SIMT emulator
// (temper_cuda_emulated_tests). cuda_kernels_test.cpp holds it to its CPU twin.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/cuda/attention_inputs.h"
#include "engine/cuda/kernel_harness.h"
#include "engine/cuda/kernel_math.h"
#include "engine/cuda/kernels.h"
#include "engine/cuda_test_support.h"
#include "engine/model/bf16.h"

namespace temper::engine::cuda {
namespace {

using testing::AttentionCase;
using testing::AttentionDevice;
using testing::AttentionHost;
using testing::DeviceVec;
using testing::Near;

// The kernel's numerics in double: output = Σ w·v / Σ w with w = exp(s − max) over the row's
// visible keys, s = bf16(q) · bf16(K), K rebuilt in fp32 (as the kernel does) on k_eq_v layers.
std::vector<float> Model(const AttentionCase& c, const AttentionHost& in) {
  std::vector<float> out(size_t(in.rows) * c.q_heads * c.hd, 0.0f);
  const int32_t* table = in.tables.data() + in.max_blocks;  // slot 1
  for (int r = 0; r < c.rows; ++r) {
    const int64_t p = in.positions[r];
    for (int h = 0; h < c.q_heads; ++h) {
      const int kvh = h / in.group;
      std::vector<double> scores;
      std::vector<std::vector<float>> values;
      for (int64_t x = math::WindowStart(p, in.window, c.sliding); x <= p; ++x) {
        std::vector<float> key(c.hd), value(c.hd);
        for (int d = 0; d < c.hd; ++d) {
          const size_t at = size_t(kvh) * c.hd + d;
          if (x >= c.p0) {
            const size_t row = size_t(x - c.p0) * in.width;
            value[d] = RoundToBf16(in.fresh_v[row + at]);
            key[d] = RoundToBf16(in.fresh_k[row + at]);
          } else {
            const size_t row = size_t(math::KvRow(x, c.sliding, in.ring, 1, table, in.block_tokens)) * in.width;
            value[d] = Bf16ToFloat(in.v[row + at]);
            key[d] = Bf16ToFloat(in.k[row + at]);
          }
        }
        if (c.k_eq_v) {
          for (int d = 0; d < c.hd; ++d) key[d] = value[d] * Bf16ToFloat(in.k_norm[d]);
          for (int d = 0; d < in.angles; ++d) {
            math::RopePair(key[d], key[d + c.hd / 2], in.cos[x * in.angles + d], in.sin[x * in.angles + d]);
          }
          for (float& e : key) e = RoundToBf16(e);
        }
        double s = 0;
        for (int d = 0; d < c.hd; ++d) s += double(RoundToBf16(in.q[(size_t(r) * c.q_heads + h) * c.hd + d])) * key[d];
        scores.push_back(s);
        values.push_back(value);
      }
      const double max = *std::max_element(scores.begin(), scores.end());
      double den = 0;
      std::vector<double> num(c.hd, 0.0);
      for (size_t j = 0; j < scores.size(); ++j) {
        const double w = std::exp(scores[j] - max);
        den += w;
        for (int d = 0; d < c.hd; ++d) num[d] += w * values[j][d];
      }
      for (int d = 0; d < c.hd; ++d) out[(size_t(r) * c.q_heads + h) * c.hd + d] = float(num[d] / den);
    }
  }
  return out;
}

void Compare(const AttentionCase& c) {
  INFO(testing::Describe(c));
  // Queries small enough that scores of a few units let many keys weigh in each output.
  const AttentionHost h(c, /*window_tokens=*/40, /*ring_rows=*/44, /*q_scale=*/0.15f);
  const AttentionDevice d(c, h);
  DeviceVec got(std::vector<float>(d.outputs, NAN)), got_part(std::vector<float>(d.partials, NAN));
  REQUIRE(LaunchAttention(d.kv, d.q.get(), d.fresh_k.get(), d.fresh_v.get(), got.get(), h.rows, d.t, d.heads, c.splits,
                          got_part.get(), nullptr)
              .ok());
  const std::vector<float> kernel = got.Read();
  for (size_t i = d.outputs - size_t(c.q_heads) * c.hd; i < d.outputs; ++i) REQUIRE(kernel[i] == 0.0f);  // padding

  // What is left is the weights' rounding to bf16 (at most 2^-9 of each weight, so of a mean of
  // values of a few units, a few thousandths).
  Near(kernel, Model(c, h), 8e-3f, 0.0f);
}

TEST_CASE("attention on the tensor cores computes attention with bf16 queries, keys and weights") {
  TEMPER_SKIP_WITHOUT_KERNELS();
  // Decode rows (one row, many splits: tiles of 16 keys cut short) and prefill chunks (one split)
  // with fresh keys, a sliding window that wraps its ring, and groups of 2 to 16 (two blocks).
  for (int splits : {1, 3, 16}) {
    Compare({true, false, 256, 1, 70, 4, 2, splits});
    Compare({false, true, 512, 1, 100, 8, 1, splits});
    Compare({false, false, 512, 1, 100, 8, 2, splits});
  }
  Compare({true, false, 256, 5, 60, 4, 2, 1});
  Compare({true, false, 256, 3, 60, 6, 2, 1});  // groups of 3
  Compare({false, true, 512, 5, 30, 16, 1, 1});
  Compare({false, true, 256, 2, 45, 16, 2, 4});
  // A long decode row over 64 splits of many tiles each: the merge's four groups all take splits.
  Compare({false, true, 512, 1, 1500, 8, 1, 64});
  // Head dims under 256: 1 warp a block (32 in 16-dim pieces, and 64: the golden fixture's sliding
  // and full layers) and 2 (128).
  for (int hd : {32, 64, 128}) {
    Compare({false, true, hd, 1, 100, 4, 1, 3});
    Compare({true, false, hd, 3, 60, 8, 2, 1});
    Compare({false, false, hd, 1, 45, 16, 1, 4});
  }
}

TEST_CASE("attention refuses a V-only layer without its key tables, and a head_dim it is not built for") {
  TEMPER_SKIP_WITHOUT_KERNELS();
  const KvLayerView v_only{.head_dim = 512};  // no K, and no k_norm or RoPE tables to rebuild it
  const Status s = LaunchAttention(v_only, nullptr, nullptr, nullptr, nullptr, 1, RowTables{}, HeadRange{8, 0, 8, 0}, 1,
                                   nullptr, nullptr);
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains("a V-only layer needs k_norm and RoPE tables"));
  const KvLayerView with_k{.k = reinterpret_cast<uint16_t*>(16), .head_dim = 96};
  CHECK_THAT(LaunchAttention(with_k, nullptr, nullptr, nullptr, nullptr, 1, RowTables{}, HeadRange{8, 0, 2, 0}, 1,
                             nullptr, nullptr)
                 .message(),
             Catch::Contains("attention: head_dim 96 is not 32, 64, 128, 256 or 512"));
}

}  // namespace
}  // namespace temper::engine::cuda
