// The clock and the statistic every benchmark here reports: wall time on the steady clock, and
// the median of repeated samples (robust to the one slow run a shared machine always has).
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace temper::bench {

using Clock = std::chrono::steady_clock;

inline double Seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}
inline double Ms(Clock::time_point from, Clock::time_point to) { return 1e3 * Seconds(from, to); }

// The upper median (no averaging of the middle pair, so it is always a measured sample); 0 when
// there are no samples.
inline double Median(std::vector<double> samples) {
  if (samples.empty()) return 0;
  std::nth_element(samples.begin(), samples.begin() + samples.size() / 2, samples.end());
  return samples[samples.size() / 2];
}

}  // namespace temper::bench
