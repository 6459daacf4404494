// Verification: the evaluator's whole judgement of one change to a target.
//
// A change is kept only when (1) OpenSCAP passes the rules it was meant to fix, (2) every rule
// that passed before still passes (no regression), and (3) no health check it passed before now
// fails. All three come from one OpenSCAP evaluation (the target rules and the regression set are
// batched into one load) and one round of health checks.
//
// The regression set is cut to what the change could affect when the caller knows every path it
// changed (changed_paths): a previously passing rule is re-checked only when its check reads one
// of them (check_footprint.h) or cannot be tied to paths. A change beneath /var/lib/dpkg (a package
// installed or removed) re-checks every rule: packages also decide which rules apply.
// Thread safety: as Target (single owner).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "stig/health.h"
#include "stig/scap/evaluator.h"
#include "stig/target.h"

namespace temper::stig {

struct VerificationRequest {
  std::vector<std::string> rule_ids;            // what the change should fix
  std::vector<std::string> previously_passing;  // re-checked for regressions
  std::vector<HealthCheck> health_checks = DefaultHealthChecks();
  // Health before the change; null counts every failing check as broken by it.
  const HealthReport* health_before = nullptr;
  SandboxLimits health_limits;
  std::string output_dir;  // where OpenSCAP writes results.xml and arf.xml; optional
  // Every path the change touched, when those are all it changed (Target::ChangesAreFilesOnly);
  // nullopt re-checks every previously passing rule.
  std::optional<std::vector<std::string>> changed_paths;
  // With changed_paths: evaluate every previously passing rule anyway, judge by all of them, and
  // report in filter_misses the ones the cut would have skipped that no longer pass.
  bool cross_check = false;
};

struct VerificationReport {
  std::vector<RuleVerdict> rules;          // verdicts of rule_ids
  std::vector<RuleVerdict> regressions;    // previously passing rules that no longer pass
  int regression_checked = 0;              // previously passing rules evaluated
  int regression_skipped = 0;              // cut: their checks read nothing the change touched
                                           // (evaluated all the same under cross_check)
  std::vector<RuleVerdict> filter_misses;  // cross_check: skipped, yet no longer passing
  HealthReport health;
  std::vector<std::string> broken_health;
  Evaluation evaluation;

  bool rules_pass() const;
  bool accepted() const { return rules_pass() && regressions.empty() && broken_health.empty(); }
  // One line: "accepted" or what went wrong ("regressions: a, b; health broken: sshd-config").
  std::string Summary() const;
};

// Errors only when the target cannot be evaluated or run commands (see Evaluator::Evaluate).
Result<VerificationReport> Verify(Target& target, const Evaluator& evaluator, const VerificationRequest& request);

}  // namespace temper::stig
