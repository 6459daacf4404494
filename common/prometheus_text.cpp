#include "common/prometheus_text.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace temper {

namespace {

std::string EscapeLabelValue(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

// Go's strconv formatting, which Prometheus reads: +Inf, -Inf, NaN, and the shortest round trip.
std::string Number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

}  // namespace

HistogramCounts::HistogramCounts(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {
  std::sort(bounds_.begin(), bounds_.end());
}

void HistogramCounts::Observe(double value) {
  const size_t bucket = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  ++counts_[bucket];
  sum_ += value;
  ++count_;
}

void PrometheusText::Family(std::string_view name, std::string_view type, std::string_view help) {
  family_ = std::string(name);
  out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void PrometheusText::Line(std::string_view suffix, const MetricLabels& labels, std::string_view extra_label,
                          double value) {
  out_ += family_;
  out_ += suffix;
  if (!labels.empty() || !extra_label.empty()) {
    out_ += '{';
    bool first = true;
    for (const auto& [k, v] : labels) {
      out_ += fmt::format("{}{}=\"{}\"", first ? "" : ",", k, EscapeLabelValue(v));
      first = false;
    }
    if (!extra_label.empty()) out_ += fmt::format("{}{}", first ? "" : ",", extra_label);
    out_ += '}';
  }
  out_ += ' ';
  out_ += Number(value);
  out_ += '\n';
}

void PrometheusText::Sample(const MetricLabels& labels, double value) { Line("", labels, "", value); }

void PrometheusText::Histogram(const MetricLabels& labels, const HistogramCounts& h) {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < h.upper_bounds().size(); ++i) {
    cumulative += h.counts()[i];
    Line("_bucket", labels, fmt::format("le=\"{}\"", Number(h.upper_bounds()[i])), static_cast<double>(cumulative));
  }
  Line("_bucket", labels, "le=\"+Inf\"", static_cast<double>(h.count()));
  Line("_sum", labels, "", h.sum());
  Line("_count", labels, "", static_cast<double>(h.count()));
}

}  // namespace temper
