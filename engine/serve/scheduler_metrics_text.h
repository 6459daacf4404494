// The scheduler's metrics as Prometheus families (temper_engine_*): `temper-lm serve`'s GET
// /metrics, and temperd's for its inprocess endpoints (one labelled sample per engine): gauges and
// counters, then the request latency histograms (RequestLatencies: time_to_first_token_seconds,
// inter_token_latency_seconds, e2e_request_latency_seconds, named as vLLM names them).
#pragma once

#include <utility>
#include <vector>

#include "common/prometheus_text.h"
#include "engine/serve/scheduler.h"

namespace temper::engine {

// Each family once, with a sample per engine, labelled as given (no labels for one engine alone).
void AppendSchedulerMetrics(PrometheusText& out, const std::vector<std::pair<MetricLabels, SchedulerMetrics>>& engines);

}  // namespace temper::engine
