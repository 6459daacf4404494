#include "scripted_model/prompt_prefix_cache.h"

#include <algorithm>

namespace temper::scripted {

namespace {

size_t CommonPrefix(std::string_view a, std::string_view b) {
  const size_t n = std::min(a.size(), b.size());
  return static_cast<size_t>(std::mismatch(a.begin(), a.begin() + n, b.begin()).first - a.begin());
}

}  // namespace

size_t PromptPrefixCache::Match(std::string_view prompt, std::string_view answer) {
  if (max_prompts_ == 0) return 0;
  size_t best = 0;
  auto hit = prompts_.end();  // the held prompt sharing the longest prefix, unless the new one replaces it
  for (auto it = prompts_.begin(); it != prompts_.end();) {
    const size_t common = CommonPrefix(*it, prompt);
    const bool better = common > best;
    if (better) best = common;
    // A held prompt the new one extends (or repeats) holds nothing the new one does not.
    if (common == it->size()) {
      if (better) hit = prompts_.end();
      it = prompts_.erase(it);
      continue;
    }
    if (better) hit = it;
    ++it;
  }
  // The prompt hit is used again: it becomes the most recent but for the new one.
  if (hit != prompts_.end()) prompts_.splice(prompts_.begin(), prompts_, hit);
  prompts_.emplace_front(std::string(prompt).append(answer));
  while (prompts_.size() > max_prompts_) prompts_.pop_back();
  return best;
}

}  // namespace temper::scripted
