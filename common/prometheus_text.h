// PrometheusText: metrics in Prometheus's text exposition format (version 0.0.4), the body of a
// GET /metrics. One family at a time: its HELP and TYPE lines, then its samples, each with its
// labels; a histogram's samples are its cumulative buckets, sum and count.
//
//   PrometheusText out;
//   out.Family("temper_batches", "gauge", "Batches by state.");
//   out.Sample({{"state", "running"}}, 2);
//   out.Histogram({{"role", "worker"}}, latency);   // after Family(..., "histogram", ...)
//   std::string body = out.Take();
//
// Label values are escaped as the format says (backslash, double quote, newline); names are the
// caller's constants. Thread safety: a value; one thread builds it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace temper {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

// Observations counted into fixed upper bounds (le), as a Prometheus histogram exposes them.
class HistogramCounts {
 public:
  explicit HistogramCounts(std::vector<double> upper_bounds);  // ascending; +Inf is implied
  void Observe(double value);
  const std::vector<double>& upper_bounds() const { return bounds_; }
  // Observations ≤ each bound (not cumulative), then those above the last.
  const std::vector<uint64_t>& counts() const { return counts_; }
  double sum() const { return sum_; }
  uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // bounds_.size() + 1
  double sum_ = 0;
  uint64_t count_ = 0;
};

class PrometheusText {
 public:
  // Starts a family: `type` is "counter", "gauge" or "histogram".
  void Family(std::string_view name, std::string_view type, std::string_view help);
  // A sample of the current counter or gauge family.
  void Sample(const MetricLabels& labels, double value);
  // The samples of the current histogram family: name_bucket{le=...}, name_sum, name_count.
  void Histogram(const MetricLabels& labels, const HistogramCounts& h);
  std::string Take() { return std::move(out_); }

 private:
  void Line(std::string_view suffix, const MetricLabels& labels, std::string_view extra_label, double value);

  std::string out_;
  std::string family_;
};

}  // namespace temper
