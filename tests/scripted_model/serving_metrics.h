// ServingMetrics: what a scripted model server has served so far, with the simulated model time when
// it has a latency model, rendered for its GET /metrics (Prometheus text, the names below) and for the
// one summary line its process logs when it stops. bench/loop_bench.sh reads /metrics to print the
// simulated model time beside the wall time.
//
//   temper_scripted_requests_total                  chat requests answered 200
//   temper_scripted_prompt_tokens_total             usage as answered (4 bytes a token)
//   temper_scripted_completion_tokens_total
//   temper_scripted_simulated                       1 with a latency model, else 0 (and no lines below)
//   temper_scripted_paced                           1 when answers waited, 0 when only accounted
//   temper_scripted_speedup                         the latency model's speedup (its seconds below)
//   temper_scripted_cached_prompt_tokens_total      prompt tokens the prefix cache held
//   temper_scripted_queue_seconds_total             per-request simulated times, summed over requests
//   temper_scripted_prefill_seconds_total
//   temper_scripted_decode_seconds_total
//   temper_scripted_busy_seconds_total              time the engine had any request admitted
//   temper_scripted_decode_busy_seconds_total       time it had any request decoding
//   temper_scripted_decode_stream_seconds_total     ∫ streams decoding dt (÷ decode busy = mean batch)
//   temper_scripted_max_batch                       the most streams that decoded together
//   temper_scripted_abandoned_total                 requests whose client left before the end
// and per role (label role="architect_pick", "architect_reengage", "worker" or "reflector"), always:
//   temper_scripted_role_requests_total{role=...}             chat requests answered 200
//   temper_scripted_role_prompt_tokens_total{role=...}
//   temper_scripted_role_cached_prompt_tokens_total{role=...} the simulated prefix cache's (0 without)
//   temper_scripted_role_completion_tokens_total{role=...}
//   temper_scripted_role_prompt_tokens_median{role=...}       per request (0 before the first)
// Thread safety: pure functions.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "scripted_model/simulated_engine.h"

namespace temper::scripted {

// One role's share of what was served.
struct RoleServed {
  uint64_t requests = 0;
  uint64_t prompt_tokens = 0;
  uint64_t cached_prompt_tokens = 0;  // found in the simulated prefix cache; 0 without a latency model
  uint64_t completion_tokens = 0;
  std::vector<uint64_t> prompt_tokens_each;  // per request, in the order answered (for the median)

  void Count(uint64_t prompt, uint64_t cached, uint64_t completion);
  // The median of prompt_tokens_each (the mean of the middle two for an even count); 0 when empty.
  double MedianPromptTokens() const;
};

struct ServingMetrics {
  uint64_t requests = 0;
  uint64_t prompt_tokens = 0;
  uint64_t completion_tokens = 0;
  std::optional<SimulatedTotals> simulated;
  double speedup = 1.0;                          // the latency model's, with `simulated`
  std::array<RoleServed, kScriptedRoles> roles;  // indexed by ScriptedRole

  RoleServed& For(ScriptedRole role) { return roles[static_cast<int>(role)]; }
  const RoleServed& For(ScriptedRole role) const { return roles[static_cast<int>(role)]; }
};

std::string PrometheusText(const ServingMetrics& m);

// "143 requests, 3812345 prompt tokens, 120345 completion tokens; simulated model time: busy 3912.4 s
// (decoding 3850.1 s, mean batch 1.31, at most 8), per request summed: queue 0.0 s, prefill 310.2 s
// (2912345 prompt tokens cached), decode 4900.7 s"; without simulation the part after ';' is
// "no simulated model time (answers are instant)".
std::string SummaryLine(const ServingMetrics& m);

}  // namespace temper::scripted
