// The prefix cache: backend snapshots and forks must continue exactly as the original sequence
// would (full-layer pages shared, the sliding window copied, the partly filled block private), the
// radix tree must find the longest pinned prefix and evict the least recently used one, and the
// scheduler must give the same greedy tokens with and without cache hits.
#include <catch2/catch.hpp>

#include "engine/serve/prefix_cache.h"
#include "engine/serving_fixture.h"

namespace temper::engine::testing {
namespace {

std::vector<float> Feed(Backend& backend, SequenceId seq, std::span<const int32_t> ids) {
  ForwardItem item{seq, ids, /*all_logits=*/true};
  auto out = backend.Forward({&item, 1}, {});
  REQUIRE(out.ok());
  return out->logits;
}

TEST_CASE("a fork continues exactly like the sequence it was taken from", "[engine][prefix]") {
  // Snapshots at 8 (a block boundary, and a full turn of the 8-slot ring) and at 10 (mid-block).
  for (int at : {8, 10}) {
    auto backend = ServingBackend(/*max_tokens=*/256, /*max_sequences=*/4, /*max_snapshots=*/2);
    const std::vector<int32_t> ids = RandomPrompt(5, 30);
    const std::span<const int32_t> head(ids.data(), static_cast<size_t>(at));
    const std::span<const int32_t> tail(ids.data() + at, ids.size() - static_cast<size_t>(at));
    auto seq = backend->AddSequence();
    REQUIRE(seq.ok());
    Feed(*backend, *seq, head);
    auto snap = backend->TakeSnapshot(*seq);
    REQUIRE(snap.ok());
    // The original goes on writing past the snapshot (into the block it shares when at = 10).
    const std::vector<float> original = Feed(*backend, *seq, tail);
    REQUIRE(backend->ReleaseSequence(*seq).ok());

    auto fork = backend->ForkSnapshot(*snap);
    REQUIRE(fork.ok());
    CHECK(*backend->SequenceLength(*fork) == at);
    const std::vector<float> forked = Feed(*backend, *fork, tail);
    INFO("snapshot at " << at);
    CHECK(forked == original);  // bit for bit

    // Pages are shared, not copied: the snapshot holds the original's blocks, the fork adds only
    // its own tail (and a private copy of a partly filled block).
    const KvUsage u = backend->kv_usage();
    const int64_t snap_blocks = (at + 3) / 4, fork_blocks = 30 / 4 + 1;
    const int64_t shared = at / 4;
    CHECK(u.total_blocks - u.free_blocks == snap_blocks + fork_blocks - shared);
    REQUIRE(backend->ReleaseSequence(*fork).ok());
    REQUIRE(backend->ReleaseSnapshot(*snap).ok());
    CHECK(backend->kv_usage().free_blocks == u.total_blocks);
    CHECK(backend->ReleaseSnapshot(*snap).code() == StatusCode::kNotFound);
    CHECK(backend->ForkSnapshot(*snap).status().code() == StatusCode::kNotFound);
  }
}

TEST_CASE("the radix tree finds the longest pinned prefix and evicts the oldest", "[engine][prefix]") {
  auto backend = ServingBackend(/*max_tokens=*/256, /*max_sequences=*/4, /*max_snapshots=*/3);
  PrefixCache cache(*backend);
  const std::vector<int32_t> ids = RandomPrompt(9, 24);
  std::vector<int32_t> other = ids;
  other[14] = ids[14] == 3 ? 4 : 3;  // shares the first 14 tokens
  auto seq = backend->AddSequence();
  REQUIRE(seq.ok());
  auto pin = [&](const std::vector<int32_t>& tokens, int64_t length) {
    auto s = backend->AddSequence();
    REQUIRE(s.ok());
    Feed(*backend, *s, std::span<const int32_t>(tokens).first(static_cast<size_t>(length)));
    auto inserted = cache.Insert(std::span<const int32_t>(tokens).first(static_cast<size_t>(length)), *s);
    REQUIRE(inserted.ok());
    REQUIRE(backend->ReleaseSequence(*s).ok());
    return *inserted;
  };
  CHECK(pin(ids, 20));
  CHECK(pin(ids, 10));        // splits the edge at 10
  CHECK(pin(other, 16));      // splits it again at 14
  CHECK_FALSE(pin(ids, 10));  // already there
  CHECK(cache.entries() == 3);

  CHECK(cache.Lookup(ids, 23).length == 20);
  CHECK(cache.Lookup(ids, 19).length == 10);  // 20 is beyond the limit
  CHECK(cache.Lookup(other, 23).length == 16);
  std::vector<int32_t> third = ids;
  third[12] = ids[12] == 3 ? 4 : 3;
  CHECK(cache.Lookup(third, 23).length == 10);  // diverges between two checkpoints
  CHECK(cache.Lookup(RandomPrompt(77, 24), 23).snapshot == -1);

  // Lookups count as use: ids(20) is now the oldest, so a fourth entry evicts it.
  CHECK(pin(ids, 22));
  CHECK(cache.entries() == 3);
  CHECK(cache.Lookup(ids, 21).length == 10);
  CHECK(cache.Lookup(other, 23).length == 16);
  CHECK(cache.Lookup(ids, 23).length == 22);
  while (cache.EvictOne()) {
  }
  CHECK(cache.entries() == 0);
  CHECK(cache.Lookup(ids, 23).snapshot == -1);
  REQUIRE(backend->ReleaseSequence(*seq).ok());
  CHECK(backend->kv_usage().free_blocks == backend->kv_usage().total_blocks);
  CHECK(backend->kv_usage().live_snapshots == 0);
}

TEST_CASE("prefix-cache hits and misses give the same greedy tokens", "[engine][prefix][scheduler]") {
  const std::vector<int32_t> system = RandomPrompt(31, 40);
  auto with = [&](std::vector<int32_t> suffix) {
    std::vector<int32_t> p = system;
    p.insert(p.end(), suffix.begin(), suffix.end());
    return p;
  };
  const std::vector<int32_t> a = with(RandomPrompt(32, 9));
  const std::vector<int32_t> b = with(RandomPrompt(33, 13));
  std::vector<int32_t> c = a;  // shares a's first 45 tokens, past the checkpoint at 40
  c.resize(45);
  c.push_back(7);

  auto cold_backend = ServingBackend();
  SchedulerOptions no_cache;
  no_cache.prefix_cache = false;
  auto cold = MakeScheduler(*cold_backend, no_cache);
  auto backend = ServingBackend();
  auto warm = MakeScheduler(*backend);

  auto request = [](const std::vector<int32_t>& prompt) {
    GenerateRequest r = Greedy(prompt, 14);
    r.checkpoints = {40};  // the end of the "system prompt"
    return r;
  };
  const StreamEvent a_miss = RunOne(*warm, request(a));
  CHECK(a_miss.usage.cached_prompt_tokens == 0);
  CHECK(a_miss.tokens == RunOne(*cold, request(a)).tokens);

  const StreamEvent b_hit = RunOne(*warm, request(b));
  CHECK(b_hit.usage.cached_prompt_tokens == 40);
  CHECK(b_hit.tokens == RunOne(*cold, request(b)).tokens);

  // Lands 5 tokens past the checkpoint: forks at 40 and re-prefills the tail.
  const StreamEvent c_hit = RunOne(*warm, request(c));
  CHECK(c_hit.usage.cached_prompt_tokens == 40);
  CHECK(c_hit.tokens == RunOne(*cold, request(c)).tokens);

  // Resending a whole prompt plus a suffix hits the pinned prompt end (a's 49 tokens).
  std::vector<int32_t> a_more = a;
  a_more.push_back(11);
  a_more.push_back(12);
  const StreamEvent a_more_hit = RunOne(*warm, request(a_more));
  CHECK(a_more_hit.usage.cached_prompt_tokens == 49);
  CHECK(a_more_hit.tokens == RunOne(*cold, request(a_more)).tokens);

  // The next turn of a conversation resends the reply: the end of generation was pinned too.
  std::vector<int32_t> turn2 = b;
  turn2.insert(turn2.end(), b_hit.tokens.begin(), b_hit.tokens.end() - 1);  // the last token was never fed
  turn2.push_back(9);
  const StreamEvent turn2_hit = RunOne(*warm, request(turn2));
  CHECK(turn2_hit.usage.cached_prompt_tokens == static_cast<int64_t>(turn2.size()) - 1);
  CHECK(turn2_hit.tokens == RunOne(*cold, request(turn2)).tokens);

  const SchedulerMetrics m = SettledMetrics(*warm, [](const SchedulerMetrics& s) { return s.finished_requests == 5; });
  CHECK(m.cached_prompt_tokens == 40 + 40 + 49 + static_cast<int64_t>(turn2.size()) - 1);
  CHECK(m.cache_hit_rate() > 0.5);
}

}  // namespace
}  // namespace temper::engine::testing
