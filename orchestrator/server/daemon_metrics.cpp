#include "orchestrator/server/daemon_metrics.h"

#include <nlohmann/json.hpp>

#include "common/process_metrics.h"
#include "engine/serve/scheduler_metrics_text.h"
#include "orchestrator/journal_event_types.h"

namespace temper {

namespace {

// Events read from the store per query while catching up.
constexpr uint32_t kPage = 1000;

// An attempt's harness takes about a second; a verification of a whole profile about ten.
std::vector<double> HarnessBuckets() { return {0.1, 0.25, 0.5, 1, 1.5, 2, 3, 5, 10, 30, 60, 120}; }
// A role call: a short answer in seconds on a fast engine, a long one minutes on the reference box.
std::vector<double> ModelCallBuckets() { return {0.1, 0.5, 1, 2.5, 5, 10, 20, 40, 60, 120, 300, 600}; }

double Seconds(const nlohmann::json& data, const char* key) {
  auto it = data.find(key);
  return it != data.end() && it->is_number() ? it->get<double>() / 1000.0 : 0.0;
}

}  // namespace

DaemonMetrics::DaemonMetrics(StateStore& store, const RoleModels* models)
    : store_(store), models_(models), harness_seconds_(HarnessBuckets()), verification_seconds_(HarnessBuckets()) {}

std::string DaemonMetrics::EndpointOf(const std::string& role) const {
  if (models_ == nullptr) return "";
  auto it = models_->endpoint_of().find(role);
  return it == models_->endpoint_of().end() ? "" : it->second;
}

void DaemonMetrics::Fold(const EventRecord& event) {
  ++events_;
  std::optional<EventType> type = ParseEventType(event.type);
  if (!type) return;  // written by a later temperd: nothing here knows what it means
  const nlohmann::json data = nlohmann::json::parse(event.data_json, nullptr, /*allow_exceptions=*/false);
  if (!data.is_object()) return;
  switch (*type) {
    case EventType::kAttemptKept:
    case EventType::kAttemptReverted: {
      ++attempts_[*type == EventType::kAttemptKept ? "kept" : "reverted"];
      const double verify = Seconds(data, "verify_ms");
      verification_seconds_.Observe(verify);
      harness_seconds_.Observe(Seconds(data, "changes_ms") + verify + Seconds(data, "snapshot_ms") +
                               Seconds(data, "revert_ms"));
      break;
    }
    case EventType::kAttemptConflict:
      ++attempts_["conflict"];
      break;
    default:
      break;
  }
  // A role call's event carries its latency (and its usage, when the endpoint reported one).
  if (!event.role.empty() && data.contains("latency_ms")) {
    auto [it, added] = model_calls_.try_emplace({event.role, EndpointOf(event.role)},
                                                ModelCalls{.seconds = HistogramCounts(ModelCallBuckets())});
    ModelCalls& calls = it->second;
    const nlohmann::json& corrections = data.contains("corrections") ? data["corrections"] : nlohmann::json();
    calls.calls += 1 + (corrections.is_array() ? corrections.size() : 0);
    calls.errors += data.contains("error") ? 1 : 0;
    calls.usage.prompt_tokens += event.usage.prompt_tokens;
    calls.usage.cached_prompt_tokens += event.usage.cached_prompt_tokens;
    calls.usage.completion_tokens += event.usage.completion_tokens;
    calls.seconds.Observe(Seconds(data, "latency_ms"));
  }
}

Status DaemonMetrics::CatchUp() {
  while (true) {
    TEMPER_ASSIGN_OR_RETURN(std::vector<EventRecord> events, store_.ReadEvents(folded_seq_, std::nullopt, kPage));
    for (const EventRecord& e : events) {
      Fold(e);
      folded_seq_ = e.seq;
    }
    if (events.size() < kPage) return Status::OK();
  }
}

Result<std::string> DaemonMetrics::Render() {
  std::lock_guard lock(mu_);
  TEMPER_RETURN_IF_ERROR(CatchUp());
  TEMPER_ASSIGN_OR_RETURN(StateStore::StateCounts states, store_.CountStates());
  PrometheusText out;
  auto count = [](const std::map<std::string, uint64_t>& counts, std::string_view key) {
    auto it = counts.find(std::string(key));
    return it == counts.end() ? 0.0 : static_cast<double>(it->second);
  };
  out.Family("temper_batches", "gauge", "Batches by state.");
  for (int i = 0; i < kBatchStateCount; ++i) {
    const std::string_view name = BatchStateName(static_cast<BatchState>(i));
    out.Sample({{"state", std::string(name)}}, count(states.batches, name));
  }
  out.Family("temper_rules", "gauge", "Rules of all batches by state.");
  for (int i = 0; i < kRuleStateCount; ++i) {
    const std::string_view name = RuleStateName(static_cast<RuleState>(i));
    out.Sample({{"state", std::string(name)}}, count(states.rules, name));
  }
  out.Family("temper_attempts_total", "counter",
             "Attempts by outcome: kept, reverted, or conflict (a parallel attempt made again on a fresh fork).");
  for (const char* outcome : {"kept", "reverted", "conflict"})
    out.Sample({{"outcome", outcome}}, count(attempts_, outcome));
  out.Family("temper_attempt_harness_seconds", "histogram",
             "Harness time of each verified attempt: change set, verification, snapshot or revert.");
  out.Histogram({}, harness_seconds_);
  out.Family("temper_attempt_verification_seconds", "histogram", "Verification time of each verified attempt.");
  out.Histogram({}, verification_seconds_);

  auto labels = [](const RoleEndpoint& k) { return MetricLabels{{"role", k.first}, {"endpoint", k.second}}; };
  auto per_call = [&](const char* name, const char* type, const char* help, auto value) {
    out.Family(name, type, help);
    for (const auto& [key, calls] : model_calls_) out.Sample(labels(key), value(calls));
  };
  per_call("temper_model_calls_total", "counter", "Role calls, corrections included.",
           [](const ModelCalls& c) { return static_cast<double>(c.calls); });
  per_call("temper_model_call_errors_total", "counter",
           "Role calls that ended in an endpoint error or an answer unusable after the corrections.",
           [](const ModelCalls& c) { return static_cast<double>(c.errors); });
  per_call("temper_model_prompt_tokens_total", "counter", "Prompt tokens, as the endpoints reported them.",
           [](const ModelCalls& c) { return static_cast<double>(c.usage.prompt_tokens); });
  per_call("temper_model_cached_prompt_tokens_total", "counter", "Prompt tokens the endpoints' prefix caches held.",
           [](const ModelCalls& c) { return static_cast<double>(c.usage.cached_prompt_tokens); });
  per_call("temper_model_completion_tokens_total", "counter", "Generated tokens.",
           [](const ModelCalls& c) { return static_cast<double>(c.usage.completion_tokens); });
  out.Family("temper_model_call_seconds", "histogram", "Latency of each role call, corrections included.");
  for (const auto& [key, calls] : model_calls_) out.Histogram(labels(key), calls.seconds);
  out.Family("temper_journal_events_total", "counter", "Events in the journal.");
  out.Sample({}, static_cast<double>(events_));

  if (models_ != nullptr) {
    std::vector<std::pair<MetricLabels, engine::SchedulerMetrics>> engines;
    for (const auto& [name, client] : models_->clients()) {
      if (std::optional<engine::SchedulerMetrics> m = client->serving_metrics()) {
        engines.emplace_back(MetricLabels{{"endpoint", name}}, *m);
      }
    }
    if (!engines.empty()) engine::AppendSchedulerMetrics(out, engines);
  }
  AppendProcessMetrics(out);
  return out.Take();
}

}  // namespace temper
