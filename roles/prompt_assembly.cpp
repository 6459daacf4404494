#include "roles/prompt_assembly.h"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

namespace temper {

namespace {

constexpr std::string_view kSeparator = "\n\n";
constexpr size_t kMinTruncatedTokens = 32;  // a shorter remnant is noise: drop instead

// The longest prefix of `text` made of whole lines whose estimate, with the marker, fits `budget`.
std::string TruncateToLines(const std::string& text, size_t budget, const TokenEstimator& est, size_t total_lines) {
  std::string kept;
  size_t lines = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    size_t end = nl == std::string::npos ? text.size() : nl + 1;
    std::string candidate = kept + text.substr(start, end - start);
    std::string marker =
        fmt::format("[… truncated to fit the prompt budget: {} of {} lines kept]", lines + 1, total_lines);
    if (est.Count(candidate) + est.Count(marker) + 1 > budget) break;
    kept = std::move(candidate);
    ++lines;
    start = end;
  }
  if (lines == 0) return "";
  if (!kept.empty() && kept.back() != '\n') kept.push_back('\n');
  return kept + fmt::format("[… truncated to fit the prompt budget: {} of {} lines kept]", lines, total_lines);
}

}  // namespace

Result<AssembledPrompt> AssemblePrompt(const std::vector<PromptSection>& sections, size_t budget_tokens,
                                       const TokenEstimator& estimator) {
  const size_t sep = estimator.Count(kSeparator);
  std::vector<size_t> size(sections.size());
  size_t required = 0;
  for (size_t i = 0; i < sections.size(); ++i) {
    size[i] = estimator.Count(sections[i].text) + sep;
    if (sections[i].required) required += size[i];
  }
  if (required > budget_tokens) {
    std::string names;
    for (size_t i = 0; i < sections.size(); ++i) {
      if (sections[i].required)
        names += fmt::format("{}{} ({} tokens)", names.empty() ? "" : ", ", sections[i].name, size[i]);
    }
    return Status::ResourceExhausted(fmt::format("the required prompt sections need {} tokens but the budget is {}: {}",
                                                 required, budget_tokens, names));
  }
  std::vector<std::string> kept(sections.size());
  std::vector<bool> included(sections.size(), false);
  size_t left = budget_tokens - required;
  for (size_t i = 0; i < sections.size(); ++i) {
    if (sections[i].required) {
      kept[i] = sections[i].text;
      included[i] = true;
    }
  }
  std::vector<size_t> order;
  for (size_t i = 0; i < sections.size(); ++i)
    if (!sections[i].required) order.push_back(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return sections[a].priority > sections[b].priority; });
  std::vector<TrimmedSection> trimmed_by_index(sections.size());
  std::vector<bool> trimmed(sections.size(), false);
  for (size_t i : order) {
    if (size[i] <= left) {
      kept[i] = sections[i].text;
      included[i] = true;
      left -= size[i];
      continue;
    }
    trimmed[i] = true;
    trimmed_by_index[i] = {sections[i].name, size[i], 0};
    if (sections[i].truncatable && left >= kMinTruncatedTokens + sep) {
      const std::string& t = sections[i].text;
      size_t lines =
          static_cast<size_t>(std::count(t.begin(), t.end(), '\n')) + (t.empty() || t.back() == '\n' ? 0 : 1);
      std::string cut = TruncateToLines(t, left - sep, estimator, lines);
      if (!cut.empty()) {
        size_t cost = estimator.Count(cut) + sep;
        kept[i] = std::move(cut);
        included[i] = true;
        left -= std::min(left, cost);
        trimmed_by_index[i].kept_tokens = cost;
      }
    }
  }
  AssembledPrompt out;
  for (size_t i = 0; i < sections.size(); ++i) {
    if (included[i] && !kept[i].empty()) {
      if (!out.text.empty()) out.text += kSeparator;
      out.text += kept[i];
    }
    if (trimmed[i]) out.trimmed.push_back(trimmed_by_index[i]);
  }
  out.tokens = estimator.Count(out.text);
  return out;
}

}  // namespace temper
