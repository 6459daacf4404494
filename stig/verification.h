// Verification: the evaluator's whole judgement of one change to a target.
//
// A change is kept only when (1) OpenSCAP passes the rules it was meant to fix, (2) every rule
// that passed before still passes (no regression), and (3) no health check it passed before now
// fails. All three come from one OpenSCAP evaluation (the target rules and the regression set are
// batched into one load) and one round of health checks.
// Thread safety: as Target (single owner).
#pragma once

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
};

struct VerificationReport {
  std::vector<RuleVerdict> rules;        // verdicts of rule_ids
  std::vector<RuleVerdict> regressions;  // previously passing rules that no longer pass
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
