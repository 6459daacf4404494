#include "common/closest_match.h"

#include <algorithm>
#include <numeric>

namespace temper {

size_t EditDistance(std::string_view a, std::string_view b) {
  // One row of the dynamic-programming table at a time.
  std::vector<size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), size_t{0});
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      size_t substitute = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      row[j] = std::min({above + 1, row[j - 1] + 1, substitute});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::vector<std::string> ClosestMatches(std::string_view word, const std::vector<std::string>& candidates,
                                        size_t max_results) {
  const size_t limit = std::max<size_t>(2, word.size() / 3);
  struct Scored {
    size_t rank;
    size_t distance;
    const std::string* name;
  };
  std::vector<Scored> scored;
  for (const std::string& c : candidates) {
    size_t d = EditDistance(word, c);
    if (d <= limit) {
      scored.push_back({0, d, &c});
    } else if (!word.empty() && c.find(word) != std::string::npos) {
      scored.push_back({1, d, &c});
    }
  }
  std::stable_sort(scored.begin(), scored.end(), [](const Scored& x, const Scored& y) {
    return x.rank != y.rank ? x.rank < y.rank : x.distance < y.distance;
  });
  std::vector<std::string> out;
  for (size_t i = 0; i < scored.size() && out.size() < max_results; ++i) out.push_back(*scored[i].name);
  return out;
}

std::string DidYouMean(std::string_view word, const std::vector<std::string>& candidates) {
  std::vector<std::string> matches = ClosestMatches(word, candidates);
  if (matches.empty()) return "";
  std::string out = " (did you mean ";
  for (size_t i = 0; i < matches.size(); ++i) {
    if (i > 0) out += ", ";
    out += "'" + matches[i] + "'";
  }
  return out + "?)";
}

}  // namespace temper
