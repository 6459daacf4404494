// Baseline: the non-LLM peer temper is measured against. On the same sandboxed target it scans,
// runs SCAP Security Guide's generated bash remediation for the failing rules (what
// `oscap xccdf generate fix` emits), scans again, and reports every rule's before/after verdict
// and the fix rate, overall and over the rules a rootfs can decide.
//
// The fix script is written into the target and run there with bash, in the sandbox, with no
// network. When the target has a package cache (package_cache.h), the packages the script
// `apt-get install`s are fetched into it first and the script runs with the target's apt able to
// install them offline, as the Worker's install_package does; without one, they can only come
// from the target's own apt cache (see rootfs_builder.h).
// Thread safety: as Target (single owner).
#pragma once

#include <string>
#include <vector>

#include "common/log.h"
#include "common/status.h"
#include "stig/health.h"
#include "stig/scap/classification.h"
#include "stig/scap/evaluator.h"
#include "stig/target.h"

namespace temper::stig {

struct BaselineOptions {
  // Rules to scan and fix; empty means the whole profile.
  std::vector<std::string> rule_ids;
  // Required: receives before/ and after/ (results.xml, arf.xml), fix.sh and fix.log.
  std::string output_dir;
  SandboxLimits fix_limits{std::chrono::minutes(30), std::uint64_t{4} << 30, 16 << 20};
  std::vector<HealthCheck> health_checks = DefaultHealthChecks();
  // Install the fix script's packages from the target's package cache when it has one.
  bool use_package_cache = true;
};

struct BaselineRule {
  std::string rule_id;
  Verdict before;
  Verdict after;
  Decidability decidability;
  bool has_fix = false;  // SSG ships a bash fix for it
  bool fixed() const { return before == Verdict::kFail && IsPassing(after); }
  bool broken() const { return IsPassing(before) && !IsPassing(after); }
};

struct BaselineReport {
  std::string datastream;
  std::string profile;
  std::string target;
  std::vector<BaselineRule> rules;
  double scan_before_seconds = 0;
  double fix_seconds = 0;
  double scan_after_seconds = 0;
  std::string fix_outcome;  // ProcessResult::Describe() of the fix script
  // The packages the fix script installs, as prepared in the package cache: those it could serve
  // and, with the reason, those it could not (e.g. "mfetp: not in the archive"). Both empty when
  // no package cache was used.
  std::vector<std::string> packages_prepared;
  std::vector<std::string> packages_unavailable;
  double prepare_seconds = 0;
  HealthReport health_before;
  HealthReport health_after;

  int FailingBefore(bool rootfs_only = false) const;
  int Fixed(bool rootfs_only = false) const;
  int Broken() const;  // passed before, not after
  // Fixed / failing before; 0 when nothing failed.
  double FixRate(bool rootfs_only = false) const;

  // Human report: totals, then each rule whose verdict changed or that still fails.
  std::string ToText() const;
  // Machine report: everything above plus every rule, as one JSON document.
  std::string ToJson() const;
};

// Runs the baseline on `target` (which it changes: snapshot first to keep the original).
// Errors: InvalidArgument without output_dir; evaluation and sandbox errors as their sources.
// A fix script that exits non-zero is recorded in fix_outcome, not an error (SSG's scripts
// continue past failing fixes, and the rescan is what counts).
Result<BaselineReport> RunBaseline(Target& target, const Evaluator& evaluator, const BaselineOptions& options,
                                   const Logger& log);

}  // namespace temper::stig
