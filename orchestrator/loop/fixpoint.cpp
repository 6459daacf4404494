#include "orchestrator/loop/fixpoint.h"

#include <map>

#include <fmt/format.h>

namespace temper {

namespace {

// The states the loop reached by itself, and so may revisit.
bool Requeueable(RuleState state) {
  return state == RuleState::kFixed || state == RuleState::kAlreadyPassing || state == RuleState::kSkipped;
}

bool Passing(const std::string& verdict) { return verdict == "pass" || verdict == "fixed"; }

// Not applicable or not checked now is no failure: only these mean a passing rule broke.
bool Failing(stig::Verdict v) {
  return v == stig::Verdict::kFail || v == stig::Verdict::kError || v == stig::Verdict::kUnknown;
}

// Why `rule` counts as flipped with verdict `now`; "" when it does not.
std::string FlipReason(const BatchRuleRecord& rule, const std::string& was, stig::Verdict now) {
  if (!Requeueable(rule.state)) return "";
  const std::string_view now_name = stig::VerdictName(now);
  if (Passing(was) && Failing(now)) {
    return fmt::format("{} before, {} at the rescan: a later change broke it", was, now_name);
  }
  if (was == "notapplicable" && now == stig::Verdict::kFail) {
    return fmt::format("notapplicable before, {} at the rescan: a later change made it apply", now_name);
  }
  return "";
}

}  // namespace

FixpointDecision DecidePass(const BatchRecord& batch, const stig::Evaluation& rescan, uint32_t pass_number,
                            uint32_t max_passes, uint32_t attempts, uint32_t fixed) {
  std::map<std::string, stig::Verdict> now;
  for (const stig::RuleVerdict& v : rescan.verdicts) now.emplace(v.rule_id, v.verdict);

  FixpointDecision d;
  d.pass.pass = pass_number;
  d.pass.attempts = attempts;
  d.pass.fixed = fixed;
  for (const stig::RuleVerdict& v : rescan.verdicts) ++d.pass.verdicts[std::string(stig::VerdictName(v.verdict))];
  const bool at_bound = pass_number >= max_passes;
  for (const BatchRuleRecord& rule : batch.rules) {
    auto it = now.find(rule.rule_id);
    if (it == now.end()) continue;
    const std::string verdict(stig::VerdictName(it->second));
    const std::string& was = rule.after_verdict.empty() ? rule.before_verdict : rule.after_verdict;
    RuleUpdate update{.rule_id = rule.rule_id, .after_verdict = verdict};
    std::string reason = FlipReason(rule, was, it->second);
    if (!reason.empty()) {
      d.flips.push_back({rule.rule_id, was, verdict, reason});
      d.pass.flipped.push_back(rule.rule_id);
      if (at_bound) {
        update.state = RuleState::kEscalated;
        update.detail = fmt::format("still flipping after {} fixpoint pass{} (the bound): {}", pass_number,
                                    pass_number == 1 ? "" : "es", reason);
        d.pass.escalated.push_back(rule.rule_id);
      } else {
        update.state = RuleState::kPending;
        update.detail = fmt::format("re-queued by the fixpoint after pass {}: {}", pass_number, reason);
        d.pass.requeued.push_back(rule.rule_id);
      }
    }
    d.updates.push_back(std::move(update));
  }
  d.pass.final = d.pass.requeued.empty();
  return d;
}

}  // namespace temper
