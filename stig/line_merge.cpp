#include "stig/line_merge.h"

#include <vector>

namespace temper::stig {
namespace {

// Lines with their newline, so a last line without one stays as it was.
std::vector<std::string_view> SplitLines(std::string_view text) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    end = end == std::string_view::npos ? text.size() : end + 1;
    out.push_back(text.substr(start, end - start));
    start = end;
  }
  return out;
}

// For each base line, the index of the line matched to it in `other` by a longest common
// subsequence, or -1. O(n·m) in time and memory: kMaxMergeBytes keeps that to configuration files.
std::vector<long> MatchLines(const std::vector<std::string_view>& base, const std::vector<std::string_view>& other) {
  const size_t n = base.size(), m = other.size();
  std::vector<std::vector<unsigned>> lcs(n + 1, std::vector<unsigned>(m + 1, 0));
  for (size_t i = n; i-- > 0;) {
    for (size_t j = m; j-- > 0;) {
      lcs[i][j] = base[i] == other[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  std::vector<long> match(n, -1);
  for (size_t i = 0, j = 0; i < n && j < m;) {
    if (base[i] == other[j]) {
      match[i++] = static_cast<long>(j++);
    } else if (lcs[i + 1][j] >= lcs[i][j + 1]) {
      ++i;
    } else {
      ++j;
    }
  }
  return match;
}

using Lines = std::vector<std::string_view>;

Lines Slice(const Lines& lines, size_t from, size_t to) { return Lines(lines.begin() + from, lines.begin() + to); }

}  // namespace

std::optional<std::string> MergeLines(std::string_view base, std::string_view ours, std::string_view theirs) {
  for (std::string_view text : {base, ours, theirs}) {
    if (text.size() > kMaxMergeBytes || text.find('\0') != std::string_view::npos) return std::nullopt;
  }
  const Lines b = SplitLines(base), o = SplitLines(ours), t = SplitLines(theirs);
  const std::vector<long> in_ours = MatchLines(b, o), in_theirs = MatchLines(b, t);
  std::string out;
  auto emit = [&](const Lines& lines) {
    for (std::string_view l : lines) out.append(l);
  };
  size_t bi = 0, oi = 0, ti = 0;
  while (true) {
    // The next sync point: a base line both sides kept, at or after where each side stands.
    size_t k = bi;
    while (k < b.size() && !(in_ours[k] >= static_cast<long>(oi) && in_theirs[k] >= static_cast<long>(ti))) ++k;
    const size_t ok = k < b.size() ? static_cast<size_t>(in_ours[k]) : o.size();
    const size_t tk = k < b.size() ? static_cast<size_t>(in_theirs[k]) : t.size();
    const Lines base_part = Slice(b, bi, k), ours_part = Slice(o, oi, ok), theirs_part = Slice(t, ti, tk);
    if (ours_part == base_part || ours_part == theirs_part) {
      emit(theirs_part);
    } else if (theirs_part == base_part) {
      emit(ours_part);
    } else if (base_part.empty()) {
      emit(theirs_part);  // both added here: what was committed first, then this fork's
      emit(ours_part);
    } else {
      return std::nullopt;
    }
    if (k == b.size()) break;
    out.append(b[k]);
    bi = k + 1;
    oi = ok + 1;
    ti = tk + 1;
  }
  return out;
}

}  // namespace temper::stig
