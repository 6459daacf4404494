#include "engine/logit_candidates.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

namespace temper::engine {

LogitCandidates MergeRankCandidates(std::span<const RankCandidates> ranks, int k, float temperature,
                                    int32_t vocab_size) {
  std::vector<std::pair<float, int32_t>> all;
  for (const RankCandidates& r : ranks) {
    for (size_t i = 0; i < r.logits.size(); ++i) all.push_back({r.logits[i], r.ids[i]});
  }
  const size_t keep = std::min(all.size(), static_cast<size_t>(std::max(k, 0)));
  std::partial_sort(all.begin(), all.begin() + keep, all.end(), [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  });
  LogitCandidates out;
  out.vocab_size = vocab_size;
  for (size_t i = 0; i < keep; ++i) {
    out.logits.push_back(all[i].first);
    out.ids.push_back(all[i].second);
  }
  if (keep == 0) return out;
  // Every rank's mass rescaled to the top logit, minus the candidates' own share. A logit equal to
  // the top weighs exactly 1, written out so that infinite logits (−inf − −inf) stay numbers.
  const double t = temperature > 0 ? temperature : 1.0;
  const double top = out.logits[0];
  auto weight = [&](double l) { return l == top ? 1.0 : std::exp((l - top) / t); };
  double mass = 0;
  for (const RankCandidates& r : ranks) mass += static_cast<double>(r.mass) * weight(r.max);
  for (float l : out.logits) mass -= weight(l);
  out.tail_mass = std::max(mass, 0.0);
  return out;
}

}  // namespace temper::engine
