#include "scripted_model/simulated_engine.h"

#include <algorithm>
#include <cmath>

#include "scripted_model/completion_wire.h"

namespace temper::scripted {

SimulatedEngine::SimulatedEngine(const LatencyModel& model, Pacing pacing)
    : pacing_(pacing), sim_(model), prefix_cache_(model.prefix_cache_prompts, model.kv_tokens * kBytesPerToken) {}

SimulatedEngine::~SimulatedEngine() { Shutdown(); }

double SimulatedEngine::Now() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_).count();
}

std::unique_ptr<SimulatedEngine::Request> SimulatedEngine::Submit(std::string_view prompt_text,
                                                                  std::string_view answer_text, uint64_t prompt_tokens,
                                                                  uint64_t completion_tokens, ScriptedRole role) {
  SimulatedTiming tokens;
  tokens.prompt_tokens = prompt_tokens;
  tokens.completion_tokens = completion_tokens;
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t common_tokens = prefix_cache_.Match(prompt_text, answer_text) / kBytesPerToken;
  tokens.cached_prompt_tokens = std::min(common_tokens, prompt_tokens > 0 ? prompt_tokens - 1 : 0);
  totals_.prompt_tokens += prompt_tokens;
  totals_.cached_prompt_tokens += tokens.cached_prompt_tokens;
  totals_.completion_tokens += completion_tokens;
  const uint64_t prefill_tokens = prompt_tokens - tokens.cached_prompt_tokens;
  const uint64_t kv_tokens = prompt_tokens + completion_tokens;
  BatchSimulation::JobId id = 0;
  if (pacing_ == Pacing::kNone) {
    // Alone: the clock starts where the last request ended and moves only with this one's phases.
    id = sim_.Add(sim_.now(), prefill_tokens, completion_tokens, kv_tokens, role);
    while (sim_.phase(id) != BatchSimulation::Phase::kDone) sim_.AdvanceTo(sim_.NextEvent());
  } else {
    id = sim_.Add(Now(), prefill_tokens, completion_tokens, kv_tokens, role);
    changed_.notify_all();
  }
  return std::unique_ptr<Request>(new Request(this, id, tokens));
}

void SimulatedEngine::Shutdown() {
  std::lock_guard<std::mutex> lock(mu_);
  shutdown_ = true;
  changed_.notify_all();
}

SimulatedTotals SimulatedEngine::Totals() const {
  std::lock_guard<std::mutex> lock(mu_);
  SimulatedTotals t = totals_;
  t.paced = pacing_ == Pacing::kWallClock;
  t.batch = sim_.totals();
  return t;
}

SimulatedEngine::Request::~Request() {
  std::lock_guard<std::mutex> lock(engine_->mu_);
  SimulatedEngine& e = *engine_;
  if (e.sim_.phase(id_) != BatchSimulation::Phase::kDone) e.sim_.Abandon(e.Now(), id_);
  e.sim_.Forget(id_);
  e.changed_.notify_all();
}

bool SimulatedEngine::Request::WaitDecoded(uint64_t tokens) {
  SimulatedEngine& e = *engine_;
  std::unique_lock<std::mutex> lock(e.mu_);
  for (;;) {
    if (e.shutdown_) return false;
    if (e.pacing_ == Pacing::kWallClock) e.sim_.AdvanceTo(e.Now());
    const BatchSimulation::Phase phase = e.sim_.phase(id_);
    if (phase == BatchSimulation::Phase::kDone ||
        (phase == BatchSimulation::Phase::kDecode && e.sim_.Decoded(id_) >= tokens)) {
      return true;
    }
    // Sleep until this request gets there at the current rates, or until the batch changes first
    // (another request's phase ends, or one joins or leaves: the notification).
    const double wake = std::min(e.sim_.WhenDecoded(id_, tokens), e.sim_.NextEvent());
    if (std::isinf(wake)) {
      e.changed_.wait(lock);
    } else {
      e.changed_.wait_until(lock, e.epoch_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                 std::chrono::duration<double>(wake)));
    }
  }
}

bool SimulatedEngine::Request::WaitFinished() { return WaitDecoded(tokens_.completion_tokens); }

SimulatedTiming SimulatedEngine::Request::Timing() const {
  std::lock_guard<std::mutex> lock(engine_->mu_);
  const BatchSimulation::JobTimes& t = engine_->sim_.Times(id_);
  SimulatedTiming out = tokens_;
  out.queue_s = t.queue_s();
  out.prefill_s = t.prefill_s();
  out.decode_s = t.decode_s();
  out.mean_batch = t.mean_batch();
  out.abandoned = t.abandoned;
  return out;
}

}  // namespace temper::scripted
