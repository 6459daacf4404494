// The Architect: picks the next rule and an approach (or skips a rule with a reason), and, when
// re-engaged after repeated failures, rules CONTINUE, PIVOT (with a new plan) or ESCALATE.
//
// Build*() assemble the request within the role's budget (context_tokens − max_output_tokens),
// trimming memory by priority and reporting what was trimmed. Parse*() read the model's answer (a
// JSON object, found through prose, fences and thinking) and return InvalidArgument with a message
// for the model when it is unusable — an unknown rule id (with a suggestion), a missing plan for
// PIVOT — so AskStructured can have it corrected. Unlike gemma-forge, an unparseable re-engagement
// answer is never read as CONTINUE.
// Thread safety: const methods; the referenced library and estimator must outlive the Architect.
#pragma once

#include <map>
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

struct ArchitectInput {
  BatchProgress batch;
  std::vector<RuleInfo> candidates;            // the rules it may pick from, in default order
  std::vector<Lesson> lessons;                 // for the candidates and similar rules
  std::vector<PastAttempt> prior_attempts;     // on the candidates, from earlier runs
  std::map<std::string, int> attempts_so_far;  // by candidate id, from earlier runs; absent: none
};

struct ArchitectPick {
  enum class Kind { kAttempt, kSkip } kind = Kind::kAttempt;
  std::string rule_id;
  std::string approach;  // kAttempt
  std::string reason;    // kSkip
};

enum class ReengageVerdict { kContinue, kPivot, kEscalate };

struct ReengageDecision {
  ReengageVerdict verdict = ReengageVerdict::kContinue;
  std::string reasoning;
  std::string plan;  // required for kPivot
};

class Architect {
 public:
  Architect(const PromptLibrary& prompts, RoleConfig config, const TokenEstimator& estimator)
      : prompts_(prompts), config_(std::move(config)), estimator_(estimator) {}

  Result<RolePrompt> BuildPick(const ArchitectInput& input) const;
  Result<ArchitectPick> ParsePick(const ChatResponse& response, const ArchitectInput& input) const;

  Result<RolePrompt> BuildReengage(const RuleInfo& rule, const std::string& current_plan,
                                   const std::vector<PastAttempt>& attempts, const std::vector<Lesson>& lessons) const;
  Result<ReengageDecision> ParseReengage(const ChatResponse& response) const;

 private:
  Result<RolePrompt> Assemble(const std::string& system, std::vector<PromptSection> sections) const;
  const PromptLibrary& prompts_;
  const RoleConfig config_;
  const TokenEstimator& estimator_;
};

// Shared by the roles: the JSON object in a response's text, or InvalidArgument for the model.
Result<nlohmann::json> AnswerObject(const ChatResponse& response);
// A required non-empty string field of an answer object.
// InvalidArgument when it is missing, not a string, blank, or one angle-bracketed placeholder
// copied from the prompt's example answer ("<plan for the Worker>").
Result<std::string> RequiredString(const nlohmann::json& answer, const char* key);
// Builds the two-message request (system + user) for a role within its budget.
// The JSON schemas of the Architect's answers, as its prompts describe them: a pick (attempt with an
// approach, or skip with a reason, of one of `candidates`), and a re-engagement verdict (PIVOT with
// a plan; CONTINUE or ESCALATE). Sent with the requests, so an inprocess endpoint decodes only
// answers of these shapes.
nlohmann::ordered_json PickSchema(const std::vector<RuleInfo>& candidates);
nlohmann::ordered_json ReengageSchema();

Result<RolePrompt> AssembleRolePrompt(const RoleConfig& config, const TokenEstimator& estimator,
                                      const std::string& system, std::vector<PromptSection> sections);

}  // namespace temper
