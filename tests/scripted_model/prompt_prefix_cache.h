// PromptPrefixCache: how much of a prompt a serving engine's prefix cache would already hold, so the
// simulated engine charges prefill only for the rest. A role re-sends its whole conversation every
// turn (the Worker's tool loop), and a real engine (vLLM's automatic prefix caching, SGLang's radix
// cache) then computes only the new suffix.
//
// The model: the longest common prefix of the prompt's text with any prompt held (with the answer
// generated for it), over the most recent `max_prompts` prompts (least recently used dropped first; a hit refreshes the
// prompt it hit). A prompt that extends a held one replaces it, so one conversation holds one entry however many turns
// it takes; memory stays bounded by max_prompts × the longest prompt. With `max_bytes` it also holds no more than an
// engine's KV pool could: each entry is charged the bytes it does not share with the entry it matched when it came (a
// radix or block cache stores a shared prefix once), and the least recently used go until the charges fit; the newest
// always stays. Real engines match whole blocks of tokens (vLLM 16) and evict blocks by KV pressure, the running
// requests' included; this matches bytes and evicts whole prompts, which the caller turns into tokens the way the
// server counts usage. Thread safety: none; the caller serializes.
#pragma once

#include <cstddef>
#include <list>
#include <string>
#include <string_view>

namespace temper::scripted {

class PromptPrefixCache {
 public:
  // `max_bytes` 0: no bound but the count.
  explicit PromptPrefixCache(size_t max_prompts, size_t max_bytes = 0)
      : max_prompts_(max_prompts), max_bytes_(max_bytes) {}

  // The length in bytes of the longest prefix `prompt` shares with a held prompt (0 when none, or
  // when the cache holds nothing: max_prompts 0), then holds `prompt` + `answer` as the most recent
  // (an engine caches the tokens it generates too, and the next turn re-sends them).
  size_t Match(std::string_view prompt, std::string_view answer = {});

  size_t size() const { return prompts_.size(); }
  // The bytes charged to the prompts held (what max_bytes bounds).
  size_t held_bytes() const { return held_bytes_; }

 private:
  struct Entry {
    std::string text;
    size_t charged = 0;  // text's bytes beyond the prefix it shared when it came
  };
  void Drop(std::list<Entry>::iterator it);

  const size_t max_prompts_;
  const size_t max_bytes_;
  std::list<Entry> prompts_;  // most recent first
  size_t held_bytes_ = 0;
};

}  // namespace temper::scripted
