// The CPU twin of LaunchTopCandidates (rank_ops.h's TopCandidates contract), and the scratch size
// the kernel needs.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "engine/cuda/reference_ops.h"
#include "engine/cuda/top_candidates_plan.h"

namespace temper::engine::cuda {

size_t TopCandidatesScratchBytes(int rows, int n, int k) {
  // Two ping-pong buffers of (value, id) survivors: each chunk of the first round keeps k.
  const size_t chunks = (static_cast<size_t>(n) + kTopCandidatesChunk - 1) / kTopCandidatesChunk;
  return 2 * static_cast<size_t>(rows) * chunks * static_cast<size_t>(k) * (sizeof(float) + sizeof(int32_t));
}

void ReferenceTopCandidates(const float* logits, int64_t ld, int rows, int n, int k, int index_offset,
                            const float* temperatures, float* out_vals, int32_t* out_ids, float* out_max,
                            float* out_mass) {
  std::vector<int32_t> order(static_cast<size_t>(n));
  for (int r = 0; r < rows; ++r) {
    const float* row = logits + r * ld;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
    for (int i = 0; i < k; ++i) {
      out_vals[int64_t{r} * k + i] = row[order[i]];
      out_ids[int64_t{r} * k + i] = order[i] + index_offset;
    }
    const float max = row[order[0]];
    const double t = temperatures[r] > 0 ? temperatures[r] : 1.0;
    double mass = 0;
    // An entry equal to the max weighs exactly 1, also when the max is infinite (see the kernel).
    for (int i = 0; i < n; ++i) mass += row[i] == max ? 1.0 : std::exp((row[i] - max) / t);
    out_max[r] = max;
    out_mass[r] = static_cast<float>(mass);
  }
}

}  // namespace temper::engine::cuda
