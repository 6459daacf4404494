// The scheduler on the tiny fixture: continuous batching must not change what any request
// generates (the CPU forward computes each row independently, so tokens match exactly), chunked
// prefill and preemption must be invisible in the output, and every way a request ends (stop
// token, stop string across token boundaries, max tokens, cancellation) must free its pages.
#include <condition_variable>
#include <mutex>
#include <thread>

#include <catch2/catch.hpp>

#include "engine/drafter_fixture.h"
#include "engine/loaded_model.h"
#include "engine/serving_fixture.h"

namespace temper::engine::testing {
namespace {

std::vector<GenerateRequest> MixedRequests() {
  std::vector<GenerateRequest> out;
  for (int i = 0; i < 6; ++i) {
    GenerateRequest r = Greedy(RandomPrompt(100 + i, 5 + 7 * i), 12 + i);
    if (i % 2 == 1) {
      r.sampling.temperature = 0.8f;
      r.sampling.top_p = 0.95f;
      r.sampling.seed = 1000 + i;
    }
    out.push_back(r);
  }
  return out;
}

// Each request's tokens when it runs by itself on a fresh scheduler without a prefix cache: the
// reference that batching, chunking and preemption must reproduce.
std::vector<std::vector<int32_t>> TokensAlone(const std::vector<GenerateRequest>& requests) {
  auto backend = ServingBackend();
  SchedulerOptions options;
  options.prefix_cache = false;
  auto scheduler = MakeScheduler(*backend, options);
  std::vector<std::vector<int32_t>> alone;
  for (const GenerateRequest& r : requests) alone.push_back(RunOne(*scheduler, r).tokens);
  return alone;
}

TEST_CASE("the scheduler reproduces the golden greedy tokens", "[engine][scheduler]") {
  auto backend = ServingBackend();
  auto scheduler = MakeScheduler(*backend);
  for (int prompt : {0, 1}) {
    const StreamEvent out = RunOne(*scheduler, Greedy(Reference<int32_t>("input_ids_" + std::to_string(prompt)), 16));
    CHECK(out.finish == FinishReason::kLength);
    CHECK(out.tokens == Reference<int32_t>("greedy_" + std::to_string(prompt)));
    CHECK(out.usage.completion_tokens == 16);
  }
}

TEST_CASE("concurrent requests give the same tokens as each request alone", "[engine][scheduler]") {
  const std::vector<GenerateRequest> requests = MixedRequests();
  const std::vector<std::vector<int32_t>> alone = TokensAlone(requests);
  // Small batches force chunked prefill to interleave with other requests' decoding.
  for (int64_t batch_tokens : {int64_t{7}, int64_t{512}}) {
    auto backend = ServingBackend();
    SchedulerOptions options;
    options.max_batch_tokens = batch_tokens;
    auto scheduler = MakeScheduler(*backend, options);
    const std::vector<std::vector<int32_t>> together = RunTogether(*scheduler, requests);
    for (size_t i = 0; i < requests.size(); ++i) {
      INFO("request " << i << ", max_batch_tokens " << batch_tokens);
      CHECK(together[i] == alone[i]);
      CHECK(static_cast<int64_t>(together[i].size()) == requests[i].max_tokens);
    }
    const SchedulerMetrics m =
        SettledMetrics(*scheduler, [](const SchedulerMetrics& s) { return s.finished_requests == 6; });
    CHECK(m.generated_tokens == 12 + 13 + 14 + 15 + 16 + 17);
    CHECK(m.running == 0);
    CHECK(m.kv.live_sequences == 0);
  }
}

TEST_CASE("a full KV pool queues and preempts instead of failing", "[engine][scheduler]") {
  const std::vector<GenerateRequest> requests = MixedRequests();
  const std::vector<std::vector<int32_t>> alone = TokensAlone(requests);
  // 64 tokens of pool: the longest request (40 + 17) barely fits alone, the six together need 300.
  auto backend = ServingBackend(/*max_tokens=*/64, /*max_sequences=*/4, /*max_snapshots=*/2);
  SchedulerOptions options;
  options.max_batch_tokens = 16;
  auto scheduler = MakeScheduler(*backend, options);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const GenerateRequest& r : requests) {
    auto s = scheduler->Submit(r);
    REQUIRE(s.ok());
    streams.push_back(*s);
  }
  for (size_t i = 0; i < streams.size(); ++i) {
    const StreamEvent out = streams[i]->Wait();
    INFO("request " << i << ": " << out.error.ToString());
    CHECK(out.finish == FinishReason::kLength);
    CHECK(out.tokens == alone[i]);
  }
  const SchedulerMetrics m =
      SettledMetrics(*scheduler, [](const SchedulerMetrics& s) { return s.finished_requests == 6; });
  std::printf("tiny pool: %lld preemptions, %lld cache entries\n", static_cast<long long>(m.preemptions),
              static_cast<long long>(m.cache_entries));
  CHECK(m.kv.live_sequences == 0);
  CHECK(m.finished_requests == 6);

  // A request that could never fit is refused up front.
  auto too_big = scheduler->Submit(Greedy(RandomPrompt(1, 60), 10));
  REQUIRE_FALSE(too_big.ok());
  CHECK(too_big.status().code() == StatusCode::kOutOfRange);
  CHECK_THAT(too_big.status().message(), Catch::Contains("KV pool of 64 tokens"));
}

// Holds the first forward pass until Open, so that a test can queue requests behind a running
// one, and records the order in which sequences started feeding their prompts.
class GatedBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  Result<ForwardResult> Forward(std::span<const ForwardItem> batch, const ForwardOptions& options) override {
    {
      std::unique_lock<std::mutex> lock(mu_);
      reached_ = true;
      cv_.notify_all();
      cv_.wait(lock, [&] { return open_; });
      // A sequence's first pass starts at length 0 (sequence ids are reused, lengths are not).
      for (const ForwardItem& it : batch) {
        if (Result<int64_t> length = inner_.SequenceLength(it.seq); length.ok() && *length == 0) {
          first_tokens_.push_back(it.tokens.front());
        }
      }
    }
    return inner_.Forward(batch, options);
  }
  void AwaitFirstPass() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return reached_; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  // Each sequence's first token fed, in the order the sequences started.
  std::vector<int32_t> first_tokens() {
    std::lock_guard<std::mutex> lock(mu_);
    return first_tokens_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool reached_ = false;
  bool open_ = false;
  std::vector<int32_t> first_tokens_;
};

TEST_CASE("waiting requests are admitted in arrival order: a small one does not overtake a large one",
          "[engine][scheduler]") {
  // 16 blocks of 4 tokens. A (40 + 8 tokens) runs; B (30 tokens, 9 blocks with the spare) cannot
  // start beside it; C (4 tokens) could, but waits behind B, so B is not starved by later arrivals.
  auto cpu = ServingBackend(/*max_tokens=*/64, /*max_sequences=*/4, /*max_snapshots=*/2);
  GatedBackend gated(*cpu);
  SchedulerOptions options;
  options.prefix_cache = false;
  options.max_batch_tokens = 16;
  auto scheduler = MakeScheduler(gated, options);
  const GenerateRequest a = Greedy(RandomPrompt(1, 40), 8);
  const GenerateRequest b = Greedy(RandomPrompt(2, 30), 4);
  const GenerateRequest c = Greedy(RandomPrompt(3, 4), 4);
  REQUIRE(a.prompt[0] != b.prompt[0]);
  REQUIRE(b.prompt[0] != c.prompt[0]);
  REQUIRE(a.prompt[0] != c.prompt[0]);
  auto stream_a = scheduler->Submit(a);
  REQUIRE(stream_a.ok());
  gated.AwaitFirstPass();  // A is running, alone
  auto stream_b = scheduler->Submit(b);
  auto stream_c = scheduler->Submit(c);
  REQUIRE(stream_b.ok());
  REQUIRE(stream_c.ok());
  gated.Open();
  for (auto* stream : {&*stream_a, &*stream_b, &*stream_c}) CHECK((*stream)->Wait().finish == FinishReason::kLength);
  CHECK(gated.first_tokens() == std::vector<int32_t>{a.prompt[0], b.prompt[0], c.prompt[0]});
}

TEST_CASE("cancellation ends the stream and frees the pages", "[engine][scheduler]") {
  auto backend = ServingBackend();
  SchedulerOptions options;
  options.prefix_cache = false;
  auto scheduler = MakeScheduler(*backend, options);
  const KvUsage before = scheduler->metrics().kv;

  auto running = scheduler->Submit(Greedy(RandomPrompt(7, 30), 200));
  REQUIRE(running.ok());
  std::optional<StreamEvent> first = (*running)->Next();
  REQUIRE(first);
  CHECK_FALSE(first->tokens.empty());
  (*running)->Cancel();
  const StreamEvent rest = (*running)->Wait();
  CHECK(rest.finish == FinishReason::kCancelled);
  CHECK(rest.usage.completion_tokens < 200);
  CHECK_FALSE((*running)->Next().has_value());

  // Cancelling before it runs, and cancelling twice, are both fine.
  auto queued = scheduler->Submit(Greedy(RandomPrompt(8, 10), 200));
  REQUIRE(queued.ok());
  (*queued)->Cancel();
  (*queued)->Cancel();
  CHECK((*queued)->Wait().finish == FinishReason::kCancelled);

  // The pages come back (metrics are published after each scheduling step).
  const SchedulerMetrics m =
      SettledMetrics(*scheduler, [](const SchedulerMetrics& s) { return s.finished_requests == 2; });
  CHECK(m.kv.live_sequences == 0);
  CHECK(m.kv.free_blocks == before.total_blocks);
  CHECK(m.cancelled_requests == 2);
}

TEST_CASE("stop strings cut the text even across token boundaries", "[engine][scheduler]") {
  auto backend = ServingBackend();
  LetterDetokenizer letters;
  SchedulerOptions options;
  options.detokenizer = &letters;
  auto scheduler = MakeScheduler(*backend, options);
  const std::vector<int32_t> prompt = RandomPrompt(21, 12);
  const StreamEvent full = RunOne(*scheduler, Greedy(prompt, 10));
  REQUIRE(full.tokens.size() == 10);
  std::string expected_text;
  for (int32_t id : full.tokens) expected_text += LetterText(id);
  CHECK(full.text == expected_text);

  // Characters 5..7 start in token 2 and end in token 3.
  GenerateRequest r = Greedy(prompt, 10);
  const std::string stop = expected_text.substr(5, 3);
  r.stop_strings = {"never-matches", stop};
  auto stream = scheduler->Submit(r);
  REQUIRE(stream.ok());
  std::string streamed;
  StreamEvent last;
  while (std::optional<StreamEvent> e = (*stream)->Next()) {
    streamed += e->text;
    last = *e;
  }
  const size_t at = expected_text.find(stop);
  CHECK(last.finish == FinishReason::kStop);
  CHECK(streamed == expected_text.substr(0, at));
  CHECK(last.usage.completion_tokens == static_cast<int64_t>((at + stop.size() + 1) / 2));

  // A stop token ends generation at its first occurrence; its text is not part of the output.
  GenerateRequest t = Greedy(prompt, 10);
  t.sampling.stop_tokens = {full.tokens[4]};
  const StreamEvent stopped = RunOne(*scheduler, t);
  const auto first = std::find(full.tokens.begin(), full.tokens.end(), full.tokens[4]);
  const size_t n = static_cast<size_t>(first - full.tokens.begin()) + 1;
  CHECK(stopped.finish == FinishReason::kStop);
  CHECK(stopped.tokens == std::vector<int32_t>(full.tokens.begin(), full.tokens.begin() + static_cast<long>(n)));
  CHECK(stopped.text == expected_text.substr(0, 2 * (n - 1)));
}

TEST_CASE("bad requests are refused with the field named", "[engine][scheduler]") {
  auto backend = ServingBackend();
  auto scheduler = MakeScheduler(*backend);
  auto expect = [&](GenerateRequest r, StatusCode code, const std::string& text) {
    auto s = scheduler->Submit(std::move(r));
    REQUIRE_FALSE(s.ok());
    CHECK(s.status().code() == code);
    CHECK_THAT(s.status().message(), Catch::Contains(text));
  };
  expect(Greedy({}, 5), StatusCode::kInvalidArgument, "prompt is empty");
  expect(Greedy({5, 512}, 5), StatusCode::kInvalidArgument, "prompt token 1 is id 512");
  expect(Greedy({5}, 0), StatusCode::kInvalidArgument, "max_tokens");
  expect(Greedy(RandomPrompt(3, 200), 100), StatusCode::kOutOfRange, "context limit of 256");
  GenerateRequest r = Greedy({5, 6}, 5);
  r.sampling.top_p = 0;
  expect(r, StatusCode::kInvalidArgument, "top_p");
  r = Greedy({5, 6}, 5);
  r.stop_strings = {"x"};
  expect(r, StatusCode::kInvalidArgument, "detokenizer");
  r = Greedy({5, 6}, 5);
  r.checkpoints = {3};
  expect(r, StatusCode::kInvalidArgument, "checkpoint 3");
}

// ---- speculative decoding ----

// Prompts that repeat themselves, as the roles' do, so prompt lookup has drafts to offer; outputs
// long enough to wrap the window of 8 many times. Greedy and seeded sampling alternate.
std::vector<GenerateRequest> RepetitiveRequests() {
  std::vector<GenerateRequest> out;
  for (int i = 0; i < 6; ++i) {
    std::vector<int32_t> prompt;
    const std::vector<int32_t> phrase = RandomPrompt(300 + i, 4 + i);
    for (int rep = 0; rep < 3; ++rep) {
      prompt.insert(prompt.end(), phrase.begin(), phrase.end());
      const std::vector<int32_t> filler = RandomPrompt(400 + 10 * i + rep, 3);
      prompt.insert(prompt.end(), filler.begin(), filler.end());
    }
    GenerateRequest r = Greedy(prompt, 48 + i);
    if (i % 2 == 1) {
      r.sampling.temperature = 0.7f;
      r.sampling.top_k = 40;
      r.sampling.seed = 77 + i;
    }
    out.push_back(r);
  }
  GenerateRequest golden = Greedy(Reference<int32_t>("input_ids_0"), 16);
  out.push_back(golden);
  return out;
}

// Every request's tokens, submitted together, with speculation at `max_draft_tokens`.
std::vector<std::vector<int32_t>> TokensWithDrafts(const std::vector<GenerateRequest>& requests, int max_draft_tokens,
                                                   SchedulerMetrics* metrics,
                                                   std::shared_ptr<const DrafterWeights> drafter = nullptr) {
  auto backend = ServingBackend(1024, 8, 16, std::move(drafter));
  SchedulerOptions options;
  options.speculation.max_draft_tokens = max_draft_tokens;
  auto scheduler = MakeScheduler(*backend, options);
  std::vector<std::vector<int32_t>> tokens = RunTogether(*scheduler, requests);
  *metrics = SettledMetrics(*scheduler, [&](const SchedulerMetrics& s) {
    return s.finished_requests == static_cast<int64_t>(requests.size());
  });
  CHECK(metrics->kv.live_sequences == 0);
  return tokens;
}

// Speculation at k <= 2 and k <= 8 against plain decoding, drafting with prompt lookup alone or,
// with `drafter`, with the MTP drafter where prompt lookup finds nothing.
void CheckSpeculationKeepsTokens(std::shared_ptr<const DrafterWeights> drafter) {
  const std::vector<GenerateRequest> requests = RepetitiveRequests();
  SchedulerMetrics plain_metrics;
  const std::vector<std::vector<int32_t>> plain = TokensWithDrafts(requests, 0, &plain_metrics, drafter);
  CHECK(plain_metrics.draft_tokens == 0);
  CHECK(plain.back() == Reference<int32_t>("greedy_0"));
  for (int k : {2, kMaxDraftTokens}) {
    SchedulerMetrics m;
    const std::vector<std::vector<int32_t>> drafted = TokensWithDrafts(requests, k, &m, drafter);
    for (size_t i = 0; i < requests.size(); ++i) {
      INFO("request " << i << ", max_draft_tokens " << k);
      CHECK(drafted[i] == plain[i]);
    }
    std::printf(
        "speculation%s k <= %d: %lld drafts (%lld the drafter's), %lld accepted (%lld), %lld verification passes, "
        "%lld forward passes (plain: %lld)\n",
        drafter ? " with the MTP drafter," : "", k, static_cast<long long>(m.draft_tokens),
        static_cast<long long>(m.drafter_tokens), static_cast<long long>(m.accepted_draft_tokens),
        static_cast<long long>(m.accepted_drafter_tokens), static_cast<long long>(m.verify_passes),
        static_cast<long long>(m.forward_passes), static_cast<long long>(plain_metrics.forward_passes));
    // Both outcomes happened: drafts the model took and drafts it refused.
    CHECK(m.accepted_draft_tokens > 0);
    CHECK(m.accepted_draft_tokens < m.draft_tokens);
    CHECK(m.generated_tokens == plain_metrics.generated_tokens);
    CHECK(m.forward_passes < plain_metrics.forward_passes);
    if (drafter) {
      // Both sources drafted: prompt lookup where the text repeats, the drafter elsewhere; the
      // random drafter's guesses were mostly refused.
      CHECK(m.drafter_tokens > 0);
      CHECK(m.drafter_tokens < m.draft_tokens);
      CHECK(m.accepted_drafter_tokens < m.drafter_tokens);
    } else {
      CHECK(m.drafter_tokens == 0);
    }
  }
}

TEST_CASE("speculative decoding gives the same tokens as plain decoding, greedy and seeded",
          "[engine][scheduler][spec]") {
  CheckSpeculationKeepsTokens(nullptr);
}

TEST_CASE("speculation with the MTP drafter gives the same tokens as plain decoding, greedy and seeded",
          "[engine][scheduler][spec][drafter]") {
  CheckSpeculationKeepsTokens(TinyDrafter());
}

// Requests that come again, as the roles' do from attempt to attempt: the first round's replies
// draft the second's (prompt lookup finds little in random prompts), and every reply stays the one
// plain decoding gives.
TEST_CASE("earlier replies draft for later requests, and the tokens stay the plain ones", "[engine][scheduler][spec]") {
  std::vector<GenerateRequest> requests;
  for (int i = 0; i < 4; ++i) {
    GenerateRequest r = Greedy(RandomPrompt(500 + i, 12), 40);
    if (i % 2 == 1) {
      r.sampling.temperature = 0.7f;
      r.sampling.top_k = 40;
      r.sampling.seed = 5 + i;
    }
    requests.push_back(r);
  }
  auto rounds = [&](int64_t history_tokens, SchedulerMetrics* metrics) {
    auto backend = ServingBackend(1024, 8, 16);
    SchedulerOptions options;
    options.speculation.history.max_tokens = history_tokens;
    auto scheduler = MakeScheduler(*backend, options);
    std::vector<std::vector<int32_t>> first = RunTogether(*scheduler, requests);
    std::vector<std::vector<int32_t>> second = RunTogether(*scheduler, requests);
    *metrics = SettledMetrics(*scheduler, [&](const SchedulerMetrics& m) {
      return m.finished_requests == 2 * static_cast<int64_t>(requests.size());
    });
    return std::pair{first, second};
  };
  SchedulerMetrics plain_metrics;
  const std::vector<std::vector<int32_t>> plain = TokensWithDrafts(requests, 0, &plain_metrics);
  SchedulerMetrics with, without;
  const auto [first, second] = rounds(OutputHistoryOptions{}.max_tokens, &with);
  const auto [first_without, second_without] = rounds(0, &without);
  for (size_t i = 0; i < requests.size(); ++i) {
    INFO("request " << i);
    CHECK(first[i] == plain[i]);
    CHECK(second[i] == plain[i]);
    CHECK(second_without[i] == plain[i]);
  }
  std::printf(
      "output history: %lld of %lld drafts from earlier replies, %lld of them accepted; without it %lld drafts\n",
      static_cast<long long>(with.history_tokens), static_cast<long long>(with.draft_tokens),
      static_cast<long long>(with.accepted_history_tokens), static_cast<long long>(without.draft_tokens));
  CHECK(with.accepted_history_tokens > 0);
  CHECK(with.history_tokens <= with.draft_tokens);
  CHECK(with.forward_passes < without.forward_passes);
  CHECK(without.history_tokens == 0);
}

TEST_CASE("speculative decoding stops where plain decoding does, inside accepted drafts too",
          "[engine][scheduler][spec]") {
  LetterDetokenizer letters;
  auto run = [&](int max_draft_tokens, const std::vector<GenerateRequest>& requests,
                 std::shared_ptr<const DrafterWeights> drafter = nullptr) {
    auto backend = ServingBackend(1024, 8, 16, drafter);
    SchedulerOptions options;
    options.detokenizer = &letters;
    options.speculation.max_draft_tokens = max_draft_tokens;
    auto scheduler = MakeScheduler(*backend, options);
    std::vector<StreamEvent> out;
    for (const GenerateRequest& r : requests) out.push_back(RunOne(*scheduler, r));
    // The prefix cache now holds each finished conversation: a follow-up turn must continue from it.
    for (size_t i = 0; i < requests.size(); ++i) {
      GenerateRequest next = requests[i];
      next.prompt.insert(next.prompt.end(), out[i].tokens.begin(), out[i].tokens.end());
      next.stop_strings.clear();
      next.sampling.stop_tokens.clear();
      next.max_tokens = 12;
      out.push_back(RunOne(*scheduler, next));
    }
    const SchedulerMetrics m = SettledMetrics(*scheduler, [&](const SchedulerMetrics& s) {
      return s.finished_requests == static_cast<int64_t>(2 * requests.size());
    });
    CHECK(m.kv.live_sequences == 0);
    if (max_draft_tokens > 0) CHECK(m.accepted_draft_tokens > 0);
    if (drafter) CHECK(m.drafter_tokens > 0);
    return out;
  };
  const std::vector<GenerateRequest> base = RepetitiveRequests();
  const std::vector<StreamEvent> full = run(0, base);
  std::vector<GenerateRequest> requests;
  for (size_t i = 0; i + 1 < base.size(); ++i) {
    const std::vector<int32_t>& tokens = full[i].tokens;
    GenerateRequest stop_token = base[i];
    stop_token.sampling.stop_tokens = {tokens[20]};  // late, where drafts are being accepted
    requests.push_back(stop_token);
    GenerateRequest stop_string = base[i];
    stop_string.stop_strings = {LetterText(tokens[25]).substr(1) + LetterText(tokens[26]) + LetterText(tokens[27])};
    requests.push_back(stop_string);
  }
  const std::vector<StreamEvent> plain = run(0, requests);
  const std::vector<StreamEvent> drafted = run(kMaxDraftTokens, requests);
  const std::vector<StreamEvent> mtp = run(kMaxDraftTokens, requests, TinyDrafter());
  for (size_t i = 0; i < plain.size(); ++i) {
    INFO("request " << i);
    for (const std::vector<StreamEvent>* other : {&drafted, &mtp}) {
      INFO((other == &mtp ? "MTP drafter" : "prompt lookup"));
      CHECK((*other)[i].finish == plain[i].finish);
      CHECK((*other)[i].tokens == plain[i].tokens);
      CHECK((*other)[i].text == plain[i].text);
      CHECK((*other)[i].usage.completion_tokens == plain[i].usage.completion_tokens);
    }
    if (i < requests.size()) CHECK(plain[i].finish == FinishReason::kStop);
  }
}

TEST_CASE("speculative decoding on the 1 B synthetic model gives the plain greedy tokens",
          "[engine][scheduler][spec]") {
  auto model = LoadModel(
      ModelSource{.synthetic_config = std::string(TEMPER_SOURCE_DIR) + "/bench/configs/gemma4-1b-synthetic.json",
                  .synthetic_seed = 1,
                  .tokenizer_need = TokenizerNeed::kNone});
  REQUIRE(model.ok());
  CpuBackendOptions options;
  options.threads = 2;
  options.max_context = 512;
  options.kv = KvCacheOptions{.max_sequences = 2, .block_tokens = 16, .max_tokens = 1024, .max_snapshots = 4};
  auto backend = CpuBackend::Create(model->config, model->weights, options);
  REQUIRE(backend.ok());
  // A phrase repeated, for drafts to find. (The window of 1,024 is not reached here, to keep the
  // test short: the tiny model's window of 8 is where drafts wrap the rings.)
  std::vector<int32_t> prompt;
  const std::vector<int32_t> phrase = RandomPrompt(9, 40);
  for (int rep = 0; rep < 5; ++rep) prompt.insert(prompt.end(), phrase.begin(), phrase.end());
  auto run = [&](int max_draft_tokens) {
    SchedulerOptions sched;
    sched.speculation.max_draft_tokens = max_draft_tokens;
    auto scheduler = MakeScheduler(**backend, sched);
    const StreamEvent out = RunOne(*scheduler, Greedy(prompt, 32));
    const SchedulerMetrics m =
        SettledMetrics(*scheduler, [](const SchedulerMetrics& x) { return x.finished_requests == 1; });
    return std::make_pair(out.tokens, m);
  };
  const auto [plain, plain_metrics] = run(0);
  const auto [drafted, m] = run(kMaxDraftTokens);
  std::printf("1 B synthetic: %lld drafts, %lld accepted, %lld forward passes (plain %lld)\n",
              static_cast<long long>(m.draft_tokens), static_cast<long long>(m.accepted_draft_tokens),
              static_cast<long long>(m.forward_passes), static_cast<long long>(plain_metrics.forward_passes));
  CHECK(drafted == plain);
  CHECK(m.draft_tokens > 0);
}

// A CPU backend that says a decode pass may have at most `rows` rows at a decode step's cost, and
// counts the passes whose decode rows (next tokens, and tokens with their drafts) went past that
// with drafts in them.
class RowLimitedBackend final : public ForwardingBackend {
 public:
  RowLimitedBackend(Backend& inner, int64_t rows) : ForwardingBackend(inner), rows_(rows) {}
  int64_t max_decode_rows() const override { return rows_; }
  Result<ForwardResult> Forward(std::span<const ForwardItem> batch, const ForwardOptions& options) override {
    int64_t decode_rows = 0;
    bool drafts = false;
    for (const ForwardItem& item : batch) {
      if (item.all_logits || item.tokens.size() == 1) decode_rows += static_cast<int64_t>(item.tokens.size());
      drafts = drafts || item.all_logits;
    }
    if (drafts) {
      ++drafted_passes;
      if (decode_rows > rows_) ++passes_over;
    }
    return inner_.Forward(batch, options);
  }
  int64_t drafted_passes = 0;
  int64_t passes_over = 0;

 private:
  int64_t rows_;
};

TEST_CASE("drafts stay within the rows a backend decodes at a step's cost", "[engine][scheduler][spec]") {
  std::vector<GenerateRequest> requests = RepetitiveRequests();
  requests.resize(3);  // three at once, five rows: room for two drafts a step
  SchedulerMetrics plain_metrics;
  const std::vector<std::vector<int32_t>> plain = TokensWithDrafts(requests, 0, &plain_metrics);
  auto cpu = ServingBackend();
  RowLimitedBackend limited(*cpu, 5);
  auto scheduler = MakeScheduler(limited);
  const std::vector<std::vector<int32_t>> tokens = RunTogether(*scheduler, requests);
  const SchedulerMetrics m = SettledMetrics(*scheduler, [&](const SchedulerMetrics& s) {
    return s.finished_requests == static_cast<int64_t>(requests.size());
  });
  CHECK(tokens == plain);
  CHECK(m.accepted_draft_tokens > 0);
  CHECK(limited.drafted_passes > 0);
  CHECK(limited.passes_over == 0);
  std::printf("row limit 5: %lld drafts, %lld accepted in %lld passes with drafts\n",
              static_cast<long long>(m.draft_tokens), static_cast<long long>(m.accepted_draft_tokens),
              static_cast<long long>(limited.drafted_passes));
}

TEST_CASE("speculation options out of range are refused", "[engine][scheduler][spec]") {
  auto backend = ServingBackend();
  SchedulerOptions options;
  options.speculation.max_draft_tokens = kMaxDraftTokens + 1;
  auto s = Scheduler::Create(*backend, options, QuietLog());
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(s.status().message(), Catch::Contains("speculation.max_draft_tokens is 9"));
  options.speculation.max_draft_tokens = 2;
  options.speculation.lookup.min_ngram = 0;
  s = Scheduler::Create(*backend, options, QuietLog());
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(s.status().message(), Catch::Contains("n-grams"));
  options.speculation.lookup.min_ngram = 2;
  options.speculation.history.max_ngram = 20;
  s = Scheduler::Create(*backend, options, QuietLog());
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(s.status().message(), Catch::Contains("speculation history: min_ngram 3 and max_ngram 20"));
}

}  // namespace
}  // namespace temper::engine::testing
