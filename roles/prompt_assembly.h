// Prompt assembly within a token budget. A role's prompt is a list of sections (instructions, the
// rule, batch state, lessons, prior attempts, ...). Required sections always go in; optional ones
// are kept by priority until the budget is spent. A section too big for what is left is cut at a
// line boundary (never inside a line, so never inside a token) if it allows truncation, and dropped
// otherwise. Nothing is lost silently: the result lists every dropped or truncated section with its
// size, for the orchestrator to journal.
// Thread safety: pure function.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "common/status.h"
#include "roles/token_estimator.h"

namespace temper {

struct PromptSection {
  std::string name;  // for the report: "rule", "lesson 12", "attempt 3"
  std::string text;
  int priority = 0;  // higher is kept first among optional sections
  bool required = false;
  bool truncatable = false;
};

struct TrimmedSection {
  std::string name;
  size_t tokens = 0;       // the section's estimated size
  size_t kept_tokens = 0;  // 0 when dropped
};

struct AssembledPrompt {
  std::string text;                     // kept sections in their given order, separated by blank lines
  size_t tokens = 0;                    // estimate of `text`
  std::vector<TrimmedSection> trimmed;  // dropped or truncated, in the given order
};

// ResourceExhausted when the required sections alone exceed `budget_tokens` (naming them with
// their sizes).
Result<AssembledPrompt> AssemblePrompt(const std::vector<PromptSection>& sections, size_t budget_tokens,
                                       const TokenEstimator& estimator);

}  // namespace temper
