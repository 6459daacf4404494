#include "orchestrator/journal_event_types.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/display_text.h"
#include "roles/worker_tool_names.h"

namespace temper {

namespace {

using nlohmann::json;

// ---------------------------------------------------------------------------------------------
// Reading an event's data: a missing key, or a value of another type, reads as empty.

// Free text (an approach, a lesson, a reason) gets at most this many characters of a line.
constexpr size_t kTextChars = 160;
// What a tool call returned is a hint after its arguments; the full text is in --json.
constexpr size_t kToolResultChars = 60;

std::string Str(const json& data, const char* key) {
  auto it = data.find(key);
  return it != data.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::optional<uint64_t> Num(const json& data, const char* key) {
  auto it = data.find(key);
  if (it == data.end() || !it->is_number_integer()) return std::nullopt;
  return it->is_number_unsigned() ? it->get<uint64_t>()
                                  : static_cast<uint64_t>(std::max<int64_t>(0, it->get<int64_t>()));
}

bool Flag(const json& data, const char* key) {
  auto it = data.find(key);
  return it != data.end() && it->is_boolean() && it->get<bool>();
}

// The value at `key`, or null.
json Field(const json& data, const char* key) { return data.contains(key) ? data[key] : json(); }

size_t ListSize(const json& data, const char* key) {
  auto it = data.find(key);
  return it != data.end() && it->is_array() ? it->size() : 0;
}

std::string Plural(uint64_t n, const char* word) { return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s"); }

// ": text" when there is text, so a sentence ends cleanly when the data lacks it.
std::string Colon(const std::string& text, size_t max_chars = kTextChars) {
  return text.empty() ? "" : ": " + OneLine(text, max_chars);
}

// "2 fixed, 1 escalated" from {"escalated":1,"fixed":2,"pending":0}: the non-zero counts, the keys
// in `order` first and in that order, then the rest by count, largest first.
std::string Counts(const json& counts, const std::vector<std::string_view>& order = {}) {
  if (!counts.is_object()) return "none";
  std::vector<std::pair<std::string, int64_t>> items;
  for (const auto& [name, n] : counts.items()) {
    if (n.is_number_integer() && n.get<int64_t>() > 0) items.emplace_back(name, n.get<int64_t>());
  }
  auto rank = [&](const std::string& name) {
    auto it = std::find(order.begin(), order.end(), name);
    return static_cast<size_t>(it - order.begin());
  };
  std::stable_sort(items.begin(), items.end(), [&](const auto& a, const auto& b) {
    return rank(a.first) != rank(b.first) ? rank(a.first) < rank(b.first) : a.second > b.second;
  });
  std::string out;
  for (const auto& [name, n] : items) out += fmt::format("{}{} {}", out.empty() ? "" : ", ", n, name);
  return out.empty() ? "none" : out;
}

// batch.completed's rule counts, in the order people look for them.
std::vector<std::string_view> CompletedOrder() {
  std::vector<std::string_view> order;
  for (RuleState s : {RuleState::kFixed, RuleState::kAlreadyPassing, RuleState::kEscalated, RuleState::kRebootPending,
                      RuleState::kWaived, RuleState::kHeld, RuleState::kManual, RuleState::kSkipped, RuleState::kError,
                      RuleState::kCancelled, RuleState::kRunning, RuleState::kPending}) {
    order.push_back(RuleStateName(s));
  }
  return order;
}

// The tool call's main argument: the command line, the path, or finish's summary (a reference
// fix's identity is in its own field, ReferenceFix).
std::string ToolArgument(const std::string& tool, const json& args) {
  if (!args.is_object()) return args.is_null() ? "" : args.dump();
  std::optional<WorkerTool> known = ParseWorkerTool(tool);
  if (!known) return args.dump();
  switch (*known) {
    case WorkerTool::kRunCommand:
      return Str(args, "command");
    case WorkerTool::kReadFile:
      return Str(args, "path");
    case WorkerTool::kWriteFile:
      return fmt::format("{} ({} bytes)", Str(args, "path"), Str(args, "content").size());
    case WorkerTool::kFinish:
      return Str(args, "summary");
    case WorkerTool::kApplyReferenceFix:
      return Str(args, "reason");
    case WorkerTool::kInstallPackage:
    case WorkerTool::kRemovePackage:
      break;
  }
  return args.dump();
}

std::string AttemptTag(const json& data, const char* key) {
  std::optional<uint64_t> n = Num(data, key);
  return n ? fmt::format(" #{}", *n) : "";
}

std::string ProfileName(const std::string& id) {
  static constexpr std::string_view kMarker = "_profile_";
  size_t at = id.find(kMarker);
  return at == std::string::npos ? id : id.substr(at + kMarker.size());
}

std::string Rule(const EventView& e) { return ShortRuleName(e.rule_id); }

// ---------------------------------------------------------------------------------------------
// The human forms, one per type or per family of types that read alike.

// The type, the full rule id and the data as stored: for types without a sentence of their own.
std::string Generic(const EventView& e) {
  std::string out(e.type);
  if (!e.rule_id.empty()) out += " " + e.rule_id;
  if (!e.data_json.empty() && e.data_json != "{}") out += "  " + std::string(e.data_json);
  return out;
}

// "rule.held package_telnet_removed: why".
std::string RuleDetail(const EventView& e) {
  return fmt::format("{} {}", e.type, Rule(e)) + Colon(Str(e.data, "detail"));
}

// "batch.failed: error".
std::string Error(const EventView& e) { return std::string(e.type) + Colon(Str(e.data, "error")); }

std::string BatchSubmitted(const EventView& e) {
  std::string what =
      Flag(e.data, "whole_profile") ? "every rule of the profile" : Plural(Num(e.data, "rules").value_or(0), "rule");
  return fmt::format("{}: {} on target {} (profile {})", e.type, what, e.target, ProfileName(Str(e.data, "profile")));
}

// With the attempts at once and why, when the loop recorded them (parallel_attempts.h).
std::string BatchStarted(const EventView& e) {
  std::string out = fmt::format("{} on target {}", e.type, e.target);
  if (std::optional<uint64_t> n = Num(e.data, "parallel_attempts")) {
    out += *n == 1 ? ", one attempt at a time" : fmt::format(", {} attempts at once", *n);
    if (std::string why = Str(e.data, "parallel_attempts_why"); !why.empty()) out += " (" + why + ")";
  }
  return out;
}

std::string BatchResumed(const EventView& e) {
  std::string out = fmt::format("{} on target {}", e.type, e.target);
  auto it = e.data.find("interrupted_rules");
  if (it != e.data.end() && it->is_array() && !it->empty()) {
    std::string names;
    for (const json& r : *it)
      names += (names.empty() ? "" : ", ") + ShortRuleName(r.is_string() ? r.get<std::string>() : r.dump());
    out += ", interrupted work reverted on " + OneLine(names, kTextChars);
  }
  return out;
}

std::string BatchExpanded(const EventView& e) {
  return fmt::format("{} to {} of profile {}", e.type, Plural(Num(e.data, "rules").value_or(0), "rule"),
                     ProfileName(Str(e.data, "profile")));
}

std::string BatchCompleted(const EventView& e) {
  std::string out = fmt::format("{}: {}", e.type, Counts(Field(e.data, "rules"), CompletedOrder()));
  // Parallel attempts made again (attempt.conflict), when there were any.
  if (std::optional<uint64_t> n = Num(Field(e.data, "remakes"), "total"); n && *n > 0) {
    out += fmt::format("; {} made again", Plural(*n, "attempt"));
  }
  // Rules the library of proven fixes fixed with no model call, when it was asked.
  const json library = Field(e.data, "library");
  if (std::optional<uint64_t> tried = Num(library, "tried"); tried && *tried > 0) {
    out += fmt::format("; {} of {} fixed from proven fixes ({} model tokens saved)", Num(library, "kept").value_or(0),
                       Plural(*tried, "rule"), Num(library, "tokens_saved").value_or(0));
  }
  return out;
}

std::string BatchCancelled(const EventView& e) {
  std::string was = Str(e.data, "previous_state");
  std::optional<uint64_t> n = Num(e.data, "rules_cancelled");
  std::string paren = was.empty() ? "" : "was " + was;
  if (n) paren += (paren.empty() ? "" : ", ") + Plural(*n, "rule") + " cancelled";
  return std::string(e.type) + (paren.empty() ? "" : " (" + paren + ")") + Colon(Str(e.data, "reason"));
}

std::string BatchPlanReverted(const EventView& e) {
  return fmt::format("{}: plan only, target back at snapshot {}", e.type, Num(e.data, "start_snapshot").value_or(0));
}

std::string BatchReverted(const EventView& e) {
  return fmt::format("{}: target back at snapshot {}", e.type, Num(e.data, "restored_snapshot").value_or(0));
}

std::string EvaluationBefore(const EventView& e) {
  return fmt::format("{} of {}: {}", e.type, Plural(Num(e.data, "rules").value_or(0), "rule"),
                     Counts(Field(e.data, "verdicts")));
}

std::string FixpointPass(const EventView& e) {
  std::string out = fmt::format("{} {} of at most {}: {}", e.type, Num(e.data, "pass").value_or(0),
                                Num(e.data, "max_passes").value_or(0), Counts(Field(e.data, "verdicts")));
  size_t requeued = ListSize(e.data, "requeued");
  size_t escalated = ListSize(e.data, "escalated");
  if (requeued > 0) out += fmt::format("; {} re-queued", Plural(requeued, "rule"));
  if (escalated > 0) out += fmt::format("; {} escalated, still flipping", Plural(escalated, "rule"));
  return out;
}

std::string ArchitectPick(const EventView& e) {
  return fmt::format("{} {}", e.type, Rule(e)) + Colon(Str(e.data, "approach"));
}

std::string ArchitectSkip(const EventView& e) {
  return fmt::format("{} {}", e.type, Rule(e)) + Colon(Str(e.data, "reason"));
}

std::string ArchitectFallback(const EventView& e) {
  std::string error = Str(e.data, "error");
  return fmt::format("{} {}: no usable answer, following the rule's fix text", e.type, Rule(e)) +
         (error.empty() ? "" : " (" + OneLine(error, kTextChars) + ")");
}

std::string ArchitectReengage(const EventView& e) {
  std::string verdict = Str(e.data, "verdict");
  return fmt::format("{} {}{}", e.type, Rule(e), verdict.empty() ? "" : " " + verdict) +
         Colon(Str(e.data, "reasoning"));
}

std::string RuleStarted(const EventView& e) {
  uint64_t made = Num(e.data, "attempts_made").value_or(0);
  return fmt::format("{} {}{}", e.type, Rule(e),
                     made > 0 ? fmt::format(" ({} made before)", Plural(made, "attempt")) : "");
}

// After the loop's attempts: how many it took. rule.reboot_pending says what is still to come.
std::string RuleKept(const EventView& e) {
  std::string out = fmt::format("{} {}", e.type, Rule(e));
  if (std::optional<uint64_t> n = Num(e.data, "attempts")) out += " after " + Plural(*n, "attempt");
  if (std::optional<uint64_t> t = Num(e.data, "tokens")) out += fmt::format(" ({} tokens)", *t);
  return out;
}

std::string RuleFixed(const EventView& e) {
  if (Flag(e.data, "after_reboot")) {
    return fmt::format("{} {} after the reboot (OpenSCAP: {})", e.type, Rule(e), Str(e.data, "verdict"));
  }
  return RuleKept(e);
}

std::string RuleRebootPending(const EventView& e) {
  return RuleKept(e) + ": staged until the host reboots (temper rebooted)";
}

std::string RuleWaived(const EventView& e) {
  std::string expires = Str(e.data, "expires");
  return fmt::format("{} {} by {}{}", e.type, Rule(e), Str(e.data, "owner"),
                     expires.empty() ? "" : " until " + expires) +
         Colon(Str(e.data, "reason"));
}

std::string RuleManual(const EventView& e) {
  return fmt::format("{} {}: no automated check; a person must review it", e.type, Rule(e));
}

std::string RuleReverted(const EventView& e) {
  return fmt::format("{} {}: now {}", e.type, Rule(e), Str(e.data, "verdict"));
}

std::string AttemptStarted(const EventView& e) {
  return fmt::format("{} {}{}", e.type, Rule(e), AttemptTag(e.data, "number")) + Colon(Str(e.data, "approach"));
}

// attempt.kept and attempt.reverted: what became of the change, and what the evaluator said.
std::string AttemptEnded(const EventView& e) {
  std::string verdict = Str(e.data, "verdict"), outcome = Str(e.data, "outcome");
  std::string what = e.type == EventTypeName(EventType::kAttemptKept)
                         ? std::string(AttemptOutcomeName(AttemptOutcome::kKept))
                     : outcome.empty() ? std::string(AttemptOutcomeName(AttemptOutcome::kReverted))
                                       : outcome;
  if (!verdict.empty()) what += ", rule " + verdict;
  std::string changes = Str(e.data, "changes");
  return fmt::format("{} {}{}: {}", e.type, Rule(e), AttemptTag(e.data, "number"), what) +
         Colon(Str(e.data, "summary")) + (changes.empty() ? "" : " [changed: " + changes + "]");
}

// "attempt.conflict accounts_tmout #1 on lab/fork-5: made again: why".
std::string AttemptConflict(const EventView& e) {
  const std::string fork = Str(e.data, "fork");
  return fmt::format("{} {}{}{}: made again", e.type, Rule(e), AttemptTag(e.data, "number"),
                     fork.empty() ? "" : " on " + fork) +
         Colon(Str(e.data, "detail"));
}

std::string WorkerModelCall(const EventView& e) {
  std::optional<uint64_t> ms = Num(e.data, "latency_ms");
  return fmt::format("{} {}{}{}", e.type, Rule(e), AttemptTag(e.data, "attempt"),
                     ms ? fmt::format(" ({:.1f} s)", static_cast<double>(*ms) / 1000.0) : "");
}

// An apply_reference_fix call's fix: "reference fix <rule> from <content> (sha256 <first 16 hex
// digits>…)" (the whole digest is in --json and in the attempt's commands); "" for other calls.
std::string ReferenceFix(const json& fix) {
  if (!fix.is_object()) return "";
  return fmt::format("reference fix {} from {} (sha256 {}…)", ShortRuleName(Str(fix, "rule")), Str(fix, "source"),
                     Str(fix, "sha256").substr(0, 16));
}

// worker.tool_call and worker.refused: the tool, its main argument (or the reference fix it ran),
// and what it returned (or why the policy refused it).
std::string WorkerToolCall(const EventView& e) {
  std::string tool = Str(e.data, "tool");
  std::string arg = ToolArgument(tool, Field(e.data, "arguments"));
  if (std::string fix = ReferenceFix(Field(e.data, "reference_fix")); !fix.empty()) {
    arg = arg.empty() ? fix : fix + ": " + arg;
  }
  std::string detail = Str(e.data, "detail");
  std::string out =
      fmt::format("{} {}{} {}", e.type, Rule(e), AttemptTag(e.data, "attempt"), tool.empty() ? "?" : tool);
  if (!arg.empty()) out += ": " + OneLine(arg, kTextChars);
  if (ParseWorkerTool(tool) == WorkerTool::kFinish || detail.empty()) return out;
  return out + (e.type == EventTypeName(EventType::kWorkerRefused) ? " — " + OneLine(detail, kTextChars)
                                                                   : " → " + OneLine(detail, kToolResultChars));
}

// worker.unusable_answer and worker.elided: the Worker's own note.
std::string WorkerNote(const EventView& e) {
  return fmt::format("{} {}{}", e.type, Rule(e), AttemptTag(e.data, "attempt")) + Colon(Str(e.data, "detail"));
}

std::string ReflectorLesson(const EventView& e) {
  return fmt::format("{} {}{}", e.type, Rule(e), AttemptTag(e.data, "number")) + Colon(Str(e.data, "lesson"));
}

std::string ReflectorFailed(const EventView& e) {
  return fmt::format("{} {}{}", e.type, Rule(e), AttemptTag(e.data, "number")) + Colon(Str(e.data, "error"));
}

std::string PromptTrimmed(const EventView& e) {
  std::string sections;
  auto it = e.data.find("sections");
  if (it != e.data.end() && it->is_array()) {
    for (const json& s : *it) {
      if (!s.is_object()) continue;
      sections += fmt::format("{}{} {}→{} tokens", sections.empty() ? "" : ", ", Str(s, "name"),
                              Num(s, "tokens").value_or(0), Num(s, "kept_tokens").value_or(0));
    }
  }
  std::string rule = Rule(e);
  return fmt::format("{}{}", e.type, rule.empty() ? "" : " " + rule) + Colon(sections);
}

std::string RebootConfirmed(const EventView& e) {
  return fmt::format("{}: {} to verify", e.type, Plural(ListSize(e.data, "rules"), "rule")) +
         Colon(Str(e.data, "note"));
}

std::string RebootVerified(const EventView& e) {
  return fmt::format("{}: {} fixed, {} escalated", e.type, Num(e.data, "fixed").value_or(0),
                     Num(e.data, "escalated").value_or(0));
}

// ---------------------------------------------------------------------------------------------
// The vocabulary. Rows are in EventType order (checked below).

using T = EventType;
using S = RuleState;
constexpr std::optional<RuleState> kNoRule = std::nullopt;

constexpr EventSpec kSpecs[] = {
    {T::kBatchSubmitted, "batch.submitted",
     "name datastream profile whole_profile rules waivers allow_disruptive plan_only budgets", kNoRule,
     "a batch was stored, queued", BatchSubmitted},
    {T::kBatchStarted, "batch.started", "target parallel_attempts parallel_attempts_why", kNoRule,
     "the loop started the batch", BatchStarted},
    {T::kBatchResumed, "batch.resumed",
     "target interrupted_rules good_snapshot parallel_attempts parallel_attempts_why", kNoRule,
     "the loop took the batch up again after a restart, reverting interrupted work", BatchResumed},
    {T::kBatchExpanded, "batch.expanded", "profile rules apply_from", kNoRule,
     "a whole-profile batch got the profile's rules (an apply batch, those of the batch it replays)", BatchExpanded},
    {T::kBatchCompleted, "batch.completed",
     "rules verdicts_after fixpoint_passes plan_only results_dir remakes library", kNoRule,
     "every rule is final: rule counts by state", BatchCompleted},
    {T::kBatchFailed, "batch.failed", "error", kNoRule, "the batch could not go on", Error},
    {T::kBatchCancelled, "batch.cancelled", "reason previous_state rules_cancelled", kNoRule,
     "a client cancelled the batch", BatchCancelled},
    {T::kBatchPlanReverted, "batch.plan_reverted", "start_snapshot snapshots_dropped recovered batch_state", kNoRule,
     "a plan-only batch's changes were taken back out", BatchPlanReverted},
    {T::kBatchRevertStarted, "batch.revert_started", "restore_snapshot rules", kNoRule, "`temper revert BATCH` began",
     Generic},
    {T::kBatchReverted, "batch.reverted", "restored_snapshot reverted_rules verdicts now_failing results_dir", kNoRule,
     "the batch's changes were taken out and the target re-evaluated", BatchReverted},
    {T::kEvaluationBefore, "evaluation.before", "rules verdicts not_in_datastream results_dir states", kNoRule,
     "OpenSCAP's verdicts before any change, and the states they decided", EvaluationBefore},
    {T::kFixpointPass, "fixpoint.pass",
     "pass max_passes final verdicts attempts fixed flipped requeued escalated results_dir", kNoRule,
     "a rescan of every rule after a pass of the loop", FixpointPass},
    {T::kArchitectPick, "architect.pick", "approach corrections latency_ms", kNoRule,
     "the Architect chose the next rule and an approach", ArchitectPick},
    {T::kArchitectSkip, "architect.skip", "reason corrections latency_ms", S::kSkipped, "the Architect skipped a rule",
     ArchitectSkip},
    {T::kArchitectFallback, "architect.fallback", "approach error corrections latency_ms", kNoRule,
     "no usable answer: the next rule in order, with its fix text", ArchitectFallback},
    {T::kArchitectReengage, "architect.reengage", "verdict reasoning plan corrections latency_ms", kNoRule,
     "after failures in a row the Architect said CONTINUE, PIVOT or ESCALATE", ArchitectReengage},
    {T::kRuleStarted, "rule.started", "approach attempts_made", S::kRunning, "the loop began work on a rule",
     RuleStarted},
    {T::kRuleFixed, "rule.fixed", "attempts tokens commands after_reboot verdict confirmed_seq detail", S::kFixed,
     "a kept attempt fixed the rule (or the reboot verification confirmed it)", RuleFixed},
    {T::kRuleRebootPending, "rule.reboot_pending", "attempts tokens commands", S::kRebootPending,
     "the fix is kept and takes effect after a reboot", RuleRebootPending},
    {T::kRuleEscalated, "rule.escalated", "detail attempts tokens pass after_reboot verdict confirmed_seq",
     S::kEscalated, "the rule goes to a person, with why", RuleDetail},
    {T::kRuleRequeued, "rule.requeued", "detail pass", S::kPending,
     "the fixpoint's rescan found the rule flipped: pending again", RuleDetail},
    {T::kRuleWaived, "rule.waived", "reason owner expires before_verdict", S::kWaived,
     "a waiver keeps the rule out of remediation", RuleWaived},
    {T::kRuleManual, "rule.manual", "before_verdict", S::kManual, "no automated check: a person reviews the rule",
     RuleManual},
    {T::kRuleHeld, "rule.held", "reasons detail", S::kHeld, "disruptive, and the batch did not allow it", RuleDetail},
    {T::kRuleRevertStarted, "rule.revert_started", "snapshots", kNoRule, "`temper revert BATCH RULE` began", Generic},
    {T::kRuleReverted, "rule.reverted", "dropped_snapshots verdict verdicts now_failing results_dir", S::kReverted,
     "the rule's fix was taken back out", RuleReverted},
    {T::kWaiverExpired, "waiver.expired", "reason owner expires detail", kNoRule,
     "the rule's waiver has expired: it is remediated as usual", RuleDetail},
    {T::kAttemptStarted, "attempt.started", "number approach fork library_fix replay_of", kNoRule,
     "the Worker began an attempt (or a proven fix's replay: library_fix, replay_of)", AttemptStarted},
    {T::kAttemptKept, "attempt.kept",
     "number worker_outcome worker_summary verdict outcome summary worker_ms verify_ms changes changes_error "
     "changes_ms snapshot_ms fork fix_bundle replay replay_ms library_fix replay_of",
     kNoRule, "the evaluator accepted the attempt's change", AttemptEnded},
    {T::kAttemptReverted, "attempt.reverted",
     "number worker_outcome worker_summary verdict outcome summary worker_ms verify_ms changes changes_error "
     "changes_ms revert_ms fork replay replay_ms library_fix replay_of conflicts lesson",
     kNoRule, "the evaluator rejected the change (outcome reverted, regression or unhealthy)", AttemptEnded},
    {T::kAttemptConflict, "attempt.conflict", "number fork cause detail", kNoRule,
     "a parallel attempt clashed with a fix kept since it began: made again on a fresh fork", AttemptConflict},
    {T::kWorkerModelCall, "worker.model_call", "attempt detail latency_ms", kNoRule,
     "the Worker's model answered (detail: why it stopped)", WorkerModelCall},
    {T::kWorkerToolCall, "worker.tool_call", "attempt tool arguments reference_fix detail", kNoRule,
     "the Worker called a tool (detail: what it returned)", WorkerToolCall},
    {T::kWorkerRefused, "worker.refused", "attempt tool arguments reference_fix detail", kNoRule,
     "the command policy refused a tool call (detail: why)", WorkerToolCall},
    {T::kWorkerUnusableAnswer, "worker.unusable_answer", "attempt detail", kNoRule,
     "the Worker's model gave an answer that could not be used", WorkerNote},
    {T::kWorkerElided, "worker.elided", "attempt tool detail", kNoRule,
     "an old tool output was left out to fit the context window", WorkerNote},
    {T::kReflectorLesson, "reflector.lesson", "number lesson why_failed next never latency_ms", kNoRule,
     "the Reflector's lesson from a rejected attempt", ReflectorLesson},
    {T::kReflectorFailed, "reflector.failed", "number error latency_ms", kNoRule,
     "no usable lesson: the attempt is recorded without one", ReflectorFailed},
    {T::kPromptTrimmed, "prompt.trimmed", "sections", kNoRule, "a role's prompt was cut to fit its context window",
     PromptTrimmed},
    {T::kRebootConfirmed, "reboot.confirmed", "rules note", kNoRule,
     "a person said the host rebooted: the staged fixes are verified next", RebootConfirmed},
    {T::kRebootVerified, "reboot.verified", "fixed escalated confirmed_seq results_dir seconds", kNoRule,
     "the staged fixes were verified after the reboot", RebootVerified},
    {T::kRebootVerificationFailed, "reboot.verification_failed", "error confirmed_seq detail", kNoRule,
     "the verification could not run: the rules stay reboot_pending", Error},
};
static_assert(std::size(kSpecs) == kEventTypeCount);

constexpr bool InEnumOrder() {
  for (size_t i = 0; i < std::size(kSpecs); ++i) {
    if (static_cast<size_t>(kSpecs[i].type) != i) return false;
  }
  return true;
}
static_assert(InEnumOrder(), "kSpecs must list the types in EventType order");

}  // namespace

std::span<const EventSpec> EventSpecs() { return kSpecs; }

const EventSpec& SpecOf(EventType type) { return kSpecs[static_cast<size_t>(type)]; }

std::string_view EventTypeName(EventType type) { return SpecOf(type).name; }

std::optional<EventType> ParseEventType(std::string_view name) {
  for (const EventSpec& spec : kSpecs) {
    if (spec.name == name) return spec.type;
  }
  return std::nullopt;
}

std::string EventSentence(std::string_view type, const std::string& rule_id, const std::string& target,
                          const std::string& data_json) {
  json data = json::parse(data_json.empty() ? "{}" : data_json, nullptr, /*allow_exceptions=*/false);
  const EventView view{type, rule_id, target, data_json, data};
  std::optional<EventType> known = ParseEventType(type);
  if (!known || !data.is_object()) return Generic(view);
  return SpecOf(*known).describe(view);
}

}  // namespace temper
