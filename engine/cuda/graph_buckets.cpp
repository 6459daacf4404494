#include "engine/cuda/graph_buckets.h"

#include <algorithm>

namespace temper::engine::cuda {

std::vector<int> GraphBuckets(int max_batch) {
  std::vector<int> b;
  for (int n = 1; n < max_batch; n *= 2) b.push_back(n);
  if (max_batch >= 1) b.push_back(max_batch);
  return b;
}

int SelectGraphBucket(const std::vector<int>& buckets, int batch) {
  if (batch < 1) return -1;
  auto it = std::lower_bound(buckets.begin(), buckets.end(), batch);
  return it == buckets.end() ? -1 : static_cast<int>(it - buckets.begin());
}

}  // namespace temper::engine::cuda
