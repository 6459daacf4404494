// The scripted model's answers: what a competent but imperfect model would say to each role,
// derived from the rule's own SCAP Security Guide fix text and bent by the ModelScript.
//
//   Architect pick   the first candidate in prompt order: {"decision": "attempt", ...} with an
//                    approach naming the fix, or {"decision": "skip", ...} for scripted skips.
//   Re-engagement    {"verdict": ..., "reasoning": ..., "plan": ...} (see model_script.h).
//   Worker           one tool call per turn, from how far the conversation has got:
//                      fix:        apply_reference_fix where the request offers it; else write_file
//                                  the fix text to FixScriptPath(rule), run_command `bash <it>` (the
//                                  script is removed afterwards); then finish;
//                      regressing: the same, plus run_command of the regress command before finish;
//                      wrong:      run_command appending a note to WrongNotePath(rule), finish;
//                      no usable fix text (none, or cut by the prompt budget): finish at once,
//                      saying so;
//                    a tool result refused by policy ends the attempt with a finish quoting it.
//   Reflector        {"tried", "why_failed" (quoting the evaluator's evidence), "next", "never",
//                    "lesson"}, the lesson starting with LessonMarker(rule, attempt).
// Errors: InvalidArgument when the request cannot be answered (a worker request offering no
// finish tool), for the server's HTTP 400.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "scripted_model/model_script.h"
#include "scripted_model/prompt_reading.h"

namespace temper::scripted {

struct ScriptedCall {
  std::string id;
  std::string name;
  nlohmann::ordered_json arguments;  // an object, keys in the order a model writes them
};

struct ScriptedAnswer {
  std::string content;                   // the text (for text-style tool calls, the call itself)
  std::vector<ScriptedCall> tool_calls;  // OpenAI tool_calls (native style)
  std::string finish_reason = "stop";    // "stop" or "tool_calls"
};

std::string FixScriptPath(std::string_view rule_id);              // /root/temper-fix-<short>.sh
std::string WrongNotePath(std::string_view rule_id);              // /root/temper-wrong-<short>.txt
std::string LessonMarker(std::string_view rule_id, int attempt);  // LESSON-<short>-<attempt>

Result<ScriptedAnswer> Answer(const ReadRequest& request, const ModelScript& script);

}  // namespace temper::scripted
