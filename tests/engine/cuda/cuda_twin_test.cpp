// Every CUDA op against its CPU twin: CudaOps and ReferenceOps get the same random inputs (never
// zeros; outputs poisoned first), run the same op, and must agree within fp32 rounding of a
// different summation order (bf16 results within one bf16 step). Then the whole device backend on
// CudaOps against the golden fixture, at tp 1, 2 and 4 on one GPU, with graph decode equal to
// eager decode. Every case SKIPs without a CUDA device (ctest label gpu).
#include <cuda_runtime_api.h>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "engine/model/bf16.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_ops.h"
#include "engine/cuda/kernel_math.h"
#include "engine/cuda/reference_ops.h"
#include "engine/cuda_test_support.h"
#include "engine/golden_fixture.h"

namespace temper::engine::cuda {
namespace {

using testing::HaveGpu;
using testing::Near;
using testing::RandomBf16;
using testing::RandomFloats;

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
  Twins() : comm_(1), ref_(comm_, 0, size_t{4} << 30) {
    auto gpu = CudaOps::Create(0, 0, nullptr);
    if (!gpu.ok()) FAIL(gpu.status().ToString());
    gpu_ = std::move(*gpu);
  }
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
    REQUIRE(cudaMemset(p.gpu, 0xff, sizeof(T) * n) == cudaSuccess);
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
  RankOps& gpu() { return *gpu_; }
  RankOps& ref() { return ref_; }

 private:
  Communicator comm_;
  ReferenceOps ref_;
  std::unique_ptr<CudaOps> gpu_;
  std::vector<std::pair<void*, void*>> owned_;
};

TEST_CASE("twin: synthetic fill and bf16 rounding are bit-exact", "[gpu]") {
  if (!HaveGpu()) return;
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

TEST_CASE("twin: embedding, norms with RoPE, residual, GeGLU, gather, softcap", "[gpu]") {
  if (!HaveGpu()) return;
  Twins t;
  const int hidden = 5376, rows = 5, vocab = 100;
  auto table = t.Upload(RandomBf16(size_t(vocab) * hidden, 2));
  auto tokens = t.Upload(std::vector<int32_t>{150, 3, 99, 120, 149});  // some outside [100, 200)
  auto x = t.Empty<float>(size_t(rows) * hidden);
  REQUIRE(t.gpu().Embed(tokens.gpu, rows, table.gpu, 100, 200, hidden, 73.5f, x.gpu).ok());
  REQUIRE(t.ref().Embed(tokens.ref, rows, table.ref, 100, 200, hidden, 73.5f, x.ref).ok());
  Near(t.Gpu(x), t.Ref(x), 0, 0);

  const int heads = 4;
  for (int hd : {64, 256, 512}) {
    const int angles = hd / 8;
    std::vector<float> cos(64 * angles), sin(cos.size());
    for (size_t i = 0; i < cos.size(); ++i) {
      cos[i] = std::cos(0.01f * float(i));
      sin[i] = std::sin(0.01f * float(i));
    }
    auto c = t.Upload(cos);
    auto s = t.Upload(sin);
    auto w = t.Upload(RandomBf16(hd, 3));
    auto pos = t.Upload(std::vector<int64_t>{0, 63, -1});  // the last row is padding: normed, not rotated
    auto q = t.Upload(RandomFloats(size_t(3) * heads * hd, 4, 2.0f));
    auto out = t.Empty<float>(q.n);
    REQUIRE(t.gpu().NormRope(q.gpu, out.gpu, w.gpu, 3 * heads, hd, 1e-6f, RopeView{c.gpu, s.gpu, angles}, pos.gpu, heads).ok());
    REQUIRE(t.ref().NormRope(q.ref, out.ref, w.ref, 3 * heads, hd, 1e-6f, RopeView{c.ref, s.ref, angles}, pos.ref, heads).ok());
    Near(t.Gpu(out), t.Ref(out), 1e-5f, 1e-5f);
    // In place, no weight (v_norm).
    REQUIRE(t.gpu().NormRope(q.gpu, q.gpu, nullptr, 3 * heads, hd, 1e-6f, RopeView{}, nullptr, 1).ok());
    REQUIRE(t.ref().NormRope(q.ref, q.ref, nullptr, 3 * heads, hd, 1e-6f, RopeView{}, nullptr, 1).ok());
    Near(t.Gpu(q), t.Ref(q), 1e-5f, 1e-5f);
  }
  auto branch = t.Upload(RandomFloats(size_t(rows) * hidden, 5, 30.0f));
  auto w = t.Upload(RandomBf16(hidden, 6));
  auto res = t.Upload(RandomFloats(size_t(rows) * hidden, 7));
  REQUIRE(t.gpu().NormResidual(res.gpu, branch.gpu, w.gpu, rows, hidden, 1e-6f, 0.75f).ok());
  REQUIRE(t.ref().NormResidual(res.ref, branch.ref, w.ref, rows, hidden, 1e-6f, 0.75f).ok());
  Near(t.Gpu(res), t.Ref(res), 1e-5f, 1e-5f);

  auto gate = t.Upload(RandomFloats(21504 * 3, 8, 2.0f));
  auto up = t.Upload(RandomFloats(21504 * 3, 9));
  REQUIRE(t.gpu().Geglu(gate.gpu, up.gpu, 21504 * 3).ok());
  REQUIRE(t.ref().Geglu(gate.ref, up.ref, 21504 * 3).ok());
  Near(t.Gpu(gate), t.Ref(gate), 1e-6f, 1e-5f);

  auto index = t.Upload(std::vector<int32_t>{4, 0, 2});
  auto gathered = t.Empty<float>(size_t(3) * hidden);
  REQUIRE(t.gpu().GatherRows(res.gpu, hidden, index.gpu, 3, gathered.gpu).ok());
  REQUIRE(t.ref().GatherRows(res.ref, hidden, index.ref, 3, gathered.ref).ok());
  Near(t.Gpu(gathered), t.Ref(gathered), 0, 0);

  auto logits = t.Upload(RandomFloats(size_t(3) * 70000, 10, 40.0f));
  REQUIRE(t.gpu().Softcap(logits.gpu, 70000, 3, 65536, 30.0f).ok());  // the row tail stays as it was
  REQUIRE(t.ref().Softcap(logits.ref, 70000, 3, 65536, 30.0f).ok());
  Near(t.Gpu(logits), t.Ref(logits), 1e-5f, 1e-5f);
}

TEST_CASE("twin: GEMV (1-8 rows) and GEMM at the 31B shapes' widths", "[gpu]") {
  if (!HaveGpu()) return;
  Twins t;
  for (auto [in, out] : {std::pair{5376, 320}, std::pair{21504, 64}, std::pair{128, 512}, std::pair{77, 5}}) {
    auto w = t.Upload(RandomBf16(size_t(out) * in, 11, 0.05f));
    for (int rows : {1, 2, 3, 8}) {
      INFO("GEMV " << rows << " x " << in << " -> " << out);
      auto x = t.Upload(RandomFloats(size_t(rows) * in, 12));
      auto y = t.Empty<float>(size_t(rows) * out);
      REQUIRE(t.gpu().Gemv(x.gpu, in, w.gpu, in, y.gpu, out, rows, in, out).ok());
      REQUIRE(t.ref().Gemv(x.ref, in, w.ref, in, y.ref, out, rows, in, out).ok());
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

// One layer's cache for `seqs` sequences (ring slots or blocks), filled by KvWrite from a prefill
// pass and then read by an attention pass with fresh keys: both twins must agree on the cache bytes
// and the outputs.
void CheckAttention(bool sliding, bool k_eq_v, int hd, int splits) {
  Twins t;
  const int window = 16, bt = 4, kv_heads = 2, q_heads = 4, group = 2, max_blocks = 16, angles = hd / 8;
  const int width = kv_heads * hd;
  const int64_t cache_rows = sliding ? 2 * window : 32 * bt;
  std::vector<float> cos(64 * angles), sin(cos.size());
  for (int p = 0; p < 64; ++p)
    for (int j = 0; j < angles; ++j) {
      cos[p * angles + j] = std::cos(p * std::pow(1e4f, -2.0f * j / hd));
      sin[p * angles + j] = std::sin(p * std::pow(1e4f, -2.0f * j / hd));
    }
  auto c = t.Upload(cos);
  auto s = t.Upload(sin);
  auto k_norm = t.Upload(RandomBf16(hd, 20));
  auto kc = t.Upload(RandomBf16(size_t(cache_rows) * width, 21));
  auto vc = t.Upload(RandomBf16(size_t(cache_rows) * width, 22));
  // Slot 1's block table: blocks 7, 3, 12, ... (slot 0 unused).
  std::vector<int32_t> tables(2 * max_blocks, 0);
  for (int b = 0; b < max_blocks; ++b) tables[max_blocks + b] = (7 + 9 * b) % 32;
  auto blocks = t.Upload(tables);
  auto make_kv = [&](bool gpu) {
    return KvLayerView{.k = k_eq_v ? nullptr : (gpu ? kc.gpu : kc.ref), .v = gpu ? vc.gpu : vc.ref,
                       .k_norm = gpu ? k_norm.gpu : k_norm.ref, .sliding = sliding, .window = window,
                       .kv_heads = kv_heads, .head_dim = hd, .block_tokens = bt,
                       .rope = RopeView{gpu ? c.gpu : c.ref, gpu ? s.gpu : s.ref, angles}};
  };
  // Pass: 6 rows of sequence 1 at positions 30..35 (its earlier 30 in the cache), then a padding row.
  const int rows = 7;
  std::vector<int64_t> positions = {30, 31, 32, 33, 34, 35, -1};
  auto pos = t.Upload(positions);
  auto slots = t.Upload(std::vector<int32_t>{1, 1, 1, 1, 1, 1, 0});
  auto start = t.Upload(std::vector<int64_t>{30, 30, 30, 30, 30, 30, 0});
  auto first = t.Upload(std::vector<int32_t>{0, 0, 0, 0, 0, 0, 6});
  auto end = t.Upload(std::vector<int64_t>{36, 36, 36, 36, 36, 36, 0});
  auto tables_for = [&](bool gpu) {
    return RowTables{.positions = gpu ? pos.gpu : pos.ref, .slots = gpu ? slots.gpu : slots.ref,
                     .chunk_start = gpu ? start.gpu : start.ref, .first_row = gpu ? first.gpu : first.ref,
                     .chunk_end = gpu ? end.gpu : end.ref, .blocks = gpu ? blocks.gpu : blocks.ref,
                     .max_blocks = max_blocks};
  };
  auto q = t.Upload(RandomFloats(size_t(rows) * q_heads * hd, 23));
  auto k = t.Upload(RandomFloats(size_t(rows) * width, 24));
  auto v = t.Upload(RandomFloats(size_t(rows) * width, 25));
  auto out = t.Empty<float>(q.n);
  auto part = t.Empty<float>(size_t(rows) * q_heads * splits * (hd + 2));
  const HeadRange heads{q_heads, 0, group, 0};
  REQUIRE(t.gpu().Attention(make_kv(true), q.gpu, k.gpu, v.gpu, out.gpu, rows, tables_for(true), heads, splits, part.gpu).ok());
  REQUIRE(t.ref().Attention(make_kv(false), q.ref, k.ref, v.ref, out.ref, rows, tables_for(false), heads, splits, part.ref).ok());
  Near(t.Gpu(out), t.Ref(out), 1e-4f, 1e-3f);
  REQUIRE(t.gpu().KvWrite(make_kv(true), k.gpu, v.gpu, rows, tables_for(true)).ok());
  REQUIRE(t.ref().KvWrite(make_kv(false), k.ref, v.ref, rows, tables_for(false)).ok());
  CHECK(t.Gpu(vc) == t.Ref(vc));
  CHECK(t.Gpu(kc) == t.Ref(kc));
}

TEST_CASE("twin: attention over cache and fresh keys, and the KV write", "[gpu]") {
  if (!HaveGpu()) return;
  for (int splits : {1, 3, 16}) {
    for (int hd : {32, 64, 256, 512}) {
      INFO("splits " << splits << ", head_dim " << hd);
      CheckAttention(/*sliding=*/true, /*k_eq_v=*/false, hd, splits);
      CheckAttention(/*sliding=*/false, /*k_eq_v=*/true, hd, splits);
      CheckAttention(/*sliding=*/false, /*k_eq_v=*/false, hd, splits);
    }
  }
}

TEST_CASE("twin: sampling candidates", "[gpu]") {
  if (!HaveGpu()) return;
  Twins t;
  for (int n : {512, 65536}) {
    for (int k : {1, 64, 256}) {
      INFO("n " << n << ", k " << k);
      std::vector<float> host = RandomFloats(size_t(3) * n, 30, 5.0f);
      host[17] = host[18] = 100.0f;  // a tie at the top: the lower index first
      auto logits = t.Upload(host);
      auto temps = t.Upload(std::vector<float>{1.0f, 0.0f, 0.7f});
      auto vals = t.Empty<float>(size_t(3) * k);
      auto ids = t.Empty<int32_t>(size_t(3) * k);
      auto max = t.Empty<float>(3);
      auto mass = t.Empty<float>(3);
      void* scratch = nullptr;
      REQUIRE(cudaMalloc(&scratch, std::max<size_t>(1, TopCandidatesScratchBytes(3, n, k))) == cudaSuccess);
      REQUIRE(t.gpu().TopCandidates(logits.gpu, n, 3, n, k, 1000, temps.gpu, vals.gpu, ids.gpu, max.gpu, mass.gpu,
                                    scratch).ok());
      REQUIRE(t.ref().TopCandidates(logits.ref, n, 3, n, k, 1000, temps.ref, vals.ref, ids.ref, max.ref, mass.ref,
                                    nullptr).ok());
      CHECK(t.Gpu(vals) == t.Ref(vals));
      CHECK(t.Gpu(ids) == t.Ref(ids));
      CHECK(t.Gpu(max) == t.Ref(max));
      Near(t.Gpu(mass), t.Ref(mass), 0, 1e-4f);
      cudaFree(scratch);
    }
  }
}

// The whole backend on CudaOps against the golden fixture (the same bounds as on ReferenceOps).
TEST_CASE("CUDA backend matches the golden fixture at tp 1, 2 and 4 on one GPU, graph decode and eager alike",
          "[gpu]") {
  if (!HaveGpu()) return;
  using temper::engine::testing::Tiny;
  const ModelConfig& c = Tiny().config;
  const int V = c.vocab_size;
  // tp 4 first: this process has launched no kernel yet, so a kernel whose code still loaded lazily
  // at its first launch would meet the peers' spinning all-reduce (kernel_loading.h).
  for (int tp : {4, 2, 1}) {
    for (bool graphs : {true, false}) {
      CudaBackendOptions options;
      options.devices.assign(static_cast<size_t>(tp), 0);
      options.backend.max_context = 256;
      options.backend.kv.block_tokens = 4;
      options.backend.graphs = graphs;
      options.backend.top_candidates = 0;
      auto backend = CreateCudaBackend(c, Tiny().weights, options);
      if (!backend.ok()) FAIL(backend.status().ToString());
      for (int prompt : {0, 1}) {
        const std::string j = std::to_string(prompt);
        INFO("tp " << tp << ", graphs " << graphs << ", prompt " << prompt);
        const std::vector<int32_t> ids = temper::engine::testing::TeacherForcedIds(prompt);
        const std::vector<int32_t> input = temper::engine::testing::Reference<int32_t>("input_ids_" + j);
        const std::vector<int32_t> greedy = temper::engine::testing::Reference<int32_t>("greedy_" + j);
        const std::vector<float> margin = temper::engine::testing::Reference<float>("greedy_margin_" + j);
        const std::vector<float> greedy_logits = temper::engine::testing::Reference<float>("greedy_logits_" + j);
        // Prefill the prompt, then decode the greedy tokens one step at a time (graph steps).
        auto seq = (*backend)->AddSequence();
        REQUIRE(seq.ok());
        ForwardItem item{*seq, input, false};
        auto out = (*backend)->Forward({&item, 1}, {});
        REQUIRE(out.ok());
        for (size_t k = 0; k < greedy.size(); ++k) {
          const float d = temper::engine::testing::MaxAbsDiff(out->logits.data(), greedy_logits.data() + k * V, V);
          INFO("greedy step " << k << " max |dlogit| " << d);
          CHECK(d <= 1.0f);
          if (margin[k] > 1.0f) CHECK(temper::engine::testing::ArgMax(out->logits.data(), V) == greedy[k]);
          ForwardItem step{*seq, {&greedy[k], 1}, false};
          out = (*backend)->Forward({&step, 1}, {});
          REQUIRE(out.ok());
        }
        REQUIRE((*backend)->ReleaseSequence(*seq).ok());
      }
      CHECK(((*backend)->graph_steps() > 0) == graphs);
    }
  }
}

}  // namespace
}  // namespace temper::engine::cuda
