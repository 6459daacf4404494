// The device backend's host side — sharding, weight upload, KV layout in bf16, chunked passes,
// graph buckets and their padding rows, snapshots — run on ReferenceOps, the CPU twin of every
// CUDA kernel, against the golden fixture. The tolerances are the fixture README's for a bf16
// engine with an fp32 residual stream: max |Δlogit| <= 1.0, top-1 equal wherever the reference's
// margin exceeds 1.0, hidden states within 0.05 of max |ref|. Every structural bug in the README's
// table moves the logits by >= 4.8, so each fails here; on a GPU, CudaOps replaces ReferenceOps
// and each kernel is held to its twin (cuda_kernels_test.cpp).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "engine/cuda/counting_ops.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/decode_launches.h"
#include "engine/cuda/device_backend.h"
#include "engine/cuda/device_drafter.h"
#include "engine/cuda/memory_plan.h"
#include "engine/cuda/reference_ops.h"
#include "engine/draft_rollback.h"
#include "engine/drafter_fixture.h"
#include "engine/golden_fixture.h"
#include "engine/serving_fixture.h"
#include "skip.h"

namespace temper::engine::cuda {
namespace {

using testing::ArgMax;
using testing::MaxAbs;
using testing::MaxAbsDiff;
using testing::Reference;
using testing::TeacherForcedIds;
using testing::Tiny;

// A device backend on `tp` reference ranks (each with its own "device" of `memory` bytes).
struct ReferenceDevice {
  std::unique_ptr<Communicator> comm;
  std::unique_ptr<DeviceBackend> backend;
};

Result<ReferenceDevice> MakeDevice(int tp, DeviceBackendOptions options = {}, size_t memory = 64 << 20,
                                   bool synthetic = false) {
  ReferenceDevice d;
  d.comm = std::make_unique<Communicator>(tp);
  std::vector<std::unique_ptr<RankOps>> ops;
  for (int r = 0; r < tp; ++r) ops.push_back(std::make_unique<ReferenceOps>(*d.comm, r, memory));
  if (options.max_context == 0) options.max_context = 256;
  if (options.kv.max_tokens == 16384) options.kv.max_tokens = 512;
  options.kv.block_tokens = 4;  // small blocks, so a prompt spans several
  TEMPER_ASSIGN_OR_RETURN(
      d.backend, DeviceBackend::Create(Tiny().config, synthetic ? nullptr : Tiny().weights, std::move(ops), options));
  return d;
}

ReferenceDevice Device(int tp, DeviceBackendOptions options = {}) {
  auto d = MakeDevice(tp, options);
  if (!d.ok()) FAIL(d.status().ToString());
  return std::move(*d);
}

// Teacher-forced logits of `ids` in one Forward.
std::vector<float> TeacherForced(DeviceBackend& b, const std::vector<int32_t>& ids,
                                 std::vector<float>* hidden = nullptr) {
  auto seq = b.AddSequence();
  REQUIRE(seq.ok());
  ForwardItem item{*seq, ids, /*all_logits=*/true};
  auto out = b.Forward({&item, 1}, ForwardOptions{.capture_hidden = hidden != nullptr});
  REQUIRE(out.ok());
  REQUIRE(out->rows == static_cast<int64_t>(ids.size()));
  REQUIRE(b.ReleaseSequence(*seq).ok());
  if (hidden) *hidden = out->hidden;
  return out->logits;
}

void CheckAgainstGolden(int tp, int max_rows) {
  const ModelConfig& c = Tiny().config;
  const int V = c.vocab_size, H = c.hidden_size;
  DeviceBackendOptions options;
  options.max_rows = max_rows;
  options.max_batch = std::min(max_rows, 8);
  auto dev = Device(tp, options);
  for (int prompt : {0, 1}) {
    const std::string j = std::to_string(prompt);
    const std::vector<int32_t> ids = TeacherForcedIds(prompt);
    const int64_t T = static_cast<int64_t>(Reference<int32_t>("input_ids_" + j).size());
    std::vector<float> hidden;
    const std::vector<float> logits = TeacherForced(*dev.backend, ids, &hidden);

    const std::vector<float> ref = Reference<float>("logits_" + j);
    const float d_logits = MaxAbsDiff(logits.data(), ref.data(), ref.size());
    const std::vector<float> greedy_logits = Reference<float>("greedy_logits_" + j);
    const float d_greedy = MaxAbsDiff(logits.data() + (T - 1) * V, greedy_logits.data(), greedy_logits.size());
    std::printf("device tp %d, %d rows/pass, prompt %d: max |dlogit| %.3f (prompt), %.3f (greedy rows)\n", tp, max_rows,
                prompt, d_logits, d_greedy);
    CHECK(d_logits <= 1.0f);
    CHECK(d_greedy <= 1.0f);
    const std::vector<int32_t> greedy = Reference<int32_t>("greedy_" + j);
    const std::vector<float> margin = Reference<float>("greedy_margin_" + j);
    for (size_t k = 0; k < greedy.size(); ++k) {
      if (margin[k] <= 1.0f) continue;
      INFO("prompt " << prompt << " greedy step " << k);
      CHECK(ArgMax(logits.data() + (T - 1 + static_cast<int64_t>(k)) * V, V) == greedy[k]);
    }
    const std::vector<float> ref_hidden = Reference<float>("hidden_" + j);
    const int64_t rows = static_cast<int64_t>(ids.size());
    for (int layer = 0; layer <= c.num_layers; ++layer) {
      const float* want = ref_hidden.data() + layer * T * H;
      const float rel = MaxAbsDiff(hidden.data() + layer * rows * H, want, T * H) / MaxAbs(want, T * H);
      INFO("prompt " << prompt << " hidden layer " << layer);
      CHECK(rel <= 0.05f);
    }
  }
}

TEST_CASE("device backend on reference ops matches the golden fixture at tp 1", "[engine][device]") {
  CheckAgainstGolden(1, 512);
}

TEST_CASE("device backend matches the golden fixture at tp 2 and 4, in passes of 5 and 64 rows", "[engine][device]") {
  CheckAgainstGolden(2, 5);
  CheckAgainstGolden(4, 64);
}

TEST_CASE("device backend: tp 1, 2 and 4 give the same logits", "[engine][device]") {
  const std::vector<int32_t> ids = TeacherForcedIds(0);
  auto one = Device(1);
  const std::vector<float> want = TeacherForced(*one.backend, ids);
  for (int tp : {2, 4}) {
    auto dev = Device(tp);
    const std::vector<float> got = TeacherForced(*dev.backend, ids);
    const float d = MaxAbsDiff(got.data(), want.data(), want.size());
    std::printf("device tp %d vs tp 1: max |dlogit| %.3g\n", tp, d);
    INFO("tp " << tp);
    // Only the summation order over shards differs (1e-6 relative), but a value that lands on
    // the other side of a bf16 rounding boundary in the cache or a GEMM operand moves by 0.4%, and
    // the random fixture model amplifies that: the agreement is bf16's, well inside the fixture's
    // bf16 tolerance and far below the 4.8 of the smallest structural bug.
    CHECK(d <= 0.25f);
  }
}

// Prefill in chunks, then decode token by token (as graph steps), against one teacher-forced pass.
TEST_CASE("device backend: chunked prefill and graph decode match a full recompute", "[engine][device]") {
  const ModelConfig& c = Tiny().config;
  const int V = c.vocab_size;
  const std::vector<int32_t> ids = TeacherForcedIds(1);  // 13 prompt + 15 greedy tokens
  auto full = Device(2);
  const std::vector<float> want = TeacherForced(*full.backend, ids);

  for (int chunk : {1, 5, 13}) {
    auto dev = Device(2);
    auto seq = dev.backend->AddSequence();
    REQUIRE(seq.ok());
    std::vector<float> got;
    for (size_t at = 0; at < ids.size();) {
      const size_t n = at < 13 ? std::min<size_t>(chunk, 13 - at) : 1;
      ForwardItem item{*seq, std::span<const int32_t>(ids).subspan(at, n), /*all_logits=*/true};
      auto out = dev.backend->Forward({&item, 1}, {});
      REQUIRE(out.ok());
      got.insert(got.end(), out->logits.begin(), out->logits.end());
      at += n;
    }
    REQUIRE(got.size() == want.size());
    // Decode steps with all_logits are single rows but not graph steps; compare them, then the
    // graph path below.
    const float d = MaxAbsDiff(got.data(), want.data(), want.size());
    std::printf("device chunk %d then decode vs full: max |dlogit| %.3g\n", chunk, d);
    INFO("chunk " << chunk);
    // Decode rows multiply fp32 activations, prefill rows bf16-rounded ones: within bf16 noise.
    CHECK(d <= 0.5f);
    for (size_t row = 12; row < ids.size(); ++row) {
      if (Reference<float>("greedy_margin_1")[row - 12] <= 1.0f) continue;
      CHECK(ArgMax(got.data() + row * V, V) == ArgMax(want.data() + row * V, V));
    }
  }
}

TEST_CASE("device backend: graph decode steps equal eager ones, bit for bit, padding rows included",
          "[engine][device]") {
  const ModelConfig& c = Tiny().config;
  const int V = c.vocab_size;
  DeviceBackendOptions eager_options;
  eager_options.graphs = false;
  auto eager = Device(2, eager_options);
  auto graphs = Device(2);
  // Three sequences decode together: bucket 4, one padding row.
  const std::vector<std::vector<int32_t>> prompts = {Reference<int32_t>("input_ids_0"),
                                                     Reference<int32_t>("input_ids_1"),
                                                     {7, 8, 9}};
  for (DeviceBackend* b : {eager.backend.get(), graphs.backend.get()}) {
    for (const auto& p : prompts) {
      auto seq = b->AddSequence();
      REQUIRE(seq.ok());
      ForwardItem item{*seq, p, false};
      REQUIRE(b->Forward({&item, 1}, {}).ok());
    }
  }
  std::vector<int32_t> next = {11, 22, 33};
  for (int step = 0; step < 6; ++step) {
    std::vector<float> rows[2];
    int i = 0;
    for (DeviceBackend* b : {eager.backend.get(), graphs.backend.get()}) {
      std::vector<ForwardItem> items;
      for (int s = 0; s < 3; ++s) items.push_back({s, {&next[s], 1}, false});
      auto out = b->Forward(items, {});
      REQUIRE(out.ok());
      REQUIRE(out->rows == 3);
      rows[i++] = out->logits;
    }
    INFO("step " << step);
    REQUIRE(rows[0] == rows[1]);
    for (int s = 0; s < 3; ++s) next[s] = ArgMax(rows[0].data() + s * V, V);
  }
  CHECK(graphs.backend->graph_steps() == 6);
  CHECK(eager.backend->graph_steps() == 0);

  // A sequence decoding alone (bucket 1) gives the same logits as in the padded bucket of 4.
  auto alone = Device(2);
  auto seq = alone.backend->AddSequence();
  REQUIRE(seq.ok());
  ForwardItem item{*seq, prompts[2], false};
  REQUIRE(alone.backend->Forward({&item, 1}, {}).ok());
  auto together = Device(2);
  std::vector<SequenceId> seqs;
  for (const auto& p : prompts) {
    auto s = together.backend->AddSequence();
    REQUIRE(s.ok());
    seqs.push_back(*s);
    ForwardItem it{*s, p, false};
    REQUIRE(together.backend->Forward({&it, 1}, {}).ok());
  }
  const int32_t token = 42;
  ForwardItem one{*seq, {&token, 1}, false};
  auto a = alone.backend->Forward({&one, 1}, {});
  std::vector<ForwardItem> three;
  for (SequenceId s : seqs) three.push_back({s, {&token, 1}, false});
  auto b = together.backend->Forward(three, {});
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(std::vector<float>(b->logits.begin() + 2 * V, b->logits.begin() + 3 * V) == a->logits);
}

TEST_CASE("device backend: a fork of a snapshot continues exactly like the original", "[engine][device]") {
  DeviceBackendOptions options;
  options.kv.max_snapshots = 2;
  auto dev = Device(2, options);
  DeviceBackend& b = *dev.backend;
  const std::vector<int32_t> ids = TeacherForcedIds(0);  // 24 + 15 tokens, past the window of 8
  auto seq = b.AddSequence();
  REQUIRE(seq.ok());
  ForwardItem prefix{*seq, std::span<const int32_t>(ids).subspan(0, 18), false};  // 18: mid-block
  REQUIRE(b.Forward({&prefix, 1}, {}).ok());
  auto snap = b.TakeSnapshot(*seq);
  REQUIRE(snap.ok());
  ForwardItem rest{*seq, std::span<const int32_t>(ids).subspan(18), true};
  auto original = b.Forward({&rest, 1}, {});
  REQUIRE(original.ok());
  auto fork = b.ForkSnapshot(*snap);
  REQUIRE(fork.ok());
  CHECK(*b.SequenceLength(*fork) == 18);
  ForwardItem again{*fork, std::span<const int32_t>(ids).subspan(18), true};
  auto forked = b.Forward({&again, 1}, {});
  REQUIRE(forked.ok());
  CHECK(forked->logits == original->logits);
}

TEST_CASE("device backend: rejected draft tokens leave no trace", "[engine][device][spec]") {
  const int V = Tiny().config.vocab_size;
  const std::vector<int32_t> ids = TeacherForcedIds(0);  // 24 + 15 tokens, past the window of 8
  auto full = Device(2);
  const std::vector<float> want = TeacherForced(*full.backend, ids);
  for (int k : {2, kMaxDraftTokens}) {
    for (int good : {0, k / 2}) {
      INFO("k " << k << ", right " << good);
      auto dev = Device(2);
      const std::vector<float> rejected = testing::LogitsThroughRejectedDrafts(*dev.backend, ids, 5, k, good);
      // The same passes with right tokens where the wrong ones were: the same numerics, so the
      // kept rows and everything after them must agree bit for bit.
      const std::vector<float> right =
          testing::LogitsThroughRejectedDrafts(*dev.backend, ids, 5, k, good, /*wrong=*/false);
      CHECK(rejected == right);
      // And against one full pass, within the bf16 noise of other pass shapes.
      REQUIRE(rejected.size() == want.size());
      CHECK(MaxAbsDiff(rejected.data(), want.data(), want.size()) <= 0.5f);
      for (size_t row = 23; row < ids.size(); ++row) {
        if (Reference<float>("greedy_margin_0")[row - 23] <= 1.0f) continue;
        CHECK(ArgMax(rejected.data() + row * V, V) == ArgMax(want.data() + row * V, V));
      }
    }
  }
}

// Past kMaxGemvRows rows a pass's products go through the GEMM, whose bf16 activations give rows
// other than a decode step's: the scheduler's drafts must never take a pass there.
TEST_CASE("device backend: drafts may fill a decode pass up to the GEMV's rows, not the largest batch",
          "[engine][device][spec]") {
  for (auto [max_batch, rows] : {std::pair{4, 4}, std::pair{8, 8}, std::pair{12, kMaxGemvRows}}) {
    DeviceBackendOptions options;
    options.max_batch = max_batch;
    options.kv.max_sequences = max_batch;
    auto dev = Device(1, options);
    INFO("max_batch " << max_batch);
    CHECK(dev.backend->max_decode_rows() == rows);
  }
}

TEST_CASE("device backend: Truncate refuses what it cannot undo", "[engine][device][spec]") {
  DeviceBackendOptions options;
  options.kv.max_snapshots = 1;
  auto dev = Device(1, options);
  testing::CheckTruncateLimits(*dev.backend, TeacherForcedIds(0));
}

TEST_CASE("device backend refuses bad batches and options with named errors", "[engine][device]") {
  auto dev = Device(1);
  DeviceBackend& b = *dev.backend;
  auto seq = b.AddSequence();
  REQUIRE(seq.ok());
  const std::vector<int32_t> ok = {1, 2, 3}, bad = {1, 512};
  ForwardItem dead{*seq + 1, ok, false};
  CHECK(b.Forward({&dead, 1}, {}).status().code() == StatusCode::kNotFound);
  ForwardItem twice[2] = {{*seq, ok, false}, {*seq, ok, false}};
  CHECK(b.Forward(twice, {}).status().code() == StatusCode::kInvalidArgument);
  ForwardItem empty{*seq, {}, false};
  CHECK(b.Forward({&empty, 1}, {}).status().code() == StatusCode::kInvalidArgument);
  ForwardItem outside{*seq, bad, false};
  const Status s = b.Forward({&outside, 1}, {}).status();
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains("id 512"));
  std::vector<int32_t> long_ids(300, 1);
  ForwardItem too_long{*seq, long_ids, false};
  CHECK(b.Forward({&too_long, 1}, {}).status().code() == StatusCode::kOutOfRange);
  CHECK(*b.SequenceLength(*seq) == 0);  // nothing was stored

  DeviceBackendOptions options;
  options.max_batch = 600;  // more than max_rows
  CHECK(MakeDevice(1, options).status().code() == StatusCode::kInvalidArgument);
  const Status small = MakeDevice(1, {}, /*memory=*/1 << 20).status();
  CHECK(small.code() == StatusCode::kResourceExhausted);
  CHECK_THAT(small.message(), Catch::Contains("rank 0"));
}

TEST_CASE("the memory plan reserves exactly the workspace a rank allocates", "[engine][device]") {
  for (int tp : {1, 2}) {
    DeviceBackendOptions options;
    options.max_rows = 40;
    options.max_batch = 4;
    options.kv.max_sequences = 6;
    options.top_candidates = 16;
    auto dev = Device(tp, options);
    auto shards = PlanShards(Tiny().config, tp);
    REQUIRE(shards.ok());
    MemoryPlanInput in;
    in.max_batch = 4;
    in.max_prefill_tokens = 40;
    in.max_sequences = 6;
    in.block_tokens = 4;
    in.max_context = 256;
    in.top_candidates = 16;
    INFO("tp " << tp);
    CHECK(RankWorkspaceBytes(Tiny().config, (*shards)[0], in) ==
          dev.backend->memory().workspace_bytes + kGemmWorkspaceBytes);
    CHECK(RankWeightBytes(Tiny().config, (*shards)[0]) == dev.backend->memory().weight_bytes);
    // With the MTP drafter, its share as DeviceDrafterBytes counts it.
    options.drafter = testing::TinyDrafter();
    auto with = Device(tp, options);
    const DrafterRankBytes drafter = DeviceDrafterBytes(testing::TinyDrafter()->config(), (*shards)[0]);
    CHECK(RankWorkspaceBytes(Tiny().config, (*shards)[0], in) + drafter.workspace ==
          with.backend->memory().workspace_bytes + kGemmWorkspaceBytes);
    CHECK(RankWeightBytes(Tiny().config, (*shards)[0]) + drafter.weights == with.backend->memory().weight_bytes);
  }
}

// A GEMM shape a pass runs for the first time loads its cuBLASLt kernel at that launch, which can
// deadlock against a peer's spinning all-reduce (device_rank.h): every shape must have run during
// creation. Passes of every kind (prefill lengths off and on the buckets, a pass split in two, many
// sequences' last tokens at once, teacher forcing longer than the logits buffer, a decode batch
// larger than the graphs) must run no shape the warm-up did not.
TEST_CASE("device backend: no pass runs a GEMM shape that creation did not warm", "[engine][device]") {
  // The fixture's vocabulary, and an odd one (synthetic weights) whose rank shards of 255 rows put
  // the head's output rows at 4-, 8- and 16-byte alignments.
  for (int vocab : {Tiny().config.vocab_size, 510}) {
    for (int tp : {1, 2}) {
      INFO("tp " << tp << ", vocab " << vocab);
      ModelConfig config = Tiny().config;
      config.vocab_size = vocab;
      const bool synthetic = vocab != Tiny().config.vocab_size;
      Communicator comm(tp);
      std::vector<std::unique_ptr<RankOps>> ops;
      std::vector<ReferenceOps*> refs;
      for (int r = 0; r < tp; ++r) {
        auto rank = std::make_unique<ReferenceOps>(comm, r, size_t{64} << 20);
        refs.push_back(rank.get());
        ops.push_back(std::move(rank));
      }
      DeviceBackendOptions options;
      options.max_context = 256;
      options.max_rows = 100;  // not a bucket: GEMMs of a full pass run 128 rows
      options.max_batch = 4;
      options.kv.max_sequences = 12;  // more logit rows than a GEMV takes: the head runs GEMMs too
      options.kv.max_tokens = 2048;
      options.kv.block_tokens = 4;
      auto made = DeviceBackend::Create(config, synthetic ? nullptr : Tiny().weights, std::move(ops), options);
      REQUIRE(made.ok());
      DeviceBackend& b = **made;
      std::vector<size_t> warmed;
      for (ReferenceOps* r : refs) warmed.push_back(r->gemm_shapes().size());
      CHECK(warmed[0] > 0);

      auto prompt = [](int n, int salt) {
        std::vector<int32_t> ids;
        for (int i = 0; i < n; ++i) ids.push_back((i * 37 + salt * 11) % 500 + 3);
        return ids;
      };
      std::vector<SequenceId> seqs;
      auto forward = [&](std::vector<ForwardItem> items) {
        auto out = b.Forward(items, {});
        REQUIRE(out.ok());
      };
      // Prefills of 9, 17, 33, 70 and 150 tokens (the last in passes of 100 and 50).
      for (int n : {9, 17, 33, 70, 150}) {
        auto seq = b.AddSequence();
        REQUIRE(seq.ok());
        const std::vector<int32_t> ids = prompt(n, n);
        forward({ForwardItem{*seq, ids, false}});
        REQUIRE(b.ReleaseSequence(*seq).ok());
      }
      // Twelve short prompts in one pass: twelve logit rows at once.
      std::vector<std::vector<int32_t>> prompts;
      std::vector<ForwardItem> items;
      for (int i = 0; i < 12; ++i) {
        auto seq = b.AddSequence();
        REQUIRE(seq.ok());
        seqs.push_back(*seq);
        prompts.push_back(prompt(3 + i, i));
      }
      for (int i = 0; i < 12; ++i) items.push_back({seqs[i], prompts[i], false});
      forward(items);
      // A decode step of ten sequences: more than the largest graph, so an eager pass of ten rows.
      const int32_t token = 7;
      items.clear();
      for (int i = 0; i < 10; ++i) items.push_back({seqs[i], {&token, 1}, false});
      forward(items);
      for (SequenceId seq : seqs) REQUIRE(b.ReleaseSequence(seq).ok());
      // Teacher forcing 60 tokens: 60 logit rows through a logits buffer of 12.
      auto seq = b.AddSequence();
      REQUIRE(seq.ok());
      const std::vector<int32_t> forced = prompt(60, 5);
      forward({ForwardItem{*seq, forced, true}});
      REQUIRE(b.ReleaseSequence(*seq).ok());
      // A second pass whose head starts at slot 1, 2 or 3 with more rows than a GEMV takes: a prompt
      // of 100, 99 or 98 tokens (one logit row) fills the first pass with the first 0, 1 or 2 rows of
      // a teacher-forced item, whose other 29, 28 or 27 logit rows follow.
      for (int first : {100, 99, 98}) {
        auto a = b.AddSequence(), c = b.AddSequence();
        REQUIRE(a.ok());
        REQUIRE(c.ok());
        const std::vector<int32_t> long_prompt = prompt(first, 1), teacher = prompt(29, 2);
        forward({ForwardItem{*a, long_prompt, false}, ForwardItem{*c, teacher, true}});
        REQUIRE(b.ReleaseSequence(*a).ok());
        REQUIRE(b.ReleaseSequence(*c).ok());
      }

      for (int r = 0; r < tp; ++r) {
        INFO("rank " << r);
        const std::vector<GemmShape>& shapes = refs[r]->gemm_shapes();
        for (size_t i = warmed[r]; i < shapes.size(); ++i) {
          const GemmShape& g = shapes[i];
          INFO("a pass ran a GEMM the warm-up did not: " << g.rows << " x " << g.in << " -> " << g.out << ", ld "
                                                         << g.ldx << "/" << g.ldw << "/" << g.ldy << ", alignment "
                                                         << g.align_x << "/" << g.align_w << "/" << g.align_y);
          CHECK(false);
        }
      }
      // Capture and replay name their mistakes.
      CHECK(refs[0]->Replay(1000).code() == StatusCode::kNotFound);
      CHECK(refs[0]->Capture(1000, [] { return Status::OK(); }).ok());
      CHECK(refs[0]->Capture(1000, [] { return Status::OK(); }).code() == StatusCode::kAlreadyExists);
      CHECK(refs[0]->Replay(1000).ok());
    }
  }
}

TEST_CASE("device backend: synthetic weights are seeded", "[engine][device]") {
  const std::vector<int32_t> ids = {5, 6, 7, 8};
  auto logits = [&](int tp, uint64_t seed) {
    DeviceBackendOptions options;
    options.synthetic_seed = seed;
    auto dev = MakeDevice(tp, options, 64 << 20, /*synthetic=*/true);
    REQUIRE(dev.ok());
    return TeacherForced(*dev->backend, ids);
  };
  for (int tp : {1, 2}) {
    const std::vector<float> a = logits(tp, 1);
    CHECK(a == logits(tp, 1));
    CHECK(a != logits(tp, 2));
    for (float v : a) REQUIRE(std::isfinite(v));
  }
}

TEST_CASE("device backend: candidates are the rows' top logits, and the rows stay on the devices", "[engine][device]") {
  const int V = Tiny().config.vocab_size;
  DeviceBackendOptions options;
  options.top_candidates = 16;
  auto dev = Device(2, options);
  DeviceBackend& b = *dev.backend;
  CHECK(b.sample_candidates() == 16);
  std::vector<SequenceId> seqs;
  std::vector<ForwardItem> items;
  const std::vector<int32_t> prompts[2] = {Reference<int32_t>("input_ids_0"), Reference<int32_t>("input_ids_1")};
  for (int s = 0; s < 2; ++s) {
    auto seq = b.AddSequence();
    REQUIRE(seq.ok());
    seqs.push_back(*seq);
    items.push_back({*seq, prompts[s], false, s == 0 ? 1.0f : 0.5f});
  }
  auto out = b.Forward(items, ForwardOptions{.candidates = true});
  REQUIRE(out.ok());
  CHECK(out->logits.empty());
  REQUIRE(out->candidates.size() == 2);
  for (int64_t row = 0; row < 2; ++row) {
    auto full = b.LogitsRow(row);
    REQUIRE(full.ok());
    const LogitCandidates& c = out->candidates[row];
    REQUIRE(c.ids.size() == 16);
    CHECK(c.vocab_size == V);
    std::vector<int32_t> order(V);
    for (int i = 0; i < V; ++i) order[i] = i;
    const std::vector<float>& l = *full;
    std::sort(order.begin(), order.end(), [&](int a, int z) { return l[a] > l[z] || (l[a] == l[z] && a < z); });
    double tail = 0;
    const double t = items[row].temperature;
    for (int i = 16; i < V; ++i) tail += std::exp((l[order[i]] - l[order[0]]) / t);
    INFO("row " << row);
    for (int i = 0; i < 16; ++i) {
      CHECK(c.ids[i] == order[i]);
      CHECK(c.logits[i] == l[order[i]]);
    }
    // The device sums the whole shard's mass in fp32 and the candidates' share is taken off it:
    // the tail is exact to a few 1e-8 of the row's whole mass (about 1 here).
    CHECK(c.tail_mass == Approx(tail).epsilon(1e-4).margin(1e-6));
  }
  CHECK(b.LogitsRow(2).status().code() == StatusCode::kFailedPrecondition);
  // A token and its drafts: a candidate list per row, as the rows stay on the devices.
  const std::vector<int32_t> drafted = {5, 6, 7};
  ForwardItem check{seqs[0], drafted, true};
  auto verified = b.Forward({&check, 1}, ForwardOptions{.candidates = true});
  REQUIRE(verified.ok());
  CHECK(verified->candidates.size() == 3);
  CHECK(verified->logits.empty());
  // Teacher forcing over more rows than the devices keep returns full rows.
  const std::vector<int32_t> forced_tokens(12, 5);
  ForwardItem all{seqs[0], forced_tokens, true};
  auto forced = b.Forward({&all, 1}, ForwardOptions{.candidates = true});
  REQUIRE(forced.ok());
  CHECK(forced->candidates.empty());
  CHECK(forced->logits.size() == 12 * static_cast<size_t>(V));
}

// The scheduler on a device backend that sends candidates generates what it generates from full rows.
TEST_CASE("device backend: drafts are checked in decode graph steps with candidates, giving the plain tokens",
          "[engine][device][spec]") {
  // A prompt that repeats itself, so prompt lookup drafts and the model agrees with some drafts.
  std::vector<int32_t> prompt;
  for (int rep = 0; rep < 4; ++rep) {
    const std::vector<int32_t> phrase = testing::RandomPrompt(5, 6);
    prompt.insert(prompt.end(), phrase.begin(), phrase.end());
  }
  auto run = [&](int max_draft_tokens, float temperature) {
    DeviceBackendOptions options;
    options.top_candidates = 16;
    auto dev = Device(2, options);
    SchedulerOptions sched;
    // 1 + 7 rows: the largest decode bucket (max_batch 8), so every check is a graph step.
    sched.speculation.max_draft_tokens = max_draft_tokens;
    auto scheduler = testing::MakeScheduler(*dev.backend, sched);
    GenerateRequest r = testing::Greedy(prompt, 40);
    r.sampling.temperature = temperature;
    r.sampling.seed = 5;
    const StreamEvent out = testing::RunOne(*scheduler, r);
    REQUIRE(out.error.ok());
    const SchedulerMetrics m =
        testing::SettledMetrics(*scheduler, [](const SchedulerMetrics& s) { return s.finished_requests == 1; });
    return std::make_tuple(out.tokens, m, dev.backend->graph_steps());
  };
  for (float temperature : {0.0f, 0.8f}) {
    INFO("temperature " << temperature);
    const auto [plain, plain_metrics, plain_graphs] = run(0, temperature);
    const auto [drafted, m, graphs] = run(7, temperature);
    CHECK(drafted == plain);
    CHECK(m.accepted_draft_tokens > 0);
    CHECK(m.forward_passes < plain_metrics.forward_passes);
    // Every decode step, drafts or not, replayed a captured graph.
    CHECK(graphs == m.forward_passes - 1);
    CHECK(plain_graphs == plain_metrics.forward_passes - 1);
  }
}

// The drafter on the device path against the independent numpy reference
// (tests/data/gemma4-tiny-assistant): the bf16 tolerances of the fixture README (max |Δlogit| <=
// 1.0, the draft equal wherever the reference's margin exceeds 1.0), step by step until the first
// step whose margin is too small to decide (after it the inputs differ). The cache is filled by a
// prefill pass, a graph decode step with candidates (the scheduler's), or a verification pass.
TEST_CASE("device backend: MTP drafts match the independent reference at tp 1 and 2", "[engine][device][drafter]") {
  const std::vector<int32_t> prompt = testing::DrafterReference<int32_t>("case_prompt");
  const std::vector<int32_t> length = testing::DrafterReference<int32_t>("case_length");
  const std::vector<int32_t> tokens = testing::DrafterReference<int32_t>("draft_tokens");
  const std::vector<float> logits = testing::DrafterReference<float>("draft_logits");
  const std::vector<float> margin = testing::DrafterReference<float>("draft_margin");
  const int64_t vocab = Tiny().config.vocab_size;
  constexpr int kSteps = 4;
  int compared = 0;
  for (int tp : {1, 2}) {
    for (int fill = 0; fill < 3; ++fill) {
      DeviceBackendOptions options;
      options.top_candidates = 16;
      options.drafter = testing::TinyDrafter();
      auto dev = Device(tp, options);
      REQUIRE(dev.backend->has_drafter());
      for (size_t i = 0; i < prompt.size(); ++i) {
        const std::vector<int32_t> sequence =
            testing::DrafterReference<int32_t>("sequence_" + std::to_string(prompt[i]));
        const int64_t L = length[i];
        INFO("tp " << tp << ", fill " << fill << ", cache length " << L);
        auto seq = dev.backend->AddSequence();
        REQUIRE(seq.ok());
        const std::span<const int32_t> all(sequence);
        int64_t row = 0;
        if (fill == 0) {  // one prefill pass
          ForwardItem item{*seq, all.first(L), false};
          REQUIRE(dev.backend->Forward({&item, 1}, {}).ok());
        } else if (fill == 1) {  // prefill, then the last token as a decode graph step with candidates
          ForwardItem prefill{*seq, all.first(L - 1), false};
          REQUIRE(dev.backend->Forward({&prefill, 1}, {}).ok());
          ForwardItem step{*seq, all.subspan(L - 1, 1), false};
          REQUIRE(dev.backend->Forward({&step, 1}, ForwardOptions{.candidates = true}).ok());
        } else {  // a verification pass of 6 tokens from L - 2, truncated back to L
          const int64_t before = std::max<int64_t>(1, L - 2);
          ForwardItem prefill{*seq, all.first(before), false};
          REQUIRE(dev.backend->Forward({&prefill, 1}, {}).ok());
          ForwardItem pass{*seq, all.subspan(before, 6), true};
          REQUIRE(dev.backend->Forward({&pass, 1}, ForwardOptions{.candidates = true}).ok());
          REQUIRE(dev.backend->Truncate(*seq, L).ok());
          row = L - 1 - before;
        }
        const DraftRequest request{*seq, sequence[L], row, kSteps};
        auto drafted = dev.backend->Draft({&request, 1}, DraftOptions{.keep_logits = true});
        if (!drafted.ok()) FAIL(drafted.status().ToString());
        REQUIRE(drafted->tokens[0].size() == kSteps);
        for (int step = 0; step < kSteps; ++step) {
          const size_t at = i * kSteps + step;
          const float diff = MaxAbsDiff(drafted->logits.data() + step * vocab, logits.data() + at * vocab, vocab);
          INFO("step " << step << ": max |diff| " << diff << ", margin " << margin[at]);
          CHECK(diff <= 1.0f);
          if (margin[at] <= 1.0f) break;
          CHECK(drafted->tokens[0][step] == tokens[at]);
          ++compared;
        }
        REQUIRE(dev.backend->ReleaseSequence(*seq).ok());
      }
    }
  }
  CHECK(compared >= 12);  // the margins leave most steps decidable
}

TEST_CASE("device backend: speculation with the MTP drafter gives the plain tokens", "[engine][device][drafter]") {
  auto run = [&](int max_draft_tokens) {
    DeviceBackendOptions options;
    options.top_candidates = 16;
    options.drafter = testing::TinyDrafter();
    auto dev = Device(2, options);
    SchedulerOptions sched;
    sched.speculation.max_draft_tokens = max_draft_tokens;
    auto scheduler = testing::MakeScheduler(*dev.backend, sched);
    const StreamEvent out = testing::RunOne(*scheduler, testing::Greedy(testing::RandomPrompt(8, 12), 24));
    REQUIRE(out.error.ok());
    const SchedulerMetrics m =
        testing::SettledMetrics(*scheduler, [](const SchedulerMetrics& s) { return s.finished_requests == 1; });
    return std::make_pair(out.tokens, m);
  };
  const auto [plain, plain_metrics] = run(0);
  const auto [drafted, m] = run(kMaxDraftTokens);
  CHECK(drafted == plain);
  CHECK(m.drafter_tokens > 0);
  CHECK(plain_metrics.drafter_tokens == 0);
}

TEST_CASE("device backend: the scheduler samples from candidates as from full rows", "[engine][device]") {
  auto tokens = [](int top_candidates, GenerateRequest request) {
    DeviceBackendOptions options;
    options.top_candidates = top_candidates;
    auto dev = Device(2, options);
    auto scheduler = testing::MakeScheduler(*dev.backend);
    const StreamEvent out = testing::RunOne(*scheduler, std::move(request));
    REQUIRE(out.error.ok());
    const SchedulerMetrics settled =
        testing::SettledMetrics(*scheduler, [](const SchedulerMetrics& m) { return m.finished_requests == 1; });
    return std::make_pair(out.tokens, settled.full_row_samples);
  };
  for (float temperature : {0.0f, 0.8f, 1.5f}) {
    GenerateRequest r = testing::Greedy(testing::RandomPrompt(3, 20), 24);
    r.sampling.temperature = temperature;
    r.sampling.seed = 11;
    const auto [want, none] = tokens(0, r);
    const auto [got, full_rows] = tokens(16, r);
    INFO("temperature " << temperature << ": " << full_rows << " draws needed the full row");
    CHECK(got == want);
    CHECK(none == 0);
  }
}

TEST_CASE("launches per decode token per rank, counted on the reference ops: the 31B structure at tp 1 and 4",
          "[engine][device]") {
  // The 31B model's layer structure: 60 layers, 50 sliding and 10 full with k_eq_v.
  const std::filesystem::path config = std::string(TEMPER_TEST_DATA_DIR) + "/gemma4-31b-shape/config.json";
  for (int tp : {1, 4}) {
    auto counted = CountDecodeStepOps(config, tp);
    REQUIRE(counted.ok());
    REQUIRE(counted->size() == static_cast<size_t>(tp));
    const OpCounts& n = counted->front();
    for (const OpCounts& rank : *counted) CHECK(rank.n == n.n);  // every rank launches the same
    std::printf("31B structure, tp %d: %lld ops, %lld kernel launches per decode token per rank: %s\n", tp,
                static_cast<long long>(n.Total()), static_cast<long long>(n.Launches()), n.Describe().c_str());
    // The fused decode layer: q/k/v as one GEMV, their norms with the KV write, the attention, o_proj,
    // the norm-residual with the MLP's input norm, gate/up with the GeGLU, down_proj, and the
    // norm-residual with the next layer's input norm. Around the layers: the embedding, the first
    // input norm, and the head (gather, final norm, LM head, softcap, candidates).
    const int L = 60;
    CHECK(n[OpKind::kGemv] == 3 * L + 1);
    CHECK(n[OpKind::kQkvNorm] == L);
    CHECK(n[OpKind::kAttention] == L);
    CHECK(n[OpKind::kNormResidual] == 2 * L);
    CHECK(n[OpKind::kGemvGeglu] == L);
    CHECK(n[OpKind::kRmsNorm] == 2);
    CHECK(n[OpKind::kSoftcap] == 1);
    CHECK(n[OpKind::kTopCandidates] == 1);
    CHECK(n[OpKind::kKvWrite] == 0);
    CHECK(n[OpKind::kGeglu] == 0);
    CHECK(n[OpKind::kGemm] == 0);
    CHECK(n.Launches() == 9 * L + 8 + (tp > 1 ? 2 * L + 1 : 0));
    CHECK(n[OpKind::kAllReduce] == (tp > 1 ? 2 * L + 1 : 0));
  }
}

}  // namespace
}  // namespace temper::engine::cuda

namespace temper::engine::cuda {
namespace {

TEST_CASE("the CUDA backend refuses a hidden size wider than its row kernels take, before touching a GPU",
          "[engine][device]") {
  if (!CudaBackendBuilt()) TEMPER_SKIP("the CUDA backend is not in this build (no nvcc when it was configured)");
  ModelConfig config;
  config.hidden_size = kNormResidualMaxWidth + 8;
  CudaBackendOptions options;
  options.devices = {0};
  const auto made = CreateCudaBackend(config, nullptr, options, nullptr);
  REQUIRE_FALSE(made.ok());
  CHECK(made.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(made.status().message(), Catch::Contains("hidden_size 8200 is wider than its row kernels take (8192)"));
}

}  // namespace
}  // namespace temper::engine::cuda
