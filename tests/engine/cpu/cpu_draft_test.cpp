// The CPU backend's MTP drafter against the independent numpy reference of
// tests/data/gemma4-tiny-assistant (make_reference.py): draft tokens equal, drafter logits within
// 1e-3 (the fp32 tolerance of the golden fixture; the reference's smallest top-2 margin is 0.09),
// whether the cache was filled in one pass, in chunks, or by a verification pass that was then
// truncated; at tp 1 and 2. And every bad request gets its named error.
#include <cstdio>

#include <catch2/catch.hpp>

#include "engine/drafter_fixture.h"

namespace temper::engine::testing {
namespace {

constexpr int kSteps = 4;  // drafts per reference case

struct DraftCase {
  std::vector<int32_t> sequence;  // prompt and greedy tokens; the cache holds the first `length`
  int64_t length = 0;
  std::vector<int32_t> tokens;  // the reference drafts
  std::vector<float> logits;    // [kSteps][vocab]
};

std::vector<DraftCase> Cases() {
  const std::vector<int32_t> prompt = DrafterReference<int32_t>("case_prompt");
  const std::vector<int32_t> length = DrafterReference<int32_t>("case_length");
  const std::vector<int32_t> tokens = DrafterReference<int32_t>("draft_tokens");
  const std::vector<float> logits = DrafterReference<float>("draft_logits");
  const int64_t vocab = Tiny().config.vocab_size;
  std::vector<DraftCase> out;
  for (size_t i = 0; i < prompt.size(); ++i) {
    DraftCase c;
    c.sequence = DrafterReference<int32_t>("sequence_" + std::to_string(prompt[i]));
    c.length = length[i];
    c.tokens.assign(tokens.begin() + i * kSteps, tokens.begin() + (i + 1) * kSteps);
    c.logits.assign(logits.begin() + i * kSteps * vocab, logits.begin() + (i + 1) * kSteps * vocab);
    out.push_back(std::move(c));
  }
  return out;
}

// How a case's cache is filled before drafting.
enum class Fill {
  kOnePass,    // positions 0..L-1 in one forward pass
  kChunks,     // in chunks of 3, the last chunk's last row drafting
  kTruncated,  // a pass that appends 6 tokens past L-2 (a verification pass), truncated back to L
};

// Fills the cache of a fresh sequence as `fill` says and returns the hidden row for Draft.
int64_t FillCache(Backend& backend, SequenceId seq, const DraftCase& c, Fill fill) {
  const std::span<const int32_t> all(c.sequence);
  auto forward = [&](int64_t begin, int64_t end, bool all_logits) {
    ForwardItem item{seq, all.subspan(begin, end - begin), all_logits};
    auto out = backend.Forward({&item, 1}, {});
    REQUIRE(out.ok());
  };
  switch (fill) {
    case Fill::kOnePass:
      forward(0, c.length, false);
      return 0;
    case Fill::kChunks:
      for (int64_t b = 0; b < c.length; b += 3) forward(b, std::min<int64_t>(b + 3, c.length), false);
      return 0;
    case Fill::kTruncated: {
      const int64_t before = std::max<int64_t>(0, c.length - 2);
      if (before > 0) forward(0, before, false);
      const int64_t end = std::min<int64_t>(before + 6, static_cast<int64_t>(c.sequence.size()));
      forward(before, end, true);
      REQUIRE(backend.Truncate(seq, c.length).ok());
      return c.length - 1 - before;  // the row of position L-1 in that pass
    }
  }
  return -1;
}

void CheckCases(int tp, Fill fill) {
  const int64_t vocab = Tiny().config.vocab_size;
  auto backend = TinyBackend(tp, 2, TinyDrafter());
  REQUIRE(backend->has_drafter());
  for (const DraftCase& c : Cases()) {
    INFO("cache length " << c.length << ", tp " << tp << ", fill " << static_cast<int>(fill));
    auto seq = backend->AddSequence();
    REQUIRE(seq.ok());
    const int64_t row = FillCache(*backend, *seq, c, fill);
    const DraftRequest request{*seq, c.sequence[c.length], row, kSteps};
    auto drafted = backend->Draft({&request, 1}, DraftOptions{.keep_logits = true});
    REQUIRE(drafted.ok());
    REQUIRE(drafted->tokens.size() == 1);
    CHECK(drafted->tokens[0] == c.tokens);
    REQUIRE(drafted->logits.size() == static_cast<size_t>(kSteps * vocab));
    const float diff = MaxAbsDiff(drafted->logits.data(), c.logits.data(), c.logits.size());
    std::printf("draft at length %lld, tp %d: max |diff| %.3g\n", static_cast<long long>(c.length), tp, diff);
    CHECK(diff <= 1e-3f);
    // Drafting changes nothing: the sequence keeps its length.
    CHECK(*backend->SequenceLength(*seq) == c.length);
    REQUIRE(backend->ReleaseSequence(*seq).ok());
  }
}

TEST_CASE("MTP drafts match the independent reference after one prefill pass", "[engine][drafter]") {
  CheckCases(1, Fill::kOnePass);
}

TEST_CASE("MTP drafts match the reference after chunked prefill and at tp 2", "[engine][drafter]") {
  CheckCases(1, Fill::kChunks);
  CheckCases(2, Fill::kChunks);
}

TEST_CASE("MTP drafts match the reference after a verification pass was truncated", "[engine][drafter]") {
  CheckCases(1, Fill::kTruncated);
  CheckCases(2, Fill::kTruncated);
}

TEST_CASE("MTP drafts for several sequences in one call equal each drafted alone", "[engine][drafter]") {
  const std::vector<DraftCase> cases = Cases();
  auto backend = TinyBackend(1, 2, TinyDrafter());
  std::vector<ForwardItem> items;
  std::vector<DraftRequest> requests;
  for (const DraftCase& c : cases) {
    auto seq = backend->AddSequence();
    REQUIRE(seq.ok());
    items.push_back({*seq, std::span<const int32_t>(c.sequence).first(c.length), false});
  }
  REQUIRE(backend->Forward(items, {}).ok());
  for (size_t i = 0; i < cases.size(); ++i) {
    // Counts differ per request: each gets its own number of drafts.
    const int count = 1 + static_cast<int>(i % kSteps);
    requests.push_back({items[i].seq, cases[i].sequence[cases[i].length], static_cast<int64_t>(i), count});
  }
  auto drafted = backend->Draft(requests, {});
  REQUIRE(drafted.ok());
  for (size_t i = 0; i < cases.size(); ++i) {
    INFO("case " << i);
    const std::vector<int32_t> want(cases[i].tokens.begin(), cases[i].tokens.begin() + requests[i].count);
    CHECK(drafted->tokens[i] == want);
  }
}

TEST_CASE("Draft refuses bad requests with a named error and changes nothing", "[engine][drafter]") {
  const DraftCase c = Cases().front();
  auto backend = TinyBackend(1, 2, TinyDrafter());
  auto seq = backend->AddSequence();
  REQUIRE(seq.ok());
  FillCache(*backend, *seq, c, Fill::kOnePass);
  const int32_t token = c.sequence[c.length];
  auto error = [&](DraftRequest q) {
    auto r = backend->Draft({&q, 1}, {});
    REQUIRE_FALSE(r.ok());
    return r.status();
  };

  Status s = error({*seq, token, 0, 0});
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains("asks for 0 drafts"));
  s = error({*seq, token, 0, kMaxDraftTokens + 1});
  CHECK(s.code() == StatusCode::kInvalidArgument);
  s = error({*seq, Tiny().config.vocab_size, 0, 2});
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains("outside the vocabulary"));
  s = error({*seq, token, 1, 2});  // the last pass had one logit row
  CHECK(s.code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(s.message(), Catch::Contains("row 1 of the last forward pass"));
  s = error({*seq + 1, token, 0, 2});
  CHECK(s.code() == StatusCode::kNotFound);

  // Two requests for one sequence.
  const DraftRequest twice[] = {{*seq, token, 0, 2}, {*seq, token, 0, 2}};
  auto r = backend->Draft(twice, {});
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.status().message(), Catch::Contains("asked for twice"));

  // The row no longer describes the sequence's last position once the sequence has moved on.
  REQUIRE(backend->Truncate(*seq, c.length - 1).ok());
  s = error({*seq, token, 0, 2});
  CHECK(s.code() == StatusCode::kFailedPrecondition);

  // A backend without a drafter says so.
  auto plain = TinyBackend();
  CHECK_FALSE(plain->has_drafter());
  const DraftRequest q{0, token, 0, 1};
  auto none = plain->Draft({&q, 1}, {});
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().code() == StatusCode::kFailedPrecondition);
}

TEST_CASE("A sequence at the context limit gets no drafts", "[engine][drafter]") {
  CpuBackendOptions options;
  options.tp = 1;
  options.threads = 2;
  options.max_context = 6;
  options.kv.max_tokens = 64;
  options.kv.block_tokens = 4;
  options.drafter = TinyDrafter();
  auto backend = CpuBackend::Create(Tiny().config, Tiny().weights, options);
  REQUIRE(backend.ok());
  const DraftCase c = Cases().front();  // length 5
  auto seq = (*backend)->AddSequence();
  REQUIRE(seq.ok());
  ForwardItem item{*seq, std::span<const int32_t>(c.sequence).first(6), false};
  REQUIRE((*backend)->Forward({&item, 1}, {}).ok());
  const DraftRequest q{*seq, c.sequence[6], 0, 3};
  auto drafted = (*backend)->Draft({&q, 1}, {});
  REQUIRE(drafted.ok());
  CHECK(drafted->tokens[0].empty());
}

}  // namespace
}  // namespace temper::engine::testing
