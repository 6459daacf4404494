// Test helpers for the serving layer: the tiny Gemma 4 fixture behind a CPU backend with a chosen
// KV pool, prompts drawn from a fixed generator, and a detokenizer for the fixture's 512-id
// vocabulary (which has no tokenizer file): id i reads as two letters, so stop strings can start
// in one token and end in the next.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "engine/serve/scheduler.h"
#include "engine/tokenizer/detokenizer.h"
#include "engine/tokenizer/tokenizer.h"
#include "golden_fixture.h"

namespace temper::engine::testing {

// A backend that hands every call to `inner`: tests derive from it to watch or change one call
// (Forward, max_decode_rows) and keep the rest as the real backend does it.
class ForwardingBackend : public Backend {
 public:
  explicit ForwardingBackend(Backend& inner) : inner_(inner) {}
  const ModelConfig& config() const override { return inner_.config(); }
  Result<SequenceId> AddSequence() override { return inner_.AddSequence(); }
  Status ReleaseSequence(SequenceId seq) override { return inner_.ReleaseSequence(seq); }
  Result<int64_t> SequenceLength(SequenceId seq) const override { return inner_.SequenceLength(seq); }
  Status Truncate(SequenceId seq, int64_t length) override { return inner_.Truncate(seq, length); }
  int64_t context_limit() const override { return inner_.context_limit(); }
  KvUsage kv_usage() const override { return inner_.kv_usage(); }
  Result<SnapshotId> TakeSnapshot(SequenceId seq) override { return inner_.TakeSnapshot(seq); }
  Result<SequenceId> ForkSnapshot(SnapshotId snap) override { return inner_.ForkSnapshot(snap); }
  Status ReleaseSnapshot(SnapshotId snap) override { return inner_.ReleaseSnapshot(snap); }
  int64_t max_decode_rows() const override { return inner_.max_decode_rows(); }
  Result<ForwardResult> Forward(std::span<const ForwardItem> batch, const ForwardOptions& options) override {
    return inner_.Forward(batch, options);
  }

 protected:
  Backend& inner_;
};

inline std::unique_ptr<CpuBackend> ServingBackend(int64_t max_tokens = 1024, int max_sequences = 8,
                                                  int max_snapshots = 16,
                                                  std::shared_ptr<const DrafterWeights> drafter = nullptr) {
  CpuBackendOptions options;
  options.drafter = std::move(drafter);
  options.threads = 2;
  options.max_context = 256;
  options.kv.max_tokens = max_tokens;
  options.kv.block_tokens = 4;
  options.kv.max_sequences = max_sequences;
  options.kv.max_snapshots = max_snapshots;
  auto backend = CpuBackend::Create(Tiny().config, Tiny().weights, options);
  if (!backend.ok()) FAIL(backend.status().ToString());
  return std::move(*backend);
}

// `n` ids in [3, vocab), the same for the same seed.
inline std::vector<int32_t> RandomPrompt(uint64_t seed, int n) {
  std::vector<int32_t> ids;
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    ids.push_back(static_cast<int32_t>(3 + (x >> 33) % 509));
  }
  return ids;
}

inline std::string LetterText(int32_t id) {
  return {static_cast<char>('a' + id % 26), static_cast<char>('a' + (id / 26) % 26)};
}

class LetterDetokenizer final : public Detokenizer {
 public:
  std::unique_ptr<TextStream> NewStream() const override {
    class Stream final : public TextStream {
     public:
      Result<std::string> Push(int32_t id) override { return LetterText(id); }
      Result<std::string> Finish() override { return std::string(); }
    };
    return std::make_unique<Stream>();
  }
};

// A tokenizer with Gemma 4's control tokens whose 512 ids match the tiny model's vocabulary (see
// tests/data/tokenizer/README.md), so every id the model generates decodes.
inline const Tokenizer& ChatTokenizer() {
  static const Tokenizer tokenizer = [] {
    auto t = Tokenizer::FromFile(std::string(TEMPER_TEST_DATA_DIR) + "/tokenizer/gemma4-chat-tiny-tokenizer.json");
    if (!t.ok()) FAIL(t.status().ToString());
    return std::move(*t);
  }();
  return tokenizer;
}

inline const Logger& QuietLog() {
  static const Logger log(LogLevel::kWarning);
  return log;
}

inline std::unique_ptr<Scheduler> MakeScheduler(Backend& backend, SchedulerOptions options = {}) {
  auto s = Scheduler::Create(backend, options, QuietLog());
  if (!s.ok()) FAIL(s.status().ToString());
  return std::move(*s);
}

// The scheduler publishes metrics after each step, a moment after streams see their last event.
template <typename Pred>
SchedulerMetrics SettledMetrics(const Scheduler& scheduler, Pred done) {
  SchedulerMetrics m = scheduler.metrics();
  for (int i = 0; i < 300 && !done(m); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    m = scheduler.metrics();
  }
  return m;
}

inline StreamEvent RunOne(Scheduler& scheduler, GenerateRequest request) {
  auto stream = scheduler.Submit(std::move(request));
  if (!stream.ok()) FAIL(stream.status().ToString());
  return (*stream)->Wait();
}

// Every request submitted at once, each from its own thread; their tokens in request order.
inline std::vector<std::vector<int32_t>> RunTogether(Scheduler& scheduler,
                                                     const std::vector<GenerateRequest>& requests) {
  std::vector<std::vector<int32_t>> tokens(requests.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < requests.size(); ++i) {
    threads.emplace_back([&, i] { tokens[i] = RunOne(scheduler, requests[i]).tokens; });
  }
  for (auto& t : threads) t.join();
  return tokens;
}

inline GenerateRequest Greedy(std::vector<int32_t> prompt, int64_t max_tokens) {
  GenerateRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  return r;
}

}  // namespace temper::engine::testing
