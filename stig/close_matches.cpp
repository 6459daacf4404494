#include "stig/close_matches.h"

#include <algorithm>
#include <numeric>

namespace temper::stig {

std::size_t EditDistance(std::string_view a, std::string_view b) {
  // One row of the classic dynamic programme: row[j] = distance(a[0..i), b[0..j)).
  std::vector<std::size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), std::size_t{0});
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::vector<std::string> CloseMatches(std::string_view query, const std::vector<std::string>& candidates,
                                      std::size_t limit) {
  const std::size_t max_distance = std::max<std::size_t>(2, query.size() / 3);
  struct Scored {
    std::size_t distance;
    std::size_t order;
  };
  std::vector<Scored> scored;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const std::string& c = candidates[i];
    std::size_t d = EditDistance(query, c);
    // A substring hit ranks just behind a candidate as close as the query is long.
    if (d > max_distance && !query.empty() && c.find(query) != std::string::npos) d = max_distance;
    if (d <= max_distance) scored.push_back({d, i});
  }
  std::stable_sort(scored.begin(), scored.end(),
                   [](const Scored& x, const Scored& y) { return x.distance < y.distance; });
  std::vector<std::string> out;
  for (const auto& s : scored) {
    if (out.size() >= limit) break;
    out.push_back(candidates[s.order]);
  }
  return out;
}

std::string DidYouMean(std::string_view query, const std::vector<std::string>& candidates) {
  std::vector<std::string> m = CloseMatches(query, candidates);
  if (m.empty()) return "";
  std::string s = ": did you mean ";
  for (std::size_t i = 0; i < m.size(); ++i) {
    if (i > 0) s += i + 1 == m.size() ? " or " : ", ";
    s += m[i];
  }
  return s + "?";
}

}  // namespace temper::stig
