// SimulatedEngine: the one serving engine every request of a scripted model server shares when the
// server has a LatencyModel. It runs a BatchSimulation on the wall clock (steady_clock): a request
// submitted now joins the simulation now, and the handler serving it blocks until its tokens are
// "decoded", so a streamed reply paces its chunks and a whole reply comes when its last token would.
// Each request's prompt is first matched against a PromptPrefixCache; only the tokens it does not
// hold are prefilled, and the prompt with its answer is held for the turns that re-send them. The
// cache holds no more tokens than the model's KV capacity (kv_tokens; unbounded when 0): what an
// engine keeps of finished requests lives in the same pool.
//
// Without pacing (Pacing::kNone) nothing waits: each request is simulated alone, at once, on a clock
// that only the simulation moves, so the totals are what a serial loop (one request at a time) would
// have spent in the model, and such a loop's run on the simulated box takes its wall time plus the
// simulated busy time: minutes to measure what takes hours paced.
//
// Tokens are counted as the server reports usage (completion_wire.h: 4 bytes a token, rounded up);
// the cached part is the common prefix's whole tokens, at most all but the prompt's last token (an
// engine recomputes that one to get the first output's logits). A request holds prompt + completion
// tokens of KV cache from admission to its end.
//
// Thread safety: every member may be called from any thread. Shutdown() (also run by the destructor)
// makes every wait return false at once; Requests must not outlive their engine.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>

#include "scripted_model/batch_simulation.h"
#include "scripted_model/latency_model.h"
#include "scripted_model/prompt_prefix_cache.h"

namespace temper::scripted {

// What one request cost in simulated model time.
struct SimulatedTiming {
  uint64_t prompt_tokens = 0;
  uint64_t cached_prompt_tokens = 0;  // found in the prefix cache, not prefilled
  uint64_t completion_tokens = 0;
  double queue_s = 0;     // waiting for a KV or sequence slot
  double prefill_s = 0;   // prefilling the uncached prompt tokens
  double decode_s = 0;    // decoding the completion
  double mean_batch = 0;  // streams decoding alongside it, itself included, averaged over its decode
  bool abandoned = false;
};

// The engine's sums since it started.
struct SimulatedTotals {
  bool paced = true;  // Pacing::kWallClock
  uint64_t prompt_tokens = 0;
  uint64_t cached_prompt_tokens = 0;
  uint64_t completion_tokens = 0;
  BatchSimulation::Totals batch;
};

enum class Pacing {
  kWallClock,  // requests wait out their simulated time, sharing the engine as they overlap
  kNone,       // requests are answered at once, each simulated as if alone
};

class SimulatedEngine {
 public:
  class Request;

  explicit SimulatedEngine(const LatencyModel& model, Pacing pacing = Pacing::kWallClock);
  ~SimulatedEngine();
  SimulatedEngine(const SimulatedEngine&) = delete;
  SimulatedEngine& operator=(const SimulatedEngine&) = delete;

  // Queues a request now: `prompt_text` is what the prefix cache matches (the text whose bytes the
  // usage counted), `answer_text` what it then holds after it (AnswerText), `prompt_tokens` and
  // `completion_tokens` as usage reports them; `role` sets its speculation (latency_model.h).
  std::unique_ptr<Request> Submit(std::string_view prompt_text, std::string_view answer_text, uint64_t prompt_tokens,
                                  uint64_t completion_tokens, ScriptedRole role);

  // Every wait returns false from now on.
  void Shutdown();

  SimulatedTotals Totals() const;

 private:
  double Now() const;  // seconds on the steady clock since the engine started; call with mu_ held

  const Pacing pacing_;
  const std::chrono::steady_clock::time_point epoch_ = std::chrono::steady_clock::now();
  mutable std::mutex mu_;
  std::condition_variable changed_;  // a request joined or left, or the engine shut down
  bool shutdown_ = false;            // guarded by mu_
  BatchSimulation sim_;              // guarded by mu_
  PromptPrefixCache prefix_cache_;   // guarded by mu_
  SimulatedTotals totals_;           // guarded by mu_ (batch comes from sim_)
};

// One request in the engine. Destroying it before it is done abandons it (the client went away): its
// share of the batch goes to the others from that moment.
class SimulatedEngine::Request {
 public:
  ~Request();
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;

  // Blocks until the request has started decoding and decoded `tokens` of its completion (0: until
  // prefill is over and the first chunk may go). False when the engine shut down first.
  bool WaitDecoded(uint64_t tokens);
  // Blocks until the whole completion is decoded; false when the engine shut down first.
  bool WaitFinished();
  // Its cost so far (final once WaitFinished returned true).
  SimulatedTiming Timing() const;

 private:
  friend class SimulatedEngine;
  Request(SimulatedEngine* engine, BatchSimulation::JobId id, SimulatedTiming tokens)
      : engine_(engine), id_(id), tokens_(tokens) {}

  SimulatedEngine* const engine_;
  const BatchSimulation::JobId id_;
  const SimulatedTiming tokens_;  // the token counts; the times come from the simulation
};

}  // namespace temper::scripted
