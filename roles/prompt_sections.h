// Renders rule metadata, batch state, lessons and attempts as prompt sections with the priorities
// every role uses: the rule's identity is required; its check and fix text come next (truncatable);
// lessons for this rule outrank lessons from similar rules, and higher utility outranks lower; the
// newest attempts outrank older ones. Shared by the Architect, Worker and Reflector so memory is
// trimmed the same way everywhere.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "roles/model_client.h"
#include "roles/prompt_assembly.h"
#include "roles/rule_context.h"

namespace temper {

// The rule's id, title and severity (required) and its details (truncatable, priority 900).
std::vector<PromptSection> RuleSections(const RuleInfo& rule);
PromptSection BatchSection(const BatchProgress& batch, int priority);
// One section per lesson, its provenance (when known) before its text; priority 500..800 by
// same_rule and utility.
std::vector<PromptSection> LessonSections(const std::vector<Lesson>& lessons);
// One truncatable section per attempt; newest highest, from `top_priority` down.
std::vector<PromptSection> AttemptSections(const std::vector<PastAttempt>& attempts, int top_priority);

// The tokens a chat request will cost beyond its message texts (role markers, turn delimiters).
constexpr size_t kPerMessageOverheadTokens = 8;
// What Gemma 4's chat format puts around a system and a user message and the open model turn,
// spelt out (engine/tokenizer/chat_format.h). Counted with a role's estimator it over-counts a
// little where the tokenizer holds each control token whole; a fixed per-message allowance does
// not hold for every tokenizer.
constexpr std::string_view kPromptFraming =
    "<bos><|turn>system\n<turn|>\n<|turn>user\n<turn|>\n<|turn>model\n<|channel>thought\n<channel|>";

// A ready-to-send request for a role, plus what was trimmed to fit (for the journal).
struct RolePrompt {
  ChatRequest request;
  std::vector<TrimmedSection> trimmed;
};

}  // namespace temper
