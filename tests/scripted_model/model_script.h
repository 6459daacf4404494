// ModelScript: what the scripted model server does per rule, so the loop's tests and benchmark
// can make some rules fail first, some never pass, some regress and some be skipped — and see
// revert, reflection, retry, memory and escalation run for real against a real target.
//
// A rule's attempts follow one plan (attempt numbers are 1-based, as the roles number them):
//   - skip: the Architect skips the rule whenever it is the first candidate;
//   - unfixable: every attempt is wrong (a harmless unrelated write), and re-engagement ESCALATEs;
//   - otherwise attempts 1..wrong_first are wrong, the next regress_first apply the fix and also
//     break a health check (regress_command), and every later attempt applies the fix text.
// A rule that is not listed is fixed on its first attempt. Re-engagement answers the rule's
// `reengage`, else ESCALATE for unfixable rules and rules without fix text, else the script's.
//
// The YAML form (every key optional):
//   tool_calls: native          # native: OpenAI tool_calls; text: the call as JSON in the content
//   reengage: continue          # continue | pivot | escalate
//   regress_command: "..."      # the health-breaking command of regressing attempts
//   faults:
//     fail_first: 2             # answer the first 2 chat requests with fail_status ...
//     fail_status: 429          # 429, 500, 502 or 503
//     retry_after_seconds: 1    # sent as Retry-After with 429 and 503
//     cut_streams_first: 1      # close the first streamed reply after its first chunk ...
//     cut_after_text: false     # ... or, when true, after its first piece of text
//   rules:                      # keys: full XCCDF ids or SSG short names
//     package_aide_installed: fix
//     sysctl_kernel_randomize_va_space: wrong_first        # = {wrong_first: 1}
//     accounts_tmout: regress                              # = {regress_first: 1}
//     grub2_audit_argument: unfixable
//     partition_for_tmp: skip
//     sshd_set_idle_timeout: {wrong_first: 2, reengage: pivot}
// Errors name the file, the 1-based line and column and the field; unknown keys suggest the
// closest known one.
// Thread safety: a ModelScript is a value, immutable once loaded.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace temper::scripted {

inline constexpr std::string_view kRulePrefix = "xccdf_org.ssgproject.content_rule_";

// "xccdf_org.ssgproject.content_rule_package_aide_installed" → "package_aide_installed".
std::string ShortRuleName(std::string_view rule_id);

enum class ToolCallStyle { kNative, kText };
enum class Reengage { kContinue, kPivot, kEscalate };
std::string_view ReengageName(Reengage r);  // "CONTINUE", "PIVOT", "ESCALATE"

struct RuleScript {
  int wrong_first = 0;    // attempts 1..wrong_first are wrong
  int regress_first = 0;  // the next regress_first attempts fix and regress
  bool unfixable = false;
  bool skip = false;
  std::optional<Reengage> reengage;
};

// What one attempt of the Worker does.
enum class AttemptKind { kFix, kFixAndRegress, kWrong };

struct FaultScript {
  int fail_first = 0;
  int fail_status = 500;
  int retry_after_seconds = 1;
  int cut_streams_first = 0;
  bool cut_after_text = false;
};

struct ModelScript {
  ToolCallStyle tool_calls = ToolCallStyle::kNative;
  Reengage reengage = Reengage::kContinue;
  // Empty: DefaultRegressCommand(rule).
  std::string regress_command;
  FaultScript faults;
  std::map<std::string, RuleScript, std::less<>> rules;  // by short name

  // The rule's script (a default one for rules not listed); `rule_id` full or short.
  RuleScript For(std::string_view rule_id) const;
  AttemptKind KindOf(std::string_view rule_id, int attempt) const;
  std::string RegressCommand(std::string_view rule_id) const;
};

// Writes an `exit 1` profile.d script: the login-shell health check (stig/health.cpp,
// `bash -l -c true`) then fails, while the rule itself is fixed.
std::string DefaultRegressCommand(std::string_view rule_id);

// Parses the YAML form; `source_name` stands for the file in errors. InvalidArgument for a syntax
// error, a wrong type, an unknown key or a rule listed twice (by full and short id).
Result<ModelScript> ParseModelScript(const std::string& yaml_text, const std::string& source_name);
// NotFound when the file does not exist, IOError when it cannot be read, else as ParseModelScript.
Result<ModelScript> LoadModelScript(const std::string& path);

}  // namespace temper::scripted
