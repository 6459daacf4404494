// The simulated prefix cache: a conversation re-sent with a new turn matches all of its last turn, prompts
// sharing a system prompt match it, one conversation holds one entry, and the least recently used
// prompt goes first.
#include "scripted_model/prompt_prefix_cache.h"

#include <catch2/catch.hpp>

using namespace temper::scripted;

TEST_CASE("a conversation's next turn matches the whole of its previous turn and answer, and replaces it") {
  PromptPrefixCache cache(4);
  const std::string turn1 = "system prompt. user: fix rule A.";
  const std::string answer1 = " assistant: write_file.";
  const std::string turn2 = turn1 + answer1 + " tool: ok.";
  const std::string turn3 = turn2 + " assistant: run_command. tool: exit 0.";
  CHECK(cache.Match(turn1, answer1) == 0);
  CHECK(cache.Match(turn2) == turn1.size() + answer1.size());
  CHECK(cache.Match(turn3) == turn2.size());
  CHECK(cache.size() == 1);
  CHECK(cache.Match(turn3) == turn3.size());  // the same prompt again (a retry)
  CHECK(cache.size() == 1);
  CHECK(cache.Match(turn1 + " assistant: finish.") == turn1.size() + std::string(" assistant: ").size());
  CHECK(cache.size() == 2);
}

TEST_CASE("prompts sharing only a system prompt match the system prompt, and the longest match wins") {
  PromptPrefixCache cache(4);
  CHECK(cache.Match("SYSTEM|rule A|turn 1") == 0);
  CHECK(cache.Match("SYSTEM|rule B|turn 1") == 12);  // "SYSTEM|rule "
  CHECK(cache.Match("SYSTEM|rule A|turn 1|turn 2") == 20);
  CHECK(cache.Match("OTHER") == 0);
  CHECK(cache.size() == 3);
}

TEST_CASE("the least recently used prompt is dropped first, a hit counts as a use, and zero prompts caches nothing") {
  PromptPrefixCache cache(2);
  cache.Match("aaaa|1");
  cache.Match("bbbb|1");
  CHECK(cache.Match("aaaa|2") == 5);  // a hit on aaaa|1 refreshes it: bbbb|1 is now the oldest
  CHECK(cache.size() == 2);           // aaaa|2, aaaa|1 (bbbb|1 was dropped for room)
  CHECK(cache.Match("bbbb|2") == 0);
  CHECK(cache.Match("aaaa|3") == 5);

  PromptPrefixCache off(0);
  CHECK(off.Match("same") == 0);
  CHECK(off.Match("same") == 0);
  CHECK(off.size() == 0);
}

TEST_CASE("a byte bound (the KV pool) drops the least recently used prompts, charging a shared prefix once") {
  PromptPrefixCache cache(64, 40);
  CHECK(cache.Match("SYSTEM|rule A|turn 1") == 0);  // 20 bytes charged
  CHECK(cache.held_bytes() == 20);
  CHECK(cache.Match("SYSTEM|rule B|turn 1") == 12);  // shares "SYSTEM|rule ": 8 bytes more
  CHECK(cache.held_bytes() == 28);
  CHECK(cache.size() == 2);
  // 20 bytes unshared: 48 > 40, so the oldest (rule A) goes.
  CHECK(cache.Match("OTHER|rule C|turn 1|xx") == 0);
  CHECK(cache.size() == 2);
  CHECK(cache.held_bytes() <= 40);
  CHECK(cache.Match("SYSTEM|rule A|turn 1") == 12);  // only what rule B still holds
  // The newest stays even when it alone is over the bound.
  PromptPrefixCache tiny(64, 4);
  CHECK(tiny.Match("a long prompt") == 0);
  CHECK(tiny.size() == 1);
  CHECK(tiny.Match("a long prompt, again") == 13);
  CHECK(tiny.size() == 1);
}
