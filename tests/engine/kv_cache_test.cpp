// The KV cache: incremental decoding (prefill in chunks, then token by token) must give the
// logits of a full recompute, across ring wrap-around on sliding layers (window 8), several paged
// blocks on full layers (4-token blocks) and K rebuilt from V on the k_eq_v layers.
#include <cstdio>

#include <catch2/catch.hpp>

#include "draft_rollback.h"
#include "engine/kv_cache.h"
#include "golden_fixture.h"

namespace temper::engine::testing {
namespace {

// Logits at every position of `ids`, computed by feeding it in chunks of the given sizes (the last
// size repeats until the end).
std::vector<float> ChunkedLogits(CpuBackend& backend, const std::vector<int32_t>& ids, std::vector<int> chunks) {
  auto seq = backend.AddSequence();
  REQUIRE(seq.ok());
  std::vector<float> logits;
  size_t pos = 0, c = 0;
  while (pos < ids.size()) {
    const size_t n = std::min<size_t>(static_cast<size_t>(chunks[std::min(c, chunks.size() - 1)]), ids.size() - pos);
    ++c;
    ForwardItem item{*seq, std::span<const int32_t>(ids).subspan(pos, n), /*all_logits=*/true};
    auto out = backend.Forward({&item, 1}, {});
    REQUIRE(out.ok());
    logits.insert(logits.end(), out->logits.begin(), out->logits.end());
    pos += n;
  }
  auto length = backend.SequenceLength(*seq);
  REQUIRE(length.ok());
  CHECK(*length == static_cast<int64_t>(ids.size()));
  REQUIRE(backend.ReleaseSequence(*seq).ok());
  return logits;
}

TEST_CASE("incremental decode matches full recompute", "[engine][kv]") {
  for (int prompt : {0, 1}) {
    const std::vector<int32_t> ids = TeacherForcedIds(prompt);
    auto backend = TinyBackend();
    const std::vector<float> full = ChunkedLogits(*backend, ids, {static_cast<int>(ids.size())});
    for (std::vector<int> chunks : std::vector<std::vector<int>>{{1}, {5}, {3, 9, 1}, {13, 2}, {8}, {7, 16}}) {
      const std::vector<float> inc = ChunkedLogits(*backend, ids, chunks);
      REQUIRE(inc.size() == full.size());
      const float d = MaxAbsDiff(inc.data(), full.data(), full.size());
      std::printf("prompt %d, chunks starting %d: max |incremental - full| %.3g\n", prompt, chunks[0], d);
      INFO("prompt " << prompt << " first chunk " << chunks[0]);
      CHECK(d <= 1e-5f);
    }
  }
}

TEST_CASE("a batch of two sequences matches running them apart", "[engine][kv]") {
  const std::vector<int32_t> a = TeacherForcedIds(0), b = TeacherForcedIds(1);
  auto backend = TinyBackend();
  const std::vector<float> alone_a = ChunkedLogits(*backend, a, {static_cast<int>(a.size())});
  const std::vector<float> alone_b = ChunkedLogits(*backend, b, {static_cast<int>(b.size())});
  const int V = Tiny().config.vocab_size;

  // Prefill both in one batch (b wants only its last row), then decode both token by token.
  auto sa = backend->AddSequence(), sb = backend->AddSequence();
  REQUIRE((sa.ok() && sb.ok()));
  const size_t prefill = 10;
  ForwardItem items[2] = {{*sa, std::span<const int32_t>(a).first(prefill), true},
                          {*sb, std::span<const int32_t>(b).first(prefill), false}};
  auto out = backend->Forward(items, {});
  REQUIRE(out.ok());
  REQUIRE(out->rows == static_cast<int64_t>(prefill) + 1);
  CHECK(MaxAbsDiff(out->logits.data(), alone_a.data(), prefill * V) <= 1e-5f);
  CHECK(MaxAbsDiff(out->logits.data() + prefill * V, alone_b.data() + (prefill - 1) * V, V) <= 1e-5f);
  for (size_t pos = prefill; pos < b.size(); ++pos) {
    ForwardItem step[2] = {{*sa, std::span<const int32_t>(a).subspan(pos, 1), false},
                           {*sb, std::span<const int32_t>(b).subspan(pos, 1), false}};
    auto o = backend->Forward(step, {});
    REQUIRE(o.ok());
    INFO("position " << pos);
    CHECK(MaxAbsDiff(o->logits.data(), alone_a.data() + pos * V, V) <= 1e-5f);
    CHECK(MaxAbsDiff(o->logits.data() + V, alone_b.data() + pos * V, V) <= 1e-5f);
  }
}

TEST_CASE("Forward rejects bad batches before changing state", "[engine][kv]") {
  auto backend = TinyBackend();
  auto seq = backend->AddSequence();
  REQUIRE(seq.ok());
  const std::vector<int32_t> ok_ids = {5, 6}, bad_ids = {5, 512}, empty;
  ForwardItem dead{99, ok_ids, false};
  CHECK(backend->Forward({&dead, 1}, {}).status().code() == StatusCode::kNotFound);
  ForwardItem bad{*seq, bad_ids, false};
  auto r = backend->Forward({&bad, 1}, {});
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  CHECK(r.status().message().find("outside the vocabulary") != std::string::npos);
  ForwardItem none{*seq, empty, false};
  CHECK(backend->Forward({&none, 1}, {}).status().code() == StatusCode::kInvalidArgument);
  ForwardItem twice[2] = {{*seq, ok_ids, false}, {*seq, ok_ids, false}};
  CHECK(backend->Forward(twice, {}).status().code() == StatusCode::kInvalidArgument);
  std::vector<int32_t> too_long(257, 7);  // TinyBackend's max_context is 256
  ForwardItem past{*seq, too_long, false};
  CHECK(backend->Forward({&past, 1}, {}).status().code() == StatusCode::kOutOfRange);
  CHECK(*backend->SequenceLength(*seq) == 0);
}

TEST_CASE("KvPager hands out slots and blocks and takes them back", "[engine][kv]") {
  KvPager pager(KvCacheOptions{.max_sequences = 2, .block_tokens = 4, .max_tokens = 16});
  REQUIRE(pager.num_blocks() == 4);
  auto a = pager.AddSequence(), b = pager.AddSequence();
  REQUIRE((a.ok() && b.ok()));
  CHECK(pager.AddSequence().status().code() == StatusCode::kResourceExhausted);
  REQUIRE(pager.Reserve(*a, 9).ok());  // 3 blocks
  CHECK(pager.Blocks(*a).size() == 3);
  CHECK(pager.free_blocks() == 1);
  Status full = pager.Reserve(*b, 8);
  CHECK(full.code() == StatusCode::kResourceExhausted);
  CHECK(full.message().find("KV cache full") != std::string::npos);
  REQUIRE(pager.Release(*a).ok());
  CHECK(pager.free_blocks() == 3);  // b kept the one block it got
  CHECK(pager.Reserve(*b, 16).ok());
  CHECK(pager.Release(*a).code() == StatusCode::kNotFound);
}

TEST_CASE("a full KV cache is reported, and released sequences free it", "[engine][kv]") {
  CpuBackendOptions options;
  options.max_context = 64;
  options.kv = KvCacheOptions{.max_sequences = 2, .block_tokens = 4, .max_tokens = 32};
  auto backend = CpuBackend::Create(Tiny().config, Tiny().weights, options);
  REQUIRE(backend.ok());
  std::vector<int32_t> ids(24, 9);
  auto a = (*backend)->AddSequence();
  REQUIRE(a.ok());
  ForwardItem item{*a, ids, false};
  REQUIRE((*backend)->Forward({&item, 1}, {}).ok());
  auto b = (*backend)->AddSequence();
  REQUIRE(b.ok());
  ForwardItem other{*b, ids, false};
  CHECK((*backend)->Forward({&other, 1}, {}).status().code() == StatusCode::kResourceExhausted);
  REQUIRE((*backend)->ReleaseSequence(*a).ok());
  CHECK((*backend)->Forward({&other, 1}, {}).ok());
}

TEST_CASE("rejected draft tokens leave no trace: truncated passes match a full recompute", "[engine][kv][spec]") {
  for (int prompt : {0, 1}) {
    const std::vector<int32_t> ids = TeacherForcedIds(prompt);
    auto backend = TinyBackend();
    const std::vector<float> full = ChunkedLogits(*backend, ids, {static_cast<int>(ids.size())});
    // k from 1 to the most a pass may be undone by; none, some and all of the drafts right.
    for (int k : {1, 3, kMaxDraftTokens}) {
      for (int good : {0, k / 2, k}) {
        const std::vector<float> got = LogitsThroughRejectedDrafts(*backend, ids, 5, k, good);
        REQUIRE(got.size() == full.size());
        INFO("prompt " << prompt << ", k " << k << ", right " << good);
        CHECK(MaxAbsDiff(got.data(), full.data(), full.size()) <= 1e-5f);
      }
    }
    CHECK(backend->kv_usage().free_blocks == backend->kv_usage().total_blocks);  // truncation freed its blocks
  }
}

TEST_CASE("Truncate refuses what it cannot undo, naming the limit", "[engine][kv][spec]") {
  CpuBackendOptions options;
  options.threads = 2;
  options.max_context = 256;
  options.kv = KvCacheOptions{.max_sequences = 2, .block_tokens = 4, .max_tokens = 256, .max_snapshots = 1};
  auto backend = CpuBackend::Create(Tiny().config, Tiny().weights, options);
  REQUIRE(backend.ok());
  CheckTruncateLimits(**backend, TeacherForcedIds(0));
}

TEST_CASE("KvPager::Truncate returns the blocks past the new end", "[engine][kv][spec]") {
  KvPager pager(KvCacheOptions{.max_sequences = 1, .block_tokens = 4, .max_tokens = 32});
  auto seq = pager.AddSequence();
  REQUIRE(seq.ok());
  REQUIRE(pager.Reserve(*seq, 6).ok());
  pager.Append(*seq, 6);
  REQUIRE(pager.Reserve(*seq, 15).ok());
  pager.Append(*seq, 9);  // kMaxDraftTokens + 1: undoable
  CHECK(pager.free_blocks() == 4);
  REQUIRE(pager.Truncate(*seq, 7).ok());
  CHECK(pager.Blocks(*seq).size() == 2);
  CHECK(pager.free_blocks() == 6);
  CHECK(pager.Truncate(*seq, 5).code() == StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace temper::engine::testing
