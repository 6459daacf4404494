// The Worker: a bounded tool loop that applies one rule's fix on a target through WorkerTools.
//
// Each turn the model answers with tool calls (OpenAI tool_calls, or calls written in its text —
// see tool_calls.h); each call is checked against its JSON schema and, for run_command,
// write_file and remove_package, against the dangerous-command policy before it reaches the target.
// apply_reference_fix runs the rule's own SSG bash fix (RuleInfo::fix_text, whole) as a script
// written and run through those same checks; it is offered only for rules that have one. The tools
// are one table (worker.cpp; their names in worker_tool_names.h). A call the policy refuses
// is reported as kRefused, decided by the policy's Status: a tool's own output that quotes a refusal
// is an ordinary result. The policy reads
// the scripts a command runs (and the files it copies where their content runs later) from the
// target through WorkerTools::ReadFile, so a script is judged by its content when it runs. Every tool result
// ends with the budget left (steps, tokens), and long outputs are cut with a note saying how much
// was left out. Unusable answers (malformed calls, unknown tools, wrong argument types, no call at
// all) are explained back to the model, up to max_format_retries in a row. When the conversation
// outgrows the context window, the oldest tool outputs are elided (and reported) first.
//
// Run() returns the outcome with a journal of events; it fails only when the model endpoint or the
// target fails (see WorkerTools for which target errors end the attempt).
// Thread safety: Run() is const; concurrent runs need distinct clients' or tools' thread safety.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "roles/endpoint_config.h"
#include "roles/model_client.h"
#include "roles/prompt_library.h"
#include "roles/prompt_sections.h"
#include "roles/rule_context.h"
#include "roles/token_estimator.h"
#include "roles/worker_tools.h"

namespace temper {

struct WorkerBudget {
  uint32_t max_steps = 30;          // tool calls per attempt
  uint64_t max_tokens = 200000;     // prompt + completion tokens over all model calls
  size_t max_output_bytes = 8192;   // per tool result shown to the model
  uint32_t max_format_retries = 3;  // unusable answers in a row before giving up
  std::chrono::seconds command_timeout{300};
};

struct WorkerTask {
  RuleInfo rule;
  std::string approach;  // the Architect's plan
  std::vector<Lesson> lessons;
  std::vector<PastAttempt> prior_attempts;
  // The batch allows disruptive changes: package removals pass the command policy (command_policy.h).
  bool allow_package_removal = false;
};

enum class WorkerOutcome { kFinished, kStepBudget, kTokenBudget, kUnusableAnswers };
std::string_view WorkerOutcomeName(WorkerOutcome outcome);

struct WorkerEvent {
  enum class Kind { kModelCall, kToolCall, kRefused, kUnusableAnswer, kElided } kind;
  std::string tool;                      // kToolCall / kRefused
  nlohmann::json arguments;              // kToolCall / kRefused
  std::string detail;                    // result excerpt, refusal or error message
  TokenUsage usage;                      // kModelCall
  std::chrono::milliseconds latency{0};  // kModelCall
  // kToolCall / kRefused of apply_reference_fix: the fix that ran (or was refused), as
  // {"rule": id, "source": RuleInfo::reference_fix_source, "sha256": of the script}; null otherwise.
  nlohmann::json reference_fix;
};

struct WorkerResult {
  WorkerOutcome outcome = WorkerOutcome::kFinished;
  std::string summary;  // from finish, or why the loop stopped
  std::string actions;  // one line per command run / file written, for the attempt record
  uint32_t steps = 0;
  uint32_t model_calls = 0;
  TokenUsage usage;
  std::vector<TrimmedSection> trimmed;  // from the initial prompt assembly
  std::vector<WorkerEvent> events;
};

class Worker {
 public:
  Worker(const PromptLibrary& prompts, RoleConfig config, const TokenEstimator& estimator, WorkerBudget budget)
      : prompts_(prompts), config_(std::move(config)), estimator_(estimator), budget_(budget) {}

  // Every tool the Worker has.
  static std::vector<ToolDeclaration> Tools();
  // The tools offered for `rule`: every tool but apply_reference_fix when the rule has no fix text.
  static std::vector<ToolDeclaration> ToolsFor(const RuleInfo& rule);
  Result<RolePrompt> BuildPrompt(const WorkerTask& task) const;
  Result<WorkerResult> Run(ModelClient& client, WorkerTools& tools, const WorkerTask& task,
                           const std::function<void(const WorkerEvent&)>& on_event = {}) const;

 private:
  const PromptLibrary& prompts_;
  const RoleConfig config_;
  const TokenEstimator& estimator_;
  const WorkerBudget budget_;
};

// Cuts `text` to at most `max_bytes`, keeping the head and the tail (where errors usually are) at
// UTF-8 character boundaries, with a note saying how many bytes were left out.
std::string TruncateOutput(const std::string& text, size_t max_bytes);

}  // namespace temper
