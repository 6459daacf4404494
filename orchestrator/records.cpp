#include "orchestrator/records.h"

#include <chrono>
#include <ctime>

#include <fmt/chrono.h>
#include <fmt/format.h>

namespace temper {

TimeMs NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

namespace {

constexpr std::string_view kBatchStateNames[] = {"queued", "running", "completed", "cancelled", "failed"};
static_assert(std::size(kBatchStateNames) == kBatchStateCount);
constexpr std::string_view kRuleStateNames[] = {
    "pending", "running", "fixed",  "already_passing", "escalated", "skipped", "cancelled",
    "error",   "waived",  "manual", "reboot_pending",  "held",      "reverted"};
static_assert(std::size(kRuleStateNames) == kRuleStateCount);
constexpr std::string_view kAttemptOutcomeNames[] = {"kept", "reverted", "regression", "unhealthy"};

}  // namespace

std::string_view BatchStateName(BatchState state) { return kBatchStateNames[static_cast<int>(state)]; }
std::string_view RuleStateName(RuleState state) { return kRuleStateNames[static_cast<int>(state)]; }

std::string_view AttemptOutcomeName(AttemptOutcome outcome) { return kAttemptOutcomeNames[static_cast<int>(outcome)]; }

std::optional<AttemptOutcome> ParseAttemptOutcome(std::string_view name) {
  for (size_t i = 0; i < std::size(kAttemptOutcomeNames); ++i) {
    if (kAttemptOutcomeNames[i] == name) return static_cast<AttemptOutcome>(i);
  }
  return std::nullopt;
}

std::optional<BatchState> ParseBatchState(std::string_view name) {
  for (size_t i = 0; i < std::size(kBatchStateNames); ++i) {
    if (kBatchStateNames[i] == name) return static_cast<BatchState>(i);
  }
  return std::nullopt;
}

std::optional<RuleState> ParseRuleState(std::string_view name) {
  for (size_t i = 0; i < std::size(kRuleStateNames); ++i) {
    if (kRuleStateNames[i] == name) return static_cast<RuleState>(i);
  }
  return std::nullopt;
}

bool IsFinal(BatchState state) {
  return state == BatchState::kCompleted || state == BatchState::kCancelled || state == BatchState::kFailed;
}

uint32_t BatchRecord::TotalRules() const {
  uint32_t total = 0;
  for (uint32_t c : rule_counts) total += c;
  return total;
}

bool IsFinal(RuleState state) { return state != RuleState::kPending && state != RuleState::kRunning; }

std::string EventDataJson(const nlohmann::json& data) {
  return data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string LessonProvenance(const LessonRecord& l) {
  if (l.target_class == kUnknownTargetClass || l.target.empty()) return "unknown (before provenance was recorded)";
  std::string out = fmt::format("learnt on {} {}",
                                l.target_class == kSshTargetClass ? "SSH host" : l.target_class + " target", l.target);
  if (l.batch_id) out += fmt::format(" in batch {}", *l.batch_id);
  if (l.created_at > 0) {
    out += fmt::format(" at {:%Y-%m-%d %H:%M} UTC", fmt::gmtime(static_cast<std::time_t>(l.created_at / 1000)));
  }
  if (!l.learnt_by.empty()) out += " by the " + l.learnt_by;
  return out;
}

}  // namespace temper
