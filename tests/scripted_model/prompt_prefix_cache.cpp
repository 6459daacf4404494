#include "scripted_model/prompt_prefix_cache.h"

#include <algorithm>
#include <iterator>

namespace temper::scripted {

namespace {

size_t CommonPrefix(std::string_view a, std::string_view b) {
  const size_t n = std::min(a.size(), b.size());
  return static_cast<size_t>(std::mismatch(a.begin(), a.begin() + n, b.begin()).first - a.begin());
}

}  // namespace

void PromptPrefixCache::Drop(std::list<Entry>::iterator it) {
  held_bytes_ -= it->charged;
  prompts_.erase(it);
}

size_t PromptPrefixCache::Match(std::string_view prompt, std::string_view answer) {
  if (max_prompts_ == 0) return 0;
  size_t best = 0;
  size_t shared = 0;  // the longest prefix shared with a held prompt that stays (what the new one is not charged)
  auto hit = prompts_.end();  // the held prompt sharing the longest prefix, unless the new one replaces it
  for (auto it = prompts_.begin(); it != prompts_.end();) {
    const size_t common = CommonPrefix(it->text, prompt);
    const bool better = common > best;
    if (better) best = common;
    // A held prompt the new one extends (or repeats) holds nothing the new one does not.
    if (common == it->text.size()) {
      if (better) hit = prompts_.end();
      auto next = std::next(it);
      Drop(it);
      it = next;
      continue;
    }
    shared = std::max(shared, common);
    if (better) hit = it;
    ++it;
  }
  // The prompt hit is used again: it becomes the most recent but for the new one.
  if (hit != prompts_.end()) prompts_.splice(prompts_.begin(), prompts_, hit);
  Entry entry{std::string(prompt).append(answer), 0};
  entry.charged = entry.text.size() - shared;
  held_bytes_ += entry.charged;
  prompts_.push_front(std::move(entry));
  while (prompts_.size() > max_prompts_ || (max_bytes_ > 0 && held_bytes_ > max_bytes_ && prompts_.size() > 1)) {
    Drop(std::prev(prompts_.end()));
  }
  return best;
}

}  // namespace temper::scripted
