#include "scripted_model/serving_metrics.h"

#include <algorithm>

#include <fmt/format.h>

namespace temper::scripted {

namespace {

void Metric(std::string& out, std::string_view name, std::string_view type, std::string_view help, double value) {
  out += fmt::format("# HELP temper_scripted_{0} {1}\n# TYPE temper_scripted_{0} {2}\ntemper_scripted_{0} {3}\n", name,
                     help, type, value);
}

void RoleMetric(std::string& out, const ServingMetrics& m, std::string_view name, std::string_view type,
                std::string_view help, double (*value)(const RoleServed&)) {
  out += fmt::format("# HELP temper_scripted_role_{0} {1}\n# TYPE temper_scripted_role_{0} {2}\n", name, help, type);
  for (int r = 0; r < kScriptedRoles; ++r) {
    out += fmt::format("temper_scripted_role_{}{{role=\"{}\"}} {}\n", name, RoleLabel(static_cast<ScriptedRole>(r)),
                       value(m.roles[r]));
  }
}

void RoleMetrics(std::string& out, const ServingMetrics& m) {
  RoleMetric(out, m, "requests_total", "counter", "Chat requests answered 200, per role.",
             [](const RoleServed& r) { return static_cast<double>(r.requests); });
  RoleMetric(out, m, "prompt_tokens_total", "counter", "Prompt tokens as usage reports them, per role.",
             [](const RoleServed& r) { return static_cast<double>(r.prompt_tokens); });
  RoleMetric(out, m, "cached_prompt_tokens_total", "counter",
             "Prompt tokens the simulated prefix cache held, per role (0 without a latency model).",
             [](const RoleServed& r) { return static_cast<double>(r.cached_prompt_tokens); });
  RoleMetric(out, m, "completion_tokens_total", "counter", "Completion tokens as usage reports them, per role.",
             [](const RoleServed& r) { return static_cast<double>(r.completion_tokens); });
  RoleMetric(out, m, "prompt_tokens_median", "gauge", "The median prompt tokens of a request, per role.",
             [](const RoleServed& r) { return r.MedianPromptTokens(); });
}

}  // namespace

void RoleServed::Count(uint64_t prompt, uint64_t cached, uint64_t completion) {
  ++requests;
  prompt_tokens += prompt;
  cached_prompt_tokens += cached;
  completion_tokens += completion;
  prompt_tokens_each.push_back(prompt);
}

double RoleServed::MedianPromptTokens() const {
  if (prompt_tokens_each.empty()) return 0;
  std::vector<uint64_t> sorted = prompt_tokens_each;
  std::sort(sorted.begin(), sorted.end());
  const size_t mid = sorted.size() / 2;
  if (sorted.size() % 2 == 1) return static_cast<double>(sorted[mid]);
  return (static_cast<double>(sorted[mid - 1]) + static_cast<double>(sorted[mid])) / 2;
}

std::string PrometheusText(const ServingMetrics& m) {
  std::string out;
  Metric(out, "requests_total", "counter", "Chat requests answered 200.", static_cast<double>(m.requests));
  Metric(out, "prompt_tokens_total", "counter", "Prompt tokens as usage reports them.",
         static_cast<double>(m.prompt_tokens));
  Metric(out, "completion_tokens_total", "counter", "Completion tokens as usage reports them.",
         static_cast<double>(m.completion_tokens));
  RoleMetrics(out, m);
  Metric(out, "simulated", "gauge", "1 when answers take simulated model time.", m.simulated ? 1 : 0);
  if (!m.simulated) return out;
  const SimulatedTotals& s = *m.simulated;
  Metric(out, "paced", "gauge", "1 when answers waited out the simulated time, 0 when it was only accounted.",
         s.paced ? 1 : 0);
  Metric(out, "speedup", "gauge", "How many times faster than the modelled box the simulated engine runs.", m.speedup);
  Metric(out, "cached_prompt_tokens_total", "counter", "Prompt tokens the simulated prefix cache held.",
         static_cast<double>(s.cached_prompt_tokens));
  Metric(out, "queue_seconds_total", "counter", "Simulated seconds requests waited for admission, summed.",
         s.batch.queue_seconds);
  Metric(out, "prefill_seconds_total", "counter", "Simulated seconds requests spent prefilling, summed.",
         s.batch.prefill_seconds);
  Metric(out, "decode_seconds_total", "counter", "Simulated seconds requests spent decoding, summed.",
         s.batch.decode_seconds);
  Metric(out, "busy_seconds_total", "counter", "Seconds the simulated engine had a request admitted.",
         s.batch.busy_seconds);
  Metric(out, "decode_busy_seconds_total", "counter", "Seconds the simulated engine had a request decoding.",
         s.batch.decode_busy_seconds);
  Metric(out, "decode_stream_seconds_total", "counter", "Integral of the streams decoding over time.",
         s.batch.decode_stream_seconds);
  Metric(out, "max_batch", "gauge", "The most streams that decoded together.", s.batch.max_batch);
  Metric(out, "abandoned_total", "counter", "Requests whose client left before the end.",
         static_cast<double>(s.batch.abandoned));
  return out;
}

std::string SummaryLine(const ServingMetrics& m) {
  std::string line = fmt::format("{} requests, {} prompt tokens, {} completion tokens; ", m.requests, m.prompt_tokens,
                                 m.completion_tokens);
  if (!m.simulated) return line + "no simulated model time (answers are instant)";
  const BatchSimulation::Totals& b = m.simulated->batch;
  const double mean_batch = b.decode_busy_seconds > 0 ? b.decode_stream_seconds / b.decode_busy_seconds : 0;
  return line + fmt::format(
                    "simulated model time{}: busy {:.1f} s (decoding {:.1f} s, mean batch {:.2f}, at most {}), per "
                    "request summed: queue {:.1f} s, prefill {:.1f} s ({} prompt tokens cached), decode {:.1f} s",
                    m.simulated->paced ? "" : " (not paced: each request alone)", b.busy_seconds, b.decode_busy_seconds,
                    mean_batch, b.max_batch, b.queue_seconds, b.prefill_seconds, m.simulated->cached_prompt_tokens,
                    b.decode_seconds);
}

}  // namespace temper::scripted
