// The Reflector: after a failed attempt, a structured lesson — what was tried, why it failed (tied
// to the evaluator's evidence), what to try next, what never to do again — that the orchestrator
// stores in memory and feeds to later attempts.
// Build() assembles the request within the role's budget (the failed attempt and its evidence are
// kept first; earlier attempts and lessons are trimmed by priority and reported). Parse() returns
// InvalidArgument with a message for the model when the answer is unusable.
// Thread safety: const methods; the library and estimator must outlive the Reflector.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "roles/endpoint_config.h"
#include "roles/model_client.h"
#include "roles/prompt_library.h"
#include "roles/prompt_sections.h"
#include "roles/rule_context.h"
#include "roles/token_estimator.h"

namespace temper {

struct Reflection {
  std::string tried;
  std::string why_failed;
  std::string next;
  std::vector<std::string> never;
  std::string lesson;  // at most kMaxLessonChars, for memory
};

// The JSON schema of the Reflector's answer, as its prompt describes it (the lesson's length is
// checked by Parse). Sent with the request, so an inprocess endpoint decodes only answers of it.
nlohmann::ordered_json ReflectionSchema();

class Reflector {
 public:
  static constexpr size_t kMaxLessonChars = 200;

  Reflector(const PromptLibrary& prompts, RoleConfig config, const TokenEstimator& estimator)
      : prompts_(prompts), config_(std::move(config)), estimator_(estimator) {}

  Result<RolePrompt> Build(const RuleInfo& rule, const PastAttempt& failed, const std::vector<PastAttempt>& earlier,
                           const std::vector<Lesson>& lessons) const;
  Result<Reflection> Parse(const ChatResponse& response) const;

 private:
  const PromptLibrary& prompts_;
  const RoleConfig config_;
  const TokenEstimator& estimator_;
};

}  // namespace temper
