// The CUDA kernels held to references in three ways, one case per op and way:
//  1. each launcher against plain C++ of engine/cpu/forward.cpp's math written out here, on random
//     inputs at several shapes, with |got - ref| <= abs + |ref| · rel;
//  2. each kernel op against its CPU twin (ReferenceOps): both get the same random inputs (never
//     zeros; outputs poisoned first), run the same op, and must agree within fp32 rounding of a
//     different summation order (bf16 results within one bf16 step; the attention's outputs
//     within one bf16 step of a softmax weight, which it rounds as its MMA operand);
//  3. the whole device backend with these kernels against the golden fixture, at tp 1, 2 and 4,
//     with graph decode equal to eager decode.
// The cases build twice (kernel_harness.h): in temper_cuda_tests on a GPU (ctest label `gpu`;
// without a CUDA device every case reports itself skipped), and in temper_cuda_emulated_tests,
// where the SIMT emulator runs the same kernels' code on the CPU on every machine.
#include <cuda_runtime_api.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "engine/backend.h"
#include "engine/cuda/gemv_three_parts.h"
#include "engine/cuda/kernel_harness.h"
#include "engine/cuda/kernel_math.h"
#include "engine/cuda/kernels.h"
#include "engine/cuda/reference_ops.h"
#include "engine/cuda_test_support.h"
#include "engine/drafter_fixture.h"
#include "engine/golden_fixture.h"
#include "engine/model/bf16.h"

namespace temper::engine::cuda {
namespace {

using testing::DeviceVec;
using testing::Near;
using testing::Products;
using testing::RandomBf16;
using testing::RandomFloats;
using testing::ThroughThreeParts;

// ---- 1. Launchers against the math written out ----

TEST_CASE("GEMV bf16 equals the fp32 dot products (1-8 rows, aligned and unaligned, one to three parts)") {
  TEMPER_SKIP_WITHOUT_KERNELS();
  // Every row count: each has its own weight rows per warp (gemv_bf16.cu).
  for (int rows = 1; rows <= 8; ++rows) {
    // Widths no rows-per-warp divides, so warps straddle the parts and run past the end.
    for (auto [in, out] : {std::pair{128, 330}, std::pair{5376, 66}, std::pair{77, 5}}) {
      INFO(rows << " rows, " << in << " -> " << out);
      const auto x = RandomFloats(static_cast<size_t>(rows) * in, 1);
      const auto w = RandomBf16(static_cast<size_t>(out) * in, 2, 0.05f);
      const std::vector<float> want = Products(x, w, rows, in, out);
      DeviceVec dx(x);
      DeviceVec dw(w);
      DeviceVec dy(std::vector<float>(want.size()));
      REQUIRE(LaunchGemvBf16(dx.get(), GemvParts().Add(dw.get(), dy.get(), out), rows, in, nullptr).ok());
      Near(dy.Read(), want, 1e-4f, 1e-4f);
      // The same rows as three parts with their own weights and outputs.
      const std::vector<float> joined = ThroughThreeParts(dw.get(), rows, in, out, [&](const GemvParts& parts) {
        return LaunchGemvBf16(dx.get(), parts, rows, in, nullptr);
      });
      Near(joined, want, 1e-4f, 1e-4f);

      // Gate and up with the GeGLU in the epilogue.
      const auto up = RandomBf16(w.size(), 3, 0.05f);
      const std::vector<float> ups = Products(x, up, rows, in, out);
      std::vector<float> want_geglu(want.size());
      for (size_t i = 0; i < want.size(); ++i) want_geglu[i] = math::GeluTanh(want[i]) * ups[i];
      DeviceVec dup(up);
      DeviceVec dg(std::vector<float>(want.size()));
      REQUIRE(LaunchGemvGeglu(dx.get(), dw.get(), dup.get(), dg.get(), rows, in, out, nullptr).ok());
      Near(dg.Read(), want_geglu, 1e-4f, 1e-4f);
    }
  }
  DeviceVec x(std::vector<float>(64));
  CHECK(LaunchGemvBf16(x.get(), GemvParts(), 1, 64, nullptr).code() == StatusCode::kInvalidArgument);
  CHECK(LaunchGemvBf16(x.get(), GemvParts().Add(nullptr, x.get(), 4), 1, 64, nullptr).code() ==
        StatusCode::kInvalidArgument);
  CHECK(LaunchGemvGeglu(x.get(), nullptr, nullptr, x.get(), 9, 64, 4, nullptr).code() == StatusCode::kInvalidArgument);
}

// RmsNorm of a row in double: x · (mean(x²) + eps)^-½ · w (w empty: none).
std::vector<float> NormOf(const float* x, int n, const std::vector<uint16_t>& w) {
  double ss = 0;
  for (int i = 0; i < n; ++i) ss += double(x[i]) * x[i];
  const float inv = 1.0f / std::sqrt(float(ss / n) + 1e-6f);
  std::vector<float> out(n);
  for (int i = 0; i < n; ++i) out[i] = x[i] * inv * (w.empty() ? 1.0f : Bf16ToFloat(w[i]));
  return out;
}

TEST_CASE("RMSNorm, and the sandwich-norm residual update with the next norm") {
  TEMPER_SKIP_WITHOUT_KERNELS();
  // A head's width (256 threads), a hidden row's (1,024), and the widest each thread count holds
  // (8 elements a thread).
  for (int n : {64, 5376, 2047, 8192}) {
    INFO("n " << n);
    const int rows = 3;
    const auto x = RandomFloats(size_t(rows) * n, 3, 3.0f);
    const auto w = RandomBf16(n, 4), next_w = RandomBf16(n, 5);
    std::vector<float> want;
    for (int r = 0; r < rows; ++r) {
      const std::vector<float> row = NormOf(x.data() + size_t(r) * n, n, w);
      want.insert(want.end(), row.begin(), row.end());
    }
    DeviceVec dx(x);
    DeviceVec dw(w);
    DeviceVec dout(std::vector<float>(x.size()));
    REQUIRE(LaunchRmsNorm(dx.get(), dout.get(), dw.get(), rows, n, 1e-6f, 0.0f, nullptr).ok());
    Near(dout.Read(), want, 1e-5f, 1e-5f);

    const auto branch = RandomFloats(x.size(), 6, 10.0f);
    std::vector<float> want_x(x.size()), want_next;
    for (int r = 0; r < rows; ++r) {
      const std::vector<float> normed = NormOf(branch.data() + size_t(r) * n, n, w);
      for (int i = 0; i < n; ++i) want_x[size_t(r) * n + i] = (x[size_t(r) * n + i] + normed[i]) * 0.5f;
      const std::vector<float> next = NormOf(want_x.data() + size_t(r) * n, n, next_w);
      want_next.insert(want_next.end(), next.begin(), next.end());
    }
    DeviceVec dres(x);
    DeviceVec db(branch);
    DeviceVec dnw(next_w);
    REQUIRE(
        LaunchNormResidual(dres.get(), db.get(), dw.get(), rows, n, 1e-6f, 0.5f, dnw.get(), dout.get(), 0.0f, nullptr)
            .ok());
    Near(dres.Read(), want_x, 1e-5f, 1e-5f);
    Near(dout.Read(), want_next, 1e-5f, 1e-5f);
  }
  const Status wide = LaunchNormResidual(nullptr, nullptr, reinterpret_cast<const uint16_t*>(16), 1, 8193, 1e-6f, 1.0f,
                                         nullptr, nullptr, 0.0f, nullptr);
  CHECK(wide.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(wide.message(), Catch::Contains("n 8193 (weight required; n at most 8192)"));
}

// One sequence (ring slot 1, block table {3, 0, 2}) at `pos`, every earlier key in the cache.
void CheckDecodeAttention(bool sliding, int hd, int64_t pos, int splits) {
  // A ring longer than the window, as speculative decoding's slack makes it (kv_cache.h).
  const int window = 16, ring = 20, bt = 8, kv_heads = 2, q_heads = 4, group = 2, angles = hd / 8;
  const int width = kv_heads * hd;
  const int64_t cache_rows = sliding ? 2 * ring : 4 * bt;
  const std::vector<int32_t> blocks = {3, 0, 2, 1};
  const std::vector<int32_t> slots = {1};
  auto v = RandomBf16(static_cast<size_t>(cache_rows) * width, 9);
  auto k = RandomBf16(v.size(), 10);
  const auto k_norm = RandomBf16(hd, 11);
  const auto q = RandomFloats(static_cast<size_t>(q_heads) * hd, 12);
  std::vector<float> cos((pos + 1) * angles), sin(cos.size());
  for (int64_t p = 0; p <= pos; ++p)
    for (int j = 0; j < angles; ++j) {
      cos[p * angles + j] = std::cos(p * std::pow(1e4f, -2.0f * j / hd));
      sin[p * angles + j] = std::sin(p * std::pow(1e4f, -2.0f * j / hd));
    }
  std::vector<float> want(q.size());
  for (int h = 0; h < q_heads; ++h) {
    const int kvh = h / group;
    const int64_t lo = math::WindowStart(pos, window, sliding);
    std::vector<float> scores, vals;
    for (int64_t p = lo; p <= pos; ++p) {
      const int64_t row = math::KvRow(p, sliding, ring, 1, blocks.data(), bt);
      std::vector<float> key(hd);
      for (int d = 0; d < hd; ++d) {
        const float vd = Bf16ToFloat(v[row * width + kvh * hd + d]);
        key[d] = sliding ? Bf16ToFloat(k[row * width + kvh * hd + d]) : vd * Bf16ToFloat(k_norm[d]);
        vals.push_back(vd);
      }
      if (!sliding) {
        for (int j = 0; j < angles; ++j)
          math::RopePair(key[j], key[j + hd / 2], cos[p * angles + j], sin[p * angles + j]);
        for (float& e : key) e = math::RoundToBf16(e);  // the kernel's MMA operand
      }
      float s = 0;
      for (int d = 0; d < hd; ++d) s += math::RoundToBf16(q[h * hd + d]) * key[d];
      scores.push_back(s);
    }
    float max = scores[0], sum = 0;
    for (float s : scores) max = std::max(max, s);
    for (float& s : scores) sum += (s = std::exp(s - max));
    for (size_t i = 0; i < scores.size(); ++i)
      for (int d = 0; d < hd; ++d) want[h * hd + d] += scores[i] / sum * vals[i * hd + d];
  }
  DeviceVec dv(v);
  DeviceVec dk(k);
  DeviceVec dkn(k_norm);
  DeviceVec dq(q);
  DeviceVec dc(cos);
  DeviceVec ds(sin);
  // Slot 1's block table is the second of two rows.
  std::vector<int32_t> tables(8, 0);
  std::copy(blocks.begin(), blocks.end(), tables.begin() + 4);
  DeviceVec dbl(tables);
  DeviceVec dsl(slots);
  DeviceVec dpos(std::vector<int64_t>{pos});
  DeviceVec dstart(std::vector<int64_t>{pos + 1});  // every key from the cache
  DeviceVec dfirst(std::vector<int32_t>{0});
  DeviceVec dend(std::vector<int64_t>{pos + 1});
  DeviceVec dout(std::vector<float>(q.size()));
  DeviceVec dpart(std::vector<float>(size_t(q_heads) * splits * (hd + 2)));
  KvLayerView kv{.k = sliding ? dk.get() : nullptr,
                 .v = dv.get(),
                 .k_norm = dkn.get(),
                 .sliding = sliding,
                 .window = window,
                 .ring = ring,
                 .kv_heads = kv_heads,
                 .head_dim = hd,
                 .block_tokens = bt,
                 .rope = RopeView{dc.get(), ds.get(), angles}};
  const RowTables t{.positions = dpos.get(),
                    .slots = dsl.get(),
                    .chunk_start = dstart.get(),
                    .first_row = dfirst.get(),
                    .chunk_end = dend.get(),
                    .blocks = dbl.get(),
                    .max_blocks = 4};
  REQUIRE(LaunchAttention(kv, dq.get(), nullptr, nullptr, dout.get(), 1, t, HeadRange{q_heads, 0, group, 0}, splits,
                          dpart.get(), nullptr)
              .ok());
  // The kernel's softmax weights are bf16 MMA operands (within half a bf16 step, 2^-9 to 2^-8, of
  // each): of a mean of values of a few units, a few thousandths.
  Near(dout.Read(), want, 8e-3f, 0.0f);
}

TEST_CASE("split-KV decode attention: sliding ring with K, and global layers rebuilding K from V") {
  TEMPER_SKIP_WITHOUT_KERNELS();
  for (int splits : {1, 5, 16}) {
    CheckDecodeAttention(true, 32, 3, splits);
    CheckDecodeAttention(true, 256, 40, splits);
    CheckDecodeAttention(false, 64, 20, splits);
    CheckDecodeAttention(false, 512, 31, splits);
  }
}

// Sampling candidates: the chunk sorts must give exactly the reference's (value, id) lists, also
// where ties straddle the k-th place across chunks and rounds, with -inf entries and rows, row
// lengths that are not a multiple of the chunk, k = n, a tie at the top (the lower index first), and
// rows packed or with a stride past n (whose padding, +inf, must never be read); max exactly, mass
// within fp32 summation.
TEST_CASE("top candidates equal ReferenceTopCandidates (ties, -inf, odd lengths, k = n)") {
  TEMPER_SKIP_WITHOUT_KERNELS();
  const float inf = std::numeric_limits<float>::infinity();
  struct Shape {
    int n, k;
  };
  for (const Shape s :
       {Shape{65536, 1}, Shape{65536, 64}, Shape{65536, 256}, Shape{262144, 64}, Shape{512, 1}, Shape{512, 7},
        Shape{512, 64}, Shape{512, 256}, Shape{5000, 100}, Shape{2049, 64}, Shape{200, 200}}) {
    for (int pattern = 0; pattern < 6; ++pattern) {
      const int padding = pattern < 3 ? 3 : 0;  // rows packed as the sampler's logits come, and rows with a tail
      INFO("n " << s.n << ", k " << s.k << ", pattern " << pattern % 3 << ", row padding " << padding);
      const int rows = 5;
      const int64_t ld = s.n + padding;
      std::vector<float> host(static_cast<size_t>(rows * ld), inf);
      std::mt19937 rng(40 + pattern);
      std::normal_distribution<float> normal(0.0f, 3.0f);
      std::uniform_int_distribution<int> level(-6, 6);
      for (int r = 0; r < rows; ++r) {
        for (int i = 0; i < s.n; ++i) {
          float& x = host[static_cast<size_t>(r * ld + i)];
          if (pattern % 3 == 0) x = normal(rng);                                // distinct values
          if (pattern % 3 == 1) x = 0.5f * static_cast<float>(level(rng));      // 13 values: ties everywhere
          if (pattern % 3 == 2) x = i % 4 == 1 || r == 4 ? -inf : normal(rng);  // -inf entries, row 4 all -inf
        }
      }
      if (pattern == 3) host[17] = host[18] = 100.0f;  // a tie at the top of row 0: the lower index first
      const std::vector<float> temperatures = {1.0f, 0.0f, 0.7f, 1.5f, 1.0f};
      std::vector<float> want_vals(static_cast<size_t>(rows * s.k)), want_max(rows), want_mass(rows);
      std::vector<int32_t> want_ids(want_vals.size());
      ReferenceTopCandidates(host.data(), ld, rows, s.n, s.k, 777, temperatures.data(), want_vals.data(),
                             want_ids.data(), want_max.data(), want_mass.data());
      DeviceVec logits(host);
      DeviceVec temps(temperatures);
      DeviceVec vals(std::vector<float>(want_vals.size(), 12345.0f));  // poisoned
      DeviceVec ids(std::vector<int32_t>(want_ids.size(), -7));
      DeviceVec max(std::vector<float>(rows, 12345.0f));
      DeviceVec mass(std::vector<float>(rows, 12345.0f));
      DeviceVec scratch(std::vector<char>(std::max<size_t>(1, TopCandidatesScratchBytes(rows, s.n, s.k))));
      REQUIRE(LaunchTopCandidates(logits.get(), ld, rows, s.n, s.k, 777, temps.get(), vals.get(), ids.get(), max.get(),
                                  mass.get(), scratch.get(), nullptr)
                  .ok());
      CHECK(vals.Read() == want_vals);
      CHECK(ids.Read() == want_ids);
      CHECK(max.Read() == want_max);
      Near(mass.Read(), want_mass, 0, 1e-4f);
    }
  }
}

TEST_CASE("top candidates refuse k beyond 256 or n") {
  TEMPER_SKIP_WITHOUT_KERNELS();
  DeviceVec logits(std::vector<float>(600, 1.0f));
  DeviceVec temps(std::vector<float>{1.0f});
  DeviceVec vals(std::vector<float>(600));
  DeviceVec ids(std::vector<int32_t>(600));
  DeviceVec one(std::vector<float>(1));
  DeviceVec scratch(std::vector<char>(TopCandidatesScratchBytes(1, 600, 300)));
  CHECK(LaunchTopCandidates(logits.get(), 600, 1, 600, 257, 0, temps.get(), vals.get(), ids.get(), one.get(), one.get(),
                            scratch.get(), nullptr)
            .code() == StatusCode::kInvalidArgument);
  CHECK(LaunchTopCandidates(logits.get(), 600, 1, 100, 101, 0, temps.get(), vals.get(), ids.get(), one.get(), one.get(),
                            scratch.get(), nullptr)
            .code() == StatusCode::kInvalidArgument);
}

// ---- 2. CudaOps against ReferenceOps ----

// The same buffer on both sides.
template <typename T>
struct Pair {
  T* gpu = nullptr;
  T* ref = nullptr;
  size_t n = 0;
};

// A CudaOps and a ReferenceOps rank side by side.
class Twins {
 public:
  Twins() : comm_(1), ref_(comm_, 0, size_t{4} << 30) { gpu_ = testing::CreateKernelOps(comm_); }
  ~Twins() {
    for (auto& [g, r] : owned_) {
      gpu_->Free(g);
      ref_.Free(r);
    }
  }
  template <typename T>
  Pair<T> Upload(const std::vector<T>& host) {
    Pair<T> p = Empty<T>(host.size());
    REQUIRE(gpu_->CopyToDevice(p.gpu, host.data(), sizeof(T) * host.size()).ok());
    REQUIRE(ref_.CopyToDevice(p.ref, host.data(), sizeof(T) * host.size()).ok());
    return p;
  }
  // Poisoned on both sides (all bits set: NaN for floats), so unwritten outputs show.
  template <typename T>
  Pair<T> Empty(size_t n) {
    Pair<T> p;
    p.n = n;
    auto g = gpu_->Alloc(sizeof(T) * n);
    auto r = ref_.Alloc(sizeof(T) * n);
    REQUIRE(g.ok());
    REQUIRE(r.ok());
    p.gpu = static_cast<T*>(*g);
    p.ref = static_cast<T*>(*r);
    std::vector<T> poison(n);
    std::memset(poison.data(), 0xff, sizeof(T) * n);
    REQUIRE(gpu_->CopyToDevice(p.gpu, poison.data(), sizeof(T) * n).ok());
    std::memset(p.ref, 0xff, sizeof(T) * n);
    owned_.push_back({p.gpu, p.ref});
    return p;
  }
  template <typename T>
  std::vector<T> Gpu(const Pair<T>& p) {
    std::vector<T> out(p.n);
    REQUIRE(gpu_->CopyToHost(out.data(), p.gpu, sizeof(T) * p.n).ok());
    REQUIRE(gpu_->Synchronize().ok());
    return out;
  }
  template <typename T>
  std::vector<T> Ref(const Pair<T>& p) {
    return std::vector<T>(p.ref, p.ref + p.n);
  }
  // The reference side's values on the other side too.
  template <typename T>
  void CopyRefToGpu(const Pair<T>& p) {
    REQUIRE(gpu_->CopyToDevice(p.gpu, p.ref, sizeof(T) * p.n).ok());
  }
  RankOps& gpu() { return *gpu_; }
  RankOps& ref() { return ref_; }

 private:
  Communicator comm_;
  ReferenceOps ref_;
  std::unique_ptr<RankOps> gpu_;
  std::vector<std::pair<void*, void*>> owned_;
};

TEST_CASE("twin: synthetic fill and bf16 rounding are bit-exact", "[gpu]") {
  TEMPER_SKIP_WITHOUT_KERNELS();
  Twins t;
  auto w = t.Empty<uint16_t>(100003);
  REQUIRE(t.gpu().FillSynthetic(w.gpu, 100003, 42, 0.5f, 0.25f).ok());
  REQUIRE(t.ref().FillSynthetic(w.ref, 100003, 42, 0.5f, 0.25f).ok());
  CHECK(t.Gpu(w) == t.Ref(w));
  auto x = t.Upload(RandomFloats(4097, 1, 3.0f));
  auto y = t.Empty<uint16_t>(4097);
  REQUIRE(t.gpu().ToBf16(x.gpu, y.gpu, 4097).ok());
  REQUIRE(t.ref().ToBf16(x.ref, y.ref, 4097).ok());
  CHECK(t.Gpu(y) == t.Ref(y));
}

TEST_CASE("twin: embedding, norms, residual, GeGLU, gather, softcap", "[gpu]") {
  TEMPER_SKIP_WITHOUT_KERNELS();
  Twins t;
  const int hidden = 5376, rows = 5, vocab = 100;
  auto table = t.Upload(RandomBf16(size_t(vocab) * hidden, 2));
  auto tokens = t.Upload(std::vector<int32_t>{150, 3, 99, 120, 149});  // some outside [100, 200)
  auto x = t.Empty<float>(size_t(rows) * hidden);
  REQUIRE(t.gpu().Embed(tokens.gpu, rows, table.gpu, 100, 200, hidden, 73.5f, x.gpu).ok());
  REQUIRE(t.ref().Embed(tokens.ref, rows, table.ref, 100, 200, hidden, 73.5f, x.ref).ok());
  Near(t.Gpu(x), t.Ref(x), 0, 0);

  auto branch = t.Upload(RandomFloats(size_t(rows) * hidden, 5, 30.0f));
  auto w = t.Upload(RandomBf16(hidden, 6));
  auto next_w = t.Upload(RandomBf16(hidden, 16));
  auto res = t.Upload(RandomFloats(size_t(rows) * hidden, 7));
  auto next = t.Empty<float>(res.n);
  REQUIRE(
      t.gpu().NormResidual(res.gpu, branch.gpu, w.gpu, rows, hidden, 1e-6f, 0.75f, next_w.gpu, next.gpu, 0.0f).ok());
  REQUIRE(
      t.ref().NormResidual(res.ref, branch.ref, w.ref, rows, hidden, 1e-6f, 0.75f, next_w.ref, next.ref, 0.0f).ok());
  Near(t.Gpu(res), t.Ref(res), 1e-5f, 1e-5f);
  Near(t.Gpu(next), t.Ref(next), 1e-5f, 1e-5f);
  // Without a next norm, with Gemma 3's 1 + w, and the plain norm without a weight.
  REQUIRE(t.gpu().NormResidual(res.gpu, branch.gpu, w.gpu, rows, hidden, 1e-6f, 1.0f, nullptr, nullptr, 1.0f).ok());
  REQUIRE(t.ref().NormResidual(res.ref, branch.ref, w.ref, rows, hidden, 1e-6f, 1.0f, nullptr, nullptr, 1.0f).ok());
  Near(t.Gpu(res), t.Ref(res), 1e-5f, 1e-5f);
  REQUIRE(t.gpu().RmsNorm(res.gpu, next.gpu, nullptr, rows, hidden, 1e-6f, 0.0f).ok());
  REQUIRE(t.ref().RmsNorm(res.ref, next.ref, nullptr, rows, hidden, 1e-6f, 0.0f).ok());
  Near(t.Gpu(next), t.Ref(next), 1e-5f, 1e-5f);

  for (const int64_t n : {int64_t{21504} * 3, int64_t{10007}}) {  // a length no vector width divides
    INFO("GeGLU over " << n);
    auto gate = t.Upload(RandomFloats(static_cast<size_t>(n), 8, 2.0f));
    auto up = t.Upload(RandomFloats(static_cast<size_t>(n), 9));
    REQUIRE(t.gpu().Geglu(gate.gpu, up.gpu, n).ok());
    REQUIRE(t.ref().Geglu(gate.ref, up.ref, n).ok());
    Near(t.Gpu(gate), t.Ref(gate), 1e-6f, 1e-5f);
  }

  // Gathered from the same uploaded rows on both sides (`res` above differs in the last bit), so a
  // copy must be exact.
  auto rows_in = t.Upload(RandomFloats(size_t(rows) * hidden, 11));
  auto index = t.Upload(std::vector<int32_t>{4, 0, 2});
  auto gathered = t.Empty<float>(size_t(3) * hidden);
  REQUIRE(t.gpu().GatherRows(rows_in.gpu, hidden, index.gpu, 3, gathered.gpu).ok());
  REQUIRE(t.ref().GatherRows(rows_in.ref, hidden, index.ref, 3, gathered.ref).ok());
  Near(t.Gpu(gathered), t.Ref(gathered), 0, 0);

  auto logits = t.Upload(RandomFloats(size_t(3) * 70000, 10, 40.0f));
  REQUIRE(t.gpu().Softcap(logits.gpu, 70000, 3, 65536, 30.0f).ok());  // the row tail stays as it was
  REQUIRE(t.ref().Softcap(logits.ref, 70000, 3, 65536, 30.0f).ok());
  Near(t.Gpu(logits), t.Ref(logits), 1e-5f, 1e-5f);
}

TEST_CASE("twin: GEMV and GEMV-GeGLU (1-8 rows) and GEMM at the 31B shapes' widths", "[gpu]") {
  TEMPER_SKIP_WITHOUT_KERNELS();
  Twins t;
  for (auto [in, out] : {std::pair{5376, 320}, std::pair{21504, 64}, std::pair{128, 512}, std::pair{77, 5}}) {
    auto w = t.Upload(RandomBf16(size_t(out) * in, 11, 0.05f));
    auto up = t.Upload(RandomBf16(size_t(out) * in, 14, 0.05f));
    for (int rows : {1, 2, 3, 8}) {
      INFO("GEMV " << rows << " x " << in << " -> " << out);
      auto x = t.Upload(RandomFloats(size_t(rows) * in, 12));
      auto y = t.Empty<float>(size_t(rows) * out);
      REQUIRE(t.gpu().Gemv(x.gpu, GemvParts().Add(w.gpu, y.gpu, out), rows, in).ok());
      REQUIRE(t.ref().Gemv(x.ref, GemvParts().Add(w.ref, y.ref, out), rows, in).ok());
      Near(t.Gpu(y), t.Ref(y), 1e-3f, 1e-3f);
      REQUIRE(t.gpu().GemvGeglu(x.gpu, w.gpu, up.gpu, y.gpu, rows, in, out).ok());
      REQUIRE(t.ref().GemvGeglu(x.ref, w.ref, up.ref, y.ref, rows, in, out).ok());
      Near(t.Gpu(y), t.Ref(y), 1e-3f, 1e-3f);
    }
    for (int rows : {9, 64, 300}) {
      INFO("GEMM " << rows << " x " << in << " -> " << out);
      auto x = t.Upload(RandomBf16(size_t(rows) * in, 13));
      auto y = t.Empty<float>(size_t(rows) * out);
      REQUIRE(t.gpu().Gemm(x.gpu, in, w.gpu, in, y.gpu, out, rows, in, out).ok());
      REQUIRE(t.ref().Gemm(x.ref, in, w.ref, in, y.ref, out, rows, in, out).ok());
      Near(t.Gpu(y), t.Ref(y), 1e-3f, 1e-3f);
    }
  }
}

// One layer's cache, filled with random keys and values, and a pass of fresh rows of one sequence
// that runs as the forward runs it: the q/k/v norms (storing the rows' keys and values first when
// `write_first`, as decode passes do), the attention over cache and fresh keys, and otherwise the
// KV write after it. Both twins must agree on every output and on the cache bytes. `gemma3`: the
// norms multiply by 1 + w, the query is scaled by 48^-1/2 and V is not normed (Gemma 3's numerics).
void CheckAttention(bool sliding, bool k_eq_v, int hd, int splits, bool write_first, int64_t p0, int kv_heads = 2,
                    int q_heads = 4, bool gemma3 = false) {
  Twins t;
  // The ring has kMaxDraftTokens rows of slack, so the pass's 6 rows may be stored before the
  // attention (QkvNorm's condition).
  const int window = 16, ring = window + kMaxDraftTokens, bt = 4, group = q_heads / kv_heads, max_blocks = 64,
            angles = hd / 8;
  const int width = kv_heads * hd;
  const int64_t cache_rows = sliding ? 2 * ring : max_blocks * bt;
  std::vector<float> cos(max_blocks * bt * angles), sin(cos.size());
  for (int p = 0; p < max_blocks * bt; ++p)
    for (int j = 0; j < angles; ++j) {
      cos[p * angles + j] = std::cos(p * std::pow(1e4f, -2.0f * j / hd));
      sin[p * angles + j] = std::sin(p * std::pow(1e4f, -2.0f * j / hd));
    }
  auto c = t.Upload(cos);
  auto s = t.Upload(sin);
  auto k_norm = t.Upload(RandomBf16(hd, 20));
  auto kc = t.Upload(RandomBf16(size_t(cache_rows) * width, 21));
  auto vc = t.Upload(RandomBf16(size_t(cache_rows) * width, 22));
  // Slot 1's block table: blocks 7, 16, 25, ..., every block once (slot 0 unused).
  std::vector<int32_t> tables(2 * max_blocks, 0);
  for (int b = 0; b < max_blocks; ++b) tables[max_blocks + b] = (7 + 9 * b) % max_blocks;
  auto blocks = t.Upload(tables);
  auto make_kv = [&](bool gpu) {
    return KvLayerView{.k = k_eq_v ? nullptr : (gpu ? kc.gpu : kc.ref),
                       .v = gpu ? vc.gpu : vc.ref,
                       .k_norm = gpu ? k_norm.gpu : k_norm.ref,
                       .norm_offset = gemma3 ? 1.0f : 0.0f,
                       .score_scale = gemma3 ? 1.0f / std::sqrt(48.0f) : 1.0f,
                       .value_norm = !gemma3,
                       .sliding = sliding,
                       .window = window,
                       .ring = ring,
                       .kv_heads = kv_heads,
                       .head_dim = hd,
                       .block_tokens = bt,
                       .rope = RopeView{gpu ? c.gpu : c.ref, gpu ? s.gpu : s.ref, angles}};
  };
  // Pass: 6 rows of sequence 1 at positions p0..p0+5 (its earlier p0 in the cache), then a padding row.
  const int rows = 7;
  auto pos = t.Upload(std::vector<int64_t>{p0, p0 + 1, p0 + 2, p0 + 3, p0 + 4, p0 + 5, -1});
  auto slots = t.Upload(std::vector<int32_t>{1, 1, 1, 1, 1, 1, 0});
  auto start = t.Upload(std::vector<int64_t>{p0, p0, p0, p0, p0, p0, 0});
  auto first = t.Upload(std::vector<int32_t>{0, 0, 0, 0, 0, 0, 6});
  auto end = t.Upload(std::vector<int64_t>{p0 + 6, p0 + 6, p0 + 6, p0 + 6, p0 + 6, p0 + 6, 0});
  auto tables_for = [&](bool gpu) {
    return RowTables{.positions = gpu ? pos.gpu : pos.ref,
                     .slots = gpu ? slots.gpu : slots.ref,
                     .chunk_start = gpu ? start.gpu : start.ref,
                     .first_row = gpu ? first.gpu : first.ref,
                     .chunk_end = gpu ? end.gpu : end.ref,
                     .blocks = gpu ? blocks.gpu : blocks.ref,
                     .max_blocks = max_blocks};
  };
  auto q = t.Upload(RandomFloats(size_t(rows) * q_heads * hd, 23));
  auto k = t.Upload(RandomFloats(size_t(rows) * width, 24));
  auto v = t.Upload(RandomFloats(size_t(rows) * width, 25));
  auto q_norm = t.Upload(RandomBf16(hd, 26));
  REQUIRE(
      t.gpu()
          .QkvNorm(make_kv(true), q.gpu, k.gpu, v.gpu, q_norm.gpu, rows, q_heads, 1e-6f, tables_for(true), write_first)
          .ok());
  REQUIRE(t.ref()
              .QkvNorm(make_kv(false), q.ref, k.ref, v.ref, q_norm.ref, rows, q_heads, 1e-6f, tables_for(false),
                       write_first)
              .ok());
  Near(t.Gpu(q), t.Ref(q), 1e-5f, 1e-5f);
  Near(t.Gpu(v), t.Ref(v), 1e-5f, 1e-5f);
  if (!k_eq_v) Near(t.Gpu(k), t.Ref(k), 1e-5f, 1e-5f);
  // Stored rows are bf16 of outputs that agree to rounding, so a few may differ in the last bit.
  auto same_bf16 = [](const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      if (std::abs(int(a[i]) - int(b[i])) > 1) return false;
    }
    return true;
  };
  CHECK(same_bf16(t.Gpu(vc), t.Ref(vc)));
  CHECK(same_bf16(t.Gpu(kc), t.Ref(kc)));
  // Such a last-bit difference in a key moves its score by up to 2^-8 of a term, which a peaked
  // softmax over head_dim 512 turns into a percent of the output: the attention and the KV write
  // get the same inputs on both sides.
  for (const Pair<float>* p : {&q, &k, &v}) t.CopyRefToGpu(*p);
  for (const Pair<uint16_t>* p : {&kc, &vc}) t.CopyRefToGpu(*p);
  auto out = t.Empty<float>(q.n);
  auto part = t.Empty<float>(size_t(rows) * q_heads * splits * (hd + 2));
  const HeadRange heads{q_heads, 0, group, 0};
  REQUIRE(t.gpu()
              .Attention(make_kv(true), q.gpu, k.gpu, v.gpu, out.gpu, rows, tables_for(true), heads, splits, part.gpu)
              .ok());
  REQUIRE(t.ref()
              .Attention(make_kv(false), q.ref, k.ref, v.ref, out.ref, rows, tables_for(false), heads, splits, part.ref)
              .ok());
  // Both round the softmax weights to bf16 (the kernel's MMA operands), but sum a score's products
  // in another order: where a weight lies at a rounding boundary, one rounds it up a bf16 step
  // (2^-8 to 2^-7 of it) and the other down. That moves the head's output by that share of
  // |v - output|, a few thousandths of these values (0.0035 at most in the emulator); a wrong key,
  // tile or dim moves it by a whole value.
  Near(t.Gpu(out), t.Ref(out), 1e-2f, 1e-3f);
  if (!write_first) {
    REQUIRE(t.gpu().KvWrite(make_kv(true), k.gpu, v.gpu, rows, tables_for(true)).ok());
    REQUIRE(t.ref().KvWrite(make_kv(false), k.ref, v.ref, rows, tables_for(false)).ok());
    CHECK(t.Gpu(vc) == t.Ref(vc));
    CHECK(t.Gpu(kc) == t.Ref(kc));
  }
}

TEST_CASE("twin: q/k/v norms, attention over cache and fresh keys, and the KV write before or after", "[gpu]") {
  TEMPER_SKIP_WITHOUT_KERNELS();
  // At position 30 a row's keys fill one split whatever the count; at 250 a full layer's 251-256
  // keys fill 7-8 of 16, and the merge combines them.
  for (int64_t p0 : {30, 250}) {
    for (int splits : {1, 3, 16}) {
      for (int hd : {32, 64, 256, 512}) {
        for (bool write_first : {false, true}) {
          INFO("rows at " << p0 << ", splits " << splits << ", head_dim " << hd
                          << (write_first ? ", KV written by the norms" : ""));
          CheckAttention(/*sliding=*/true, /*k_eq_v=*/false, hd, splits, write_first, p0);
          CheckAttention(/*sliding=*/false, /*k_eq_v=*/true, hd, splits, write_first, p0);
          CheckAttention(/*sliding=*/false, /*k_eq_v=*/false, hd, splits, write_first, p0);
        }
      }
    }
  }
  // Other groups: 3 query heads to a KV head (a block compiled for 4 holding 3), 8 (a full layer of
  // the 31B at tp 4: two blocks of 4 at head_dim 512), and 16 (two or four blocks).
  for (int q_heads : {3, 8, 16}) {
    for (int hd : {256, 512}) {
      for (bool write_first : {false, true}) {
        INFO(q_heads << " query heads to one KV head, head_dim " << hd << (write_first ? ", KV written first" : ""));
        CheckAttention(/*sliding=*/true, /*k_eq_v=*/false, hd, 16, write_first, 250, 1, q_heads);
        CheckAttention(/*sliding=*/false, /*k_eq_v=*/true, hd, 16, write_first, 250, 1, q_heads);
      }
    }
  }
  // Gemma 3's numerics on its head dims (32 in the fixtures, 256 on the 270M), 4 query heads to 1
  // KV head as on the 270M.
  for (int hd : {32, 256}) {
    for (bool write_first : {false, true}) {
      for (bool sliding : {true, false}) {
        INFO("Gemma 3, head_dim " << hd << (sliding ? ", sliding" : ", full")
                                  << (write_first ? ", KV written first" : ""));
        CheckAttention(sliding, /*k_eq_v=*/false, hd, 3, write_first, 250, 1, 4, /*gemma3=*/true);
      }
    }
  }
}

// ---- 3. The backend against the golden fixture ----

// The whole backend with the kernels under test against the golden fixture (the same bounds as on
// ReferenceOps): prefill each prompt, then decode its greedy tokens one step at a time.
void MatchFixture(int tp, bool graphs) {
  using temper::engine::testing::Tiny;
  const ModelConfig& c = Tiny().config;
  const int V = c.vocab_size;
  DeviceBackendOptions options;
  options.max_context = 256;
  options.kv.block_tokens = 4;
  options.graphs = graphs;
  options.top_candidates = 0;
  auto made = testing::CreateKernelBackend(tp, c, Tiny().weights, options);
  if (!made.ok()) FAIL(made.status().ToString());
  DeviceBackend& backend = *made->backend;
  float worst = 0;
  for (int prompt : {0, 1}) {
    const std::string j = std::to_string(prompt);
    INFO("tp " << tp << ", graphs " << graphs << ", prompt " << prompt);
    const std::vector<int32_t> input = temper::engine::testing::Reference<int32_t>("input_ids_" + j);
    const std::vector<int32_t> greedy = temper::engine::testing::Reference<int32_t>("greedy_" + j);
    const std::vector<float> margin = temper::engine::testing::Reference<float>("greedy_margin_" + j);
    const std::vector<float> greedy_logits = temper::engine::testing::Reference<float>("greedy_logits_" + j);
    auto seq = backend.AddSequence();
    REQUIRE(seq.ok());
    ForwardItem item{*seq, input, false};
    auto out = backend.Forward({&item, 1}, {});
    REQUIRE(out.ok());
    for (size_t k = 0; k < greedy.size(); ++k) {
      const float d = temper::engine::testing::MaxAbsDiff(out->logits.data(), greedy_logits.data() + k * V, V);
      INFO("greedy step " << k << " max |dlogit| " << d);
      CHECK(d <= 1.0f);
      worst = std::max(worst, d);
      if (margin[k] > 1.0f) CHECK(temper::engine::testing::ArgMax(out->logits.data(), V) == greedy[k]);
      ForwardItem step{*seq, {&greedy[k], 1}, false};
      out = backend.Forward({&step, 1}, {});
      REQUIRE(out.ok());
    }
    REQUIRE(backend.ReleaseSequence(*seq).ok());
  }
  CHECK((backend.graph_steps() > 0) == graphs);
  std::printf("golden fixture, kernels under test, tp %d%s: max |dlogit| %.3f over every greedy step\n", tp,
              graphs ? ", graph decode" : ", eager", worst);
}

TEST_CASE("the backend with these kernels matches the golden fixture at tp 1, 2 and 4, graph decode and eager alike",
          "[gpu]") {
  TEMPER_SKIP_WITHOUT_KERNELS();
  // tp 4 first: this process has launched no kernel yet, so a kernel whose code still loaded lazily
  // at its first launch would meet the peers' spinning all-reduce (kernel_loading.h).
  for (int tp : {4, 2, 1}) {
    for (bool graphs : {true, false}) MatchFixture(tp, graphs);
  }
}

// A row's logits are the same whatever else its decode pass holds: alone, beside another
// sequence's row, or as the first row of a verification pass (its next token and drafts). That is
// what makes output with speculation the same token for token as without, and a sequence's output
// independent of the batch it runs in. The context is long enough that an 8-row pass would cut its
// keys into fewer splits than a 1-row pass on every GPU (and on the emulator's 58 multiprocessors)
// if the split count followed the rows.
TEST_CASE("a row's logits do not depend on the rows beside it in its decode pass", "[gpu]") {
  TEMPER_SKIP_WITHOUT_KERNELS();
  using temper::engine::testing::Tiny;
  const ModelConfig& c = Tiny().config;
  const size_t V = c.vocab_size;
  std::vector<int32_t> prompt(600);
  std::mt19937 rng(9);
  for (int32_t& t : prompt) t = static_cast<int32_t>(rng() % V);
  DeviceBackendOptions options;
  options.max_context = 640;
  options.kv.max_tokens = 4096;
  options.kv.max_snapshots = 1;
  options.kv.max_sequences = 5;
  options.top_candidates = 0;
  auto made = testing::CreateKernelBackend(1, c, Tiny().weights, options);
  if (!made.ok()) FAIL(made.status().ToString());
  DeviceBackend& backend = *made->backend;
  // One prefill; every sequence below continues it from a snapshot.
  auto first = backend.AddSequence();
  REQUIRE(first.ok());
  ForwardItem item{*first, prompt, false};
  REQUIRE(backend.Forward({&item, 1}, {}).ok());
  auto snapshot = backend.TakeSnapshot(*first);
  REQUIRE(snapshot.ok());
  std::vector<SequenceId> seqs;
  for (int i = 0; i < 4; ++i) {
    auto fork = backend.ForkSnapshot(*snapshot);
    REQUIRE(fork.ok());
    seqs.push_back(*fork);
  }
  const std::vector<int32_t> next = {5}, other = {7}, drafts = {5, 11, 12, 13, 14, 15, 16, 17};
  ForwardItem alone{seqs[0], next, false};
  auto one = backend.Forward({&alone, 1}, {});
  REQUIRE(one.ok());
  const std::vector<float> want(one->logits.begin(), one->logits.begin() + V);

  ForwardItem pair[] = {{seqs[1], next, false}, {seqs[2], other, false}};
  auto two = backend.Forward(pair, {});
  REQUIRE(two.ok());
  CHECK(std::memcmp(two->logits.data(), want.data(), V * sizeof(float)) == 0);

  ForwardItem verify{seqs[3], drafts, /*all_logits=*/true};
  auto eight = backend.Forward({&verify, 1}, {});
  REQUIRE(eight.ok());
  REQUIRE(eight->rows == 8);
  CHECK(std::memcmp(eight->logits.data(), want.data(), V * sizeof(float)) == 0);
}

// The MTP drafter's steps with these kernels (q norms without KV heads, attention over the target's
// cache one position short of the query) against the independent numpy reference, with the
// device-backend test's bounds: max |dlogit| <= 1.0, drafts equal while the reference's margin
// exceeds 1.0.
TEST_CASE("the MTP drafter with these kernels matches the independent reference at tp 1 and 2", "[gpu]") {
  TEMPER_SKIP_WITHOUT_KERNELS();
  using namespace temper::engine::testing;
  const std::vector<int32_t> prompt = DrafterReference<int32_t>("case_prompt");
  const std::vector<int32_t> length = DrafterReference<int32_t>("case_length");
  const std::vector<int32_t> tokens = DrafterReference<int32_t>("draft_tokens");
  const std::vector<float> logits = DrafterReference<float>("draft_logits");
  const std::vector<float> margin = DrafterReference<float>("draft_margin");
  const int64_t V = Tiny().config.vocab_size;
  constexpr int kSteps = 4;
  for (int tp : {2, 1}) {
    DeviceBackendOptions options;
    options.max_context = 256;
    options.kv.block_tokens = 4;
    options.top_candidates = 16;
    options.drafter = TinyDrafter();
    auto made = cuda::testing::CreateKernelBackend(tp, Tiny().config, Tiny().weights, options);
    if (!made.ok()) FAIL(made.status().ToString());
    DeviceBackend& backend = *made->backend;
    for (size_t i = 0; i < prompt.size(); ++i) {
      const std::vector<int32_t> sequence = DrafterReference<int32_t>("sequence_" + std::to_string(prompt[i]));
      const int64_t L = length[i];
      INFO("tp " << tp << ", cache length " << L);
      auto seq = backend.AddSequence();
      REQUIRE(seq.ok());
      // The last token as a decode graph step, as the scheduler feeds it.
      ForwardItem prefill{*seq, std::span<const int32_t>(sequence).first(L - 1), false};
      REQUIRE(backend.Forward({&prefill, 1}, {}).ok());
      ForwardItem step{*seq, std::span<const int32_t>(sequence).subspan(L - 1, 1), false};
      REQUIRE(backend.Forward({&step, 1}, ForwardOptions{.candidates = true}).ok());
      const DraftRequest request{*seq, sequence[L], 0, kSteps};
      auto drafted = backend.Draft({&request, 1}, DraftOptions{.keep_logits = true});
      if (!drafted.ok()) FAIL(drafted.status().ToString());
      for (int k = 0; k < kSteps; ++k) {
        const size_t at = i * kSteps + k;
        const float d = MaxAbsDiff(drafted->logits.data() + k * V, logits.data() + at * V, V);
        INFO("step " << k << " max |dlogit| " << d << ", margin " << margin[at]);
        CHECK(d <= 1.0f);
        if (margin[at] <= 1.0f) break;
        CHECK(drafted->tokens[0][k] == tokens[at]);
      }
      REQUIRE(backend.ReleaseSequence(*seq).ok());
    }
  }
}

}  // namespace
}  // namespace temper::engine::cuda
