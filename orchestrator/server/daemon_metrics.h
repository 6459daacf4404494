// DaemonMetrics: temperd's Prometheus metrics (GET /metrics on the `metrics:` address).
//
//   temper_batches{state}, temper_rules{state}      gauges: batches and rules of all batches by state
//   temper_attempts_total{outcome}                   kept, reverted, conflict (a parallel fork made again)
//   temper_attempt_harness_seconds                   histogram: change set + verification + snapshot/revert
//   temper_attempt_verification_seconds              histogram: the verification alone
//   temper_model_calls_total{role,endpoint}          role calls, corrections included
//   temper_model_call_errors_total{role,endpoint}    calls that ended in an error or an unusable answer
//   temper_model_call_seconds{role,endpoint}         histogram: each call's latency
//   temper_model_{prompt,cached_prompt,completion}_tokens_total{role,endpoint}
//   temper_journal_events_total                      events in the journal
//   temper_engine_*{endpoint}                        the in-process engines' own (scheduler_metrics_text.h),
//                                                    their request latency histograms included
//   process_*, temper_build_info                     the process and the build (common/process_metrics.h)
//
// The counters and histograms are folded from the journal, which already records every attempt
// and role call with its times and usage: each scrape reads the events committed since the last
// one from the state store, so they count the whole journal (they survive restarts) and the loop
// needs no second bookkeeping. The gauges are counted in the store at the scrape.
//
// Thread safety: Render may be called from any thread (one at a time inside).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "common/prometheus_text.h"
#include "common/status.h"
#include "orchestrator/loop/role_models.h"
#include "orchestrator/store/state_store.h"

namespace temper {

class DaemonMetrics {
 public:
  // `store` and `models` (null: no models configured) must outlive this.
  DaemonMetrics(StateStore& store, const RoleModels* models);

  // The Prometheus text body; errors are the store's.
  Result<std::string> Render();

 private:
  using RoleEndpoint = std::pair<std::string, std::string>;
  struct ModelCalls {
    uint64_t calls = 0;
    uint64_t errors = 0;
    TokenUsage usage;
    HistogramCounts seconds;
  };
  Status CatchUp();  // folds the events committed since the last scrape; under mu_
  void Fold(const EventRecord& event);
  std::string EndpointOf(const std::string& role) const;

  StateStore& store_;
  const RoleModels* models_;
  std::mutex mu_;
  uint64_t folded_seq_ = 0;
  uint64_t events_ = 0;
  std::map<std::string, uint64_t> attempts_;  // by outcome
  HistogramCounts harness_seconds_;
  HistogramCounts verification_seconds_;
  std::map<RoleEndpoint, ModelCalls> model_calls_;
};

}  // namespace temper
