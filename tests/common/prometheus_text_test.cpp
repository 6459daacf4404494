#include "common/prometheus_text.h"

#include <cmath>

#include <catch2/catch.hpp>

namespace temper {
namespace {

TEST_CASE("Prometheus text: each family's HELP and TYPE, then its samples with escaped labels") {
  PrometheusText out;
  out.Family("temper_batches", "gauge", "Batches by state.");
  out.Sample({{"state", "running"}}, 2);
  out.Sample({{"state", "a \"quoted\\ name\nwith a newline"}}, 0.5);
  out.Family("temper_events_total", "counter", "Events.");
  out.Sample({}, 1e6);
  out.Sample({{"x", "y"}}, std::nan(""));
  CHECK(out.Take() ==
        "# HELP temper_batches Batches by state.\n# TYPE temper_batches gauge\n"
        "temper_batches{state=\"running\"} 2\n"
        "temper_batches{state=\"a \\\"quoted\\\\ name\\nwith a newline\"} 0.5\n"
        "# HELP temper_events_total Events.\n# TYPE temper_events_total counter\n"
        "temper_events_total 1000000\n"
        "temper_events_total{x=\"y\"} NaN\n");
}

TEST_CASE("Prometheus text: a histogram's buckets are cumulative, with +Inf, sum and count") {
  HistogramCounts h({1, 0.5, 2});  // sorted on the way in
  CHECK(h.upper_bounds() == std::vector<double>{0.5, 1, 2});
  for (double v : {0.25, 0.5, 0.75, 1.0, 1.5, 9.0}) h.Observe(v);
  CHECK(h.counts() == std::vector<uint64_t>{2, 2, 1, 1});  // ≤0.5, ≤1, ≤2, above
  CHECK(h.count() == 6);
  CHECK(h.sum() == 13);
  PrometheusText out;
  out.Family("lat_seconds", "histogram", "Latency.");
  out.Histogram({{"role", "worker"}}, h);
  CHECK(out.Take() ==
        "# HELP lat_seconds Latency.\n# TYPE lat_seconds histogram\n"
        "lat_seconds_bucket{role=\"worker\",le=\"0.5\"} 2\n"
        "lat_seconds_bucket{role=\"worker\",le=\"1\"} 4\n"
        "lat_seconds_bucket{role=\"worker\",le=\"2\"} 5\n"
        "lat_seconds_bucket{role=\"worker\",le=\"+Inf\"} 6\n"
        "lat_seconds_sum{role=\"worker\"} 13\n"
        "lat_seconds_count{role=\"worker\"} 6\n");
}

}  // namespace
}  // namespace temper
