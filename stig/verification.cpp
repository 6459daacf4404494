#include "stig/verification.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

namespace temper::stig {

bool VerificationReport::rules_pass() const {
  return std::all_of(rules.begin(), rules.end(), [](const RuleVerdict& v) { return IsPassing(v.verdict); });
}

std::string VerificationReport::Summary() const {
  if (accepted()) return "accepted";
  std::vector<std::string> parts;
  std::string failing;
  for (const auto& v : rules) {
    if (!IsPassing(v.verdict))
      failing += fmt::format("{}{} ({})", failing.empty() ? "" : ", ", v.rule_id, VerdictName(v.verdict));
  }
  if (!failing.empty()) parts.push_back("not passing: " + failing);
  std::string reg;
  for (const auto& v : regressions)
    reg += fmt::format("{}{} ({})", reg.empty() ? "" : ", ", v.rule_id, VerdictName(v.verdict));
  if (!reg.empty()) parts.push_back("regressions: " + reg);
  if (!broken_health.empty()) {
    std::string h;
    for (const auto& name : broken_health) {
      for (const auto& r : health.results) {
        if (r.name == name) h += fmt::format("{}{} [{}]", h.empty() ? "" : ", ", name, r.detail);
      }
    }
    parts.push_back("health broken: " + h);
  }
  std::string s;
  for (const auto& p : parts) s += (s.empty() ? "" : "; ") + p;
  return s;
}

namespace {

// Whether the previously passing rule `id` must be re-checked after a change to `changed`.
bool MayBeAffected(const Content& content, const std::string& id, const std::vector<std::string>& changed) {
  Result<const RuleInfo*> rule = content.Rule(id);
  return !rule.ok() || (*rule)->footprint.Touches(changed);
}

bool ChangesPackages(const std::vector<std::string>& changed) {
  return std::any_of(changed.begin(), changed.end(),
                     [](const std::string& p) { return p == "/var/lib/dpkg" || p.starts_with("/var/lib/dpkg/"); });
}

}  // namespace

Result<VerificationReport> Verify(Target& target, const Evaluator& evaluator, const VerificationRequest& request) {
  const Content& content = evaluator.content();
  std::vector<std::string> wanted, previous;
  for (const auto& id : request.rule_ids) {
    TEMPER_ASSIGN_OR_RETURN(std::string full, content.ResolveRuleId(id));
    wanted.push_back(full);
  }
  for (const auto& id : request.previously_passing) {
    TEMPER_ASSIGN_OR_RETURN(std::string full, content.ResolveRuleId(id));
    previous.push_back(full);
  }
  // The regression rules the change may affect; the rest are skipped unless cross-checked.
  std::set<std::string> skipped;
  if (request.changed_paths && !ChangesPackages(*request.changed_paths)) {
    for (const auto& id : previous) {
      if (!MayBeAffected(content, id, *request.changed_paths)) skipped.insert(id);
    }
  }
  const bool evaluate_skipped = request.cross_check;
  // One batch: the rules under change and the regression set, each once.
  std::vector<std::string> batch = wanted;
  std::set<std::string> seen(wanted.begin(), wanted.end());
  for (const auto& id : previous) {
    if ((evaluate_skipped || !skipped.count(id)) && seen.insert(id).second) batch.push_back(id);
  }
  VerificationReport report;
  report.regression_skipped = static_cast<int>(skipped.size());
  if (!batch.empty()) {
    EvaluationRequest er;
    er.rule_ids = batch;
    er.output_dir = request.output_dir;
    TEMPER_ASSIGN_OR_RETURN(report.evaluation, target.Evaluate(evaluator, er));
    for (const auto& id : wanted) {
      TEMPER_ASSIGN_OR_RETURN(Verdict v, report.evaluation.VerdictOf(id));
      report.rules.push_back({id, v});
    }
    for (const auto& id : previous) {
      const bool cut = skipped.count(id) > 0;
      if (cut && !evaluate_skipped) continue;
      ++report.regression_checked;
      TEMPER_ASSIGN_OR_RETURN(Verdict v, report.evaluation.VerdictOf(id));
      if (IsPassing(v)) continue;
      report.regressions.push_back({id, v});
      if (cut) report.filter_misses.push_back({id, v});
    }
  }
  TEMPER_ASSIGN_OR_RETURN(report.health, CheckHealth(target, request.health_checks, request.health_limits));
  report.broken_health = report.health.BrokenSince(request.health_before);
  return report;
}

}  // namespace temper::stig
