#include "engine/serve/scheduler_metrics_text.h"

#include <functional>

namespace temper::engine {

void AppendSchedulerMetrics(PrometheusText& out,
                            const std::vector<std::pair<MetricLabels, SchedulerMetrics>>& engines) {
  auto metric = [&](const char* name, const char* type, const char* help,
                    const std::function<double(const SchedulerMetrics&)>& value) {
    out.Family(std::string("temper_engine_") + name, type, help);
    for (const auto& [labels, m] : engines) out.Sample(labels, value(m));
  };
  auto used = [](const SchedulerMetrics& m) { return static_cast<double>(m.kv.total_blocks - m.kv.free_blocks); };
  metric("requests_waiting", "gauge", "Requests queued for admission.",
         [&](const SchedulerMetrics& m) { return static_cast<double>(m.waiting); });
  metric("requests_running", "gauge", "Requests being prefilled or decoded.",
         [&](const SchedulerMetrics& m) { return static_cast<double>(m.running); });
  metric("requests_finished_total", "counter", "Requests that ended, for any reason.",
         [&](const SchedulerMetrics& m) { return static_cast<double>(m.finished_requests); });
  metric("requests_cancelled_total", "counter", "Requests cancelled before they ended (a client that hung up, a stop).",
         [&](const SchedulerMetrics& m) { return static_cast<double>(m.cancelled_requests); });
  metric("kv_blocks", "gauge", "Paged KV blocks in the pool.",
         [&](const SchedulerMetrics& m) { return static_cast<double>(m.kv.total_blocks); });
  metric("kv_blocks_used", "gauge", "KV blocks held by sequences or cached prefixes.",
         [&](const SchedulerMetrics& m) { return used(m); });
  metric("kv_block_tokens", "gauge", "Tokens per KV block.",
         [&](const SchedulerMetrics& m) { return static_cast<double>(m.kv.block_tokens); });
  metric("kv_pool_usage_ratio", "gauge", "Fraction of the KV pool in use.", [&](const SchedulerMetrics& m) {
    return m.kv.total_blocks > 0 ? used(m) / static_cast<double>(m.kv.total_blocks) : 0;
  });
  metric("prefix_cache_entries", "gauge", "Pinned prefixes in the prefix cache.",
         [&](const SchedulerMetrics& m) { return static_cast<double>(m.cache_entries); });
  metric("prompt_tokens_total", "counter", "Prompt tokens requested.",
         [&](const SchedulerMetrics& m) { return static_cast<double>(m.prompt_tokens); });
  metric("prompt_tokens_cached_total", "counter", "Prompt tokens served from the prefix cache.",
         [&](const SchedulerMetrics& m) { return static_cast<double>(m.cached_prompt_tokens); });
  metric("prefix_cache_hit_rate", "gauge", "Prompt tokens reused over prompt tokens requested.",
         [&](const SchedulerMetrics& m) { return m.cache_hit_rate(); });
  metric("prefill_tokens_total", "counter", "Tokens prefilled.",
         [&](const SchedulerMetrics& m) { return static_cast<double>(m.prefilled_tokens); });
  metric("generated_tokens_total", "counter", "Tokens generated.",
         [&](const SchedulerMetrics& m) { return static_cast<double>(m.generated_tokens); });
  metric("generated_tokens_per_second", "gauge", "Generation rate over the last ten seconds.",
         [&](const SchedulerMetrics& m) { return m.generated_tokens_per_second; });
  metric("preemptions_total", "counter", "Requests preempted for KV memory (recomputed later).",
         [&](const SchedulerMetrics& m) { return static_cast<double>(m.preemptions); });
  metric("forward_passes_total", "counter", "Batched forward passes run.",
         [&](const SchedulerMetrics& m) { return static_cast<double>(m.forward_passes); });
  metric("draft_tokens_total", "counter",
         "Draft tokens (prompt lookup, output history and MTP drafter) checked by the model.",
         [&](const SchedulerMetrics& m) { return static_cast<double>(m.draft_tokens); });
  metric("draft_tokens_accepted_total", "counter", "Draft tokens the model agreed with (each one a token for free).",
         [&](const SchedulerMetrics& m) { return static_cast<double>(m.accepted_draft_tokens); });
  metric("draft_acceptance_ratio", "gauge", "Accepted over checked draft tokens.",
         [&](const SchedulerMetrics& m) { return m.draft_acceptance(); });
  metric("history_draft_tokens_total", "counter", "Draft tokens from earlier replies checked by the model.",
         [&](const SchedulerMetrics& m) { return static_cast<double>(m.history_tokens); });
  metric("history_draft_tokens_accepted_total", "counter", "Output-history draft tokens the model agreed with.",
         [&](const SchedulerMetrics& m) { return static_cast<double>(m.accepted_history_tokens); });
  metric("mtp_draft_tokens_total", "counter", "Draft tokens from the MTP drafter checked by the model.",
         [&](const SchedulerMetrics& m) { return static_cast<double>(m.drafter_tokens); });
  metric("mtp_draft_tokens_accepted_total", "counter", "MTP drafter tokens the model agreed with.",
         [&](const SchedulerMetrics& m) { return static_cast<double>(m.accepted_drafter_tokens); });
  metric("verify_passes_total", "counter", "Decode steps that checked draft tokens.",
         [&](const SchedulerMetrics& m) { return static_cast<double>(m.verify_passes); });
  metric("full_row_samples_total", "counter",
         "Sampling draws that needed a full logit row beyond the device's candidates.",
         [&](const SchedulerMetrics& m) { return static_cast<double>(m.full_row_samples); });
  metric("grammar_budget_redraws_total", "counter",
         "Constrained draws made again from the tokens that let the text end within max_tokens.",
         [&](const SchedulerMetrics& m) { return static_cast<double>(m.budget_redraws); });
  auto histogram = [&](const char* name, const char* help, HistogramCounts RequestLatencies::*member) {
    out.Family(std::string("temper_engine_") + name, "histogram", help);
    for (const auto& [labels, m] : engines) out.Histogram(labels, m.latency.*member);
  };
  histogram("time_to_first_token_seconds", "Time from a request's arrival to its first token.",
            &RequestLatencies::time_to_first_token);
  histogram("inter_token_latency_seconds", "Time between two consecutive tokens of a request.",
            &RequestLatencies::inter_token);
  histogram("e2e_request_latency_seconds", "Time from a request's arrival to its end, whatever the reason.",
            &RequestLatencies::end_to_end);
}

}  // namespace temper::engine
