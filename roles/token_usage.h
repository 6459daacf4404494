// TokenUsage: what one model call (or a sum of them) cost in tokens. Shared by the model clients,
// which measure it, and the orchestrator's records, which store and journal it.
#pragma once

#include <cstdint>

namespace temper {

struct TokenUsage {
  uint64_t prompt_tokens = 0;
  uint64_t completion_tokens = 0;
  uint64_t cached_prompt_tokens = 0;  // of prompt_tokens, served from a prefix cache
};

}  // namespace temper
