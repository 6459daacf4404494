#include "orchestrator/loop/rule_policy.h"

#include <fmt/format.h>

#include "orchestrator/config/waivers.h"
#include "stig/scap/classification.h"
#include "stig/scap/rule_risk.h"

namespace temper {

namespace {

const Waiver* FindWaiver(const BatchOptions& options, const std::string& rule_id) {
  for (const Waiver& w : options.waivers) {
    if (w.rule_id == rule_id) return &w;
  }
  return nullptr;
}

nlohmann::json WaiverJson(const Waiver& w) {
  return {{"reason", w.reason},
          {"owner", w.owner},
          {"expires", w.expires_at ? nlohmann::json(FormatExpiry(*w.expires_at)) : nlohmann::json()}};
}

}  // namespace

PolicyDecision DecideRule(const stig::RuleInfo& rule, stig::Verdict before, const BatchOptions& options, TimeMs now,
                          bool target_is_live) {
  PolicyDecision d;
  const std::string verdict(stig::VerdictName(before));
  if (const Waiver* w = FindWaiver(options, rule.id)) {
    if (!w->ExpiredAt(now)) {
      d.state = RuleState::kWaived;
      d.detail = fmt::format("waived by {}: {}{}", w->owner, w->reason,
                             w->expires_at ? fmt::format(" (until {})", FormatExpiry(*w->expires_at)) : "");
      nlohmann::json data = WaiverJson(*w);
      data["before_verdict"] = verdict;
      d.events.push_back({EventType::kRuleWaived, std::move(data)});
      return d;
    }
    // Lapsed: the risk is no longer accepted, so the rule is treated as if it had no waiver.
    nlohmann::json data = WaiverJson(*w);
    data["detail"] = fmt::format("the waiver by {} expired on {}: the rule is remediated as usual", w->owner,
                                 FormatExpiry(*w->expires_at));
    d.events.push_back({EventType::kWaiverExpired, std::move(data)});
  }
  if (rule.classification.decidability == stig::Decidability::kManual) {
    d.state = RuleState::kManual;
    d.detail = fmt::format(
        "manual: SCAP Security Guide has no automated check for this rule (OpenSCAP: {}); a person "
        "must review it",
        verdict);
    d.events.push_back({EventType::kRuleManual, {{"before_verdict", verdict}}});
    return d;
  }
  if (!target_is_live && rule.classification.decidability == stig::Decidability::kLiveHost &&
      (before == stig::Verdict::kError || before == stig::Verdict::kUnknown)) {
    std::string reads;
    for (const std::string& t : rule.classification.live_test_types) reads += (reads.empty() ? "" : ", ") + t;
    d.state = RuleState::kSkipped;
    d.detail = fmt::format(
        "needs a live host: its check reads the running system ({}), which a root file system does not have "
        "(OpenSCAP: {}); run it against an SSH host",
        reads.empty() ? "runtime state" : reads, verdict);
    return d;
  }
  if (before != stig::Verdict::kFail || options.allow_disruptive) return d;
  stig::RuleRisk risk = stig::AssessRisk(rule);
  if (!risk.disruptive()) return d;
  d.state = RuleState::kHeld;
  d.detail = fmt::format(
      "held, not changed: disruptive ({}). To remediate it, submit it again allowing disruptive "
      "changes: temper submit --allow-disruptive (or allow_disruptive: true in the batch file)",
      risk.Explain());
  nlohmann::json reasons = nlohmann::json::array();
  for (stig::RiskReason r : risk.reasons) reasons.push_back(std::string(stig::RiskReasonName(r)));
  d.events.push_back({EventType::kRuleHeld, {{"reasons", reasons}, {"detail", d.detail}}});
  return d;
}

RuleState KeptFixState(const stig::RuleInfo& rule) {
  return rule.fix_metadata.reboot ? RuleState::kRebootPending : RuleState::kFixed;
}

}  // namespace temper
