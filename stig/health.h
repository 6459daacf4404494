// Health: does the target still work as a server after a change?
//
// A STIG fix can pass its own check and still lock people out: a bad sshd_config, a sudoers syntax
// error, a broken passwd file, a profile script that kills login shells. The loop runs these
// checks after every change and treats a check that passed before and fails now as a failed
// attempt, whatever OpenSCAP says about the rule.
// Thread safety: pure functions over a Target, which is itself single-owner.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "platform/sandbox.h"
#include "stig/target.h"

namespace temper::stig {

struct HealthCheck {
  std::string name;
  std::string command;  // run with /bin/sh -c in the target; exit 0 means healthy
};

// sshd -t, visudo -c, pwck -r, and a login shell that starts.
std::vector<HealthCheck> DefaultHealthChecks();

struct HealthResult {
  std::string name;
  std::string command;
  bool ok = false;
  std::string detail;  // how it ended and the tail of its output
};

struct HealthReport {
  std::vector<HealthResult> results;

  bool healthy() const;
  // Names of the checks that fail here but passed in `before` (every failing check when
  // `before` is null).
  std::vector<std::string> BrokenSince(const HealthReport* before) const;
};

// Runs every check in the target, then the target's own access checks (Target::CheckAccess). A
// check that fails is a result, not an error; errors mean the target could not run commands at all.
Result<HealthReport> CheckHealth(Target& target, const std::vector<HealthCheck>& checks, const SandboxLimits& limits);

}  // namespace temper::stig
