#include "engine/serve/token_logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace temper::engine {

TokenLogprobs LogprobsOf(std::span<const float> logits, int32_t token, int top) {
  // log-softmax in double: a 262 K row's sum of exponentials loses the small ones in float.
  float max = -std::numeric_limits<float>::infinity();
  for (float x : logits) max = std::max(max, x);
  double sum = 0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - max);
  const double log_total = static_cast<double>(max) + std::log(sum);
  auto logprob = [&](int32_t id) {
    return static_cast<float>(static_cast<double>(logits[static_cast<size_t>(id)]) - log_total);
  };

  TokenLogprobs out;
  out.token = token;
  out.logprob = logprob(token);
  // The `top` best in one pass, kept sorted: cheaper than sorting the row for a handful.
  const auto better = [&](int32_t a, int32_t b) {
    const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  };
  std::vector<int32_t> best;
  for (int32_t id = 0; top > 0 && id < static_cast<int32_t>(logits.size()); ++id) {
    if (static_cast<int>(best.size()) == top && !better(id, best.back())) continue;
    best.insert(std::upper_bound(best.begin(), best.end(), id, better), id);
    if (static_cast<int>(best.size()) > top) best.pop_back();
  }
  for (int32_t id : best) out.top.emplace_back(id, logprob(id));
  return out;
}

}  // namespace temper::engine
