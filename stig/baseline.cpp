#include "stig/baseline.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "stig/package_install.h"

namespace temper::stig {
namespace {

namespace fs = std::filesystem;

constexpr const char* kFixPathInTarget = "/tmp/temper-baseline-fix.sh";

Result<std::string> Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::IOError("reading " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

Status Spit(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary);
  f << data;
  f.close();
  if (!f) return Status::IOError("writing " + path);
  return Status::OK();
}

std::string FirstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

// Fetches each package on its own (SSG installs alternatives, e.g. chrony and ntp, which conflict
// with each other), merging the files into one set for the fix script's run.
ResolvedPackages PrepareEach(Target& target, const std::vector<std::string>& packages, BaselineReport& report,
                             const Logger& log) {
  ResolvedPackages all;
  for (const std::string& name : packages) {
    Result<ResolvedPackages> one = target.PreparePackages({name});
    if (!one.ok()) {
      log.Warning("baseline: the package cache cannot serve {}: {}", name, one.status().message());
      report.packages_unavailable.push_back(name + ": " + FirstLine(one.status().message()));
      continue;
    }
    report.packages_prepared.push_back(name);
    all.requested.push_back(name);
    for (PackageFile& f : one->files) {
      bool seen = false;
      for (const PackageFile& g : all.files) seen = seen || g.file_name == f.file_name;
      if (!seen) all.files.push_back(std::move(f));
    }
  }
  return all;
}

std::string ShortId(const std::string& id) { return id.starts_with(kRulePrefix) ? id.substr(kRulePrefix.size()) : id; }

}  // namespace

int BaselineReport::FailingBefore(bool rootfs_only) const {
  int n = 0;
  for (const auto& r : rules) {
    if (r.before == Verdict::kFail && (!rootfs_only || r.decidability == Decidability::kRootfs)) ++n;
  }
  return n;
}

int BaselineReport::Fixed(bool rootfs_only) const {
  int n = 0;
  for (const auto& r : rules) {
    if (r.fixed() && (!rootfs_only || r.decidability == Decidability::kRootfs)) ++n;
  }
  return n;
}

int BaselineReport::Broken() const {
  int n = 0;
  for (const auto& r : rules) n += r.broken() ? 1 : 0;
  return n;
}

double BaselineReport::FixRate(bool rootfs_only) const {
  int failing = FailingBefore(rootfs_only);
  return failing == 0 ? 0.0 : static_cast<double>(Fixed(rootfs_only)) / failing;
}

std::string BaselineReport::ToText() const {
  std::map<Verdict, int> before, after;
  for (const auto& r : rules) {
    before[r.before]++;
    after[r.after]++;
  }
  auto counts = [](const std::map<Verdict, int>& m) {
    std::string s;
    for (const auto& [v, n] : m) s += fmt::format("{}{} {}", s.empty() ? "" : ", ", n, VerdictName(v));
    return s;
  };
  std::string out;
  out += fmt::format("SSG bash remediation baseline on target {}\n", target);
  out += fmt::format("content: {} profile {}, {} rules\n", datastream, profile, rules.size());
  out += fmt::format("before: {}\n", counts(before));
  out += fmt::format("after:  {}\n", counts(after));
  out +=
      fmt::format("fixed {} of {} failing rules ({:.1f}%); rootfs-decidable: {} of {} ({:.1f}%); broken {}\n", Fixed(),
                  FailingBefore(), 100 * FixRate(), Fixed(true), FailingBefore(true), 100 * FixRate(true), Broken());
  out += fmt::format("time: scan {:.1f} s, fix {:.1f} s ({}), rescan {:.1f} s\n", scan_before_seconds, fix_seconds,
                     fix_outcome, scan_after_seconds);
  if (!packages_prepared.empty() || !packages_unavailable.empty()) {
    std::string prepared;
    for (const auto& p : packages_prepared) prepared += (prepared.empty() ? "" : " ") + p;
    out +=
        fmt::format("packages from the cache ({:.1f} s): {}\n", prepare_seconds, prepared.empty() ? "none" : prepared);
    for (const auto& p : packages_unavailable) out += fmt::format("  not available: {}\n", p);
  }
  auto broken_health = health_after.BrokenSince(&health_before);
  std::string hb;
  for (const auto& h : broken_health) hb += (hb.empty() ? "" : ", ") + h;
  out += fmt::format("health after: {}\n", broken_health.empty() ? "as before" : "broken: " + hb);
  for (const auto& r : rules) {
    if (r.before == r.after && r.after != Verdict::kFail) continue;
    out += fmt::format("  {:>13} -> {:<13} {:<6} {}{}\n", VerdictName(r.before), VerdictName(r.after),
                       DecidabilityName(r.decidability), ShortId(r.rule_id), r.has_fix ? "" : " (no fix)");
  }
  return out;
}

std::string BaselineReport::ToJson() const {
  nlohmann::json j;
  j["target"] = target;
  j["datastream"] = datastream;
  j["profile"] = profile;
  j["failing_before"] = FailingBefore();
  j["fixed"] = Fixed();
  j["fix_rate"] = FixRate();
  j["failing_before_rootfs"] = FailingBefore(true);
  j["fixed_rootfs"] = Fixed(true);
  j["fix_rate_rootfs"] = FixRate(true);
  j["broken"] = Broken();
  j["seconds"] = {{"scan_before", scan_before_seconds}, {"fix", fix_seconds}, {"scan_after", scan_after_seconds}};
  j["fix_outcome"] = fix_outcome;
  j["packages"] = {{"prepared", packages_prepared},
                   {"unavailable", packages_unavailable},
                   {"seconds", prepare_seconds}};
  j["health_broken"] = health_after.BrokenSince(&health_before);
  nlohmann::json rs = nlohmann::json::array();
  for (const auto& r : rules) {
    rs.push_back({{"rule", r.rule_id},
                  {"before", VerdictName(r.before)},
                  {"after", VerdictName(r.after)},
                  {"decidability", DecidabilityName(r.decidability)},
                  {"has_fix", r.has_fix}});
  }
  j["rules"] = rs;
  return j.dump(2);
}

Result<BaselineReport> RunBaseline(Target& target, const Evaluator& evaluator, const BaselineOptions& options,
                                   const Logger& log) {
  if (options.output_dir.empty()) return Status::InvalidArgument("baseline: output_dir is required");
  const Content& content = evaluator.content();
  BaselineReport report;
  report.datastream = content.datastream_path();
  report.profile = content.profile().id;
  report.target = target.name();

  TEMPER_ASSIGN_OR_RETURN(report.health_before, CheckHealth(target, options.health_checks, SandboxLimits{}));

  EvaluationRequest scan;
  scan.rule_ids = options.rule_ids;
  scan.output_dir = (fs::path(options.output_dir) / "before").string();
  scan.write_fix_script = true;
  log.Info("baseline: scanning {} before remediation", target.name());
  TEMPER_ASSIGN_OR_RETURN(Evaluation before, target.Evaluate(evaluator, scan));
  report.scan_before_seconds = before.seconds;

  TEMPER_ASSIGN_OR_RETURN(std::string fix, Slurp(before.fix_script_path));
  TEMPER_RETURN_IF_ERROR(Spit((fs::path(options.output_dir) / "fix.sh").string(), fix));
  TEMPER_RETURN_IF_ERROR(target.WriteFile(kFixPathInTarget, fix, 0700));
  const std::string run_fix = fmt::format("bash {0}; rc=$?; rm -f {0}; exit $rc", kFixPathInTarget);
  std::optional<ResolvedPackages> packages;
  if (options.use_package_cache && target.CanInstallPackages()) {
    std::vector<std::string> wanted = PackagesInstalledBy(fix);
    log.Info("baseline: preparing {} package(s) the fixes install in the package cache", wanted.size());
    auto start = std::chrono::steady_clock::now();
    packages = PrepareEach(target, wanted, report, log);
    report.prepare_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  log.Info("baseline: running SSG's remediation for {} failing rule(s)", before.Counts()[Verdict::kFail]);
  TEMPER_ASSIGN_OR_RETURN(ProcessResult fixed, packages ? target.RunWithPackages(run_fix, options.fix_limits, *packages)
                                                        : target.Run(run_fix, options.fix_limits));
  report.fix_seconds = fixed.seconds;
  report.fix_outcome = fixed.Describe();
  TEMPER_RETURN_IF_ERROR(Spit((fs::path(options.output_dir) / "fix.log").string(),
                              fixed.out + (fixed.err.empty() ? "" : "\n--- stderr ---\n" + fixed.err)));

  scan.output_dir = (fs::path(options.output_dir) / "after").string();
  scan.write_fix_script = false;
  log.Info("baseline: rescanning {}", target.name());
  TEMPER_ASSIGN_OR_RETURN(Evaluation after, target.Evaluate(evaluator, scan));
  report.scan_after_seconds = after.seconds;
  TEMPER_ASSIGN_OR_RETURN(report.health_after, CheckHealth(target, options.health_checks, SandboxLimits{}));

  for (const auto& v : before.verdicts) {
    TEMPER_ASSIGN_OR_RETURN(Verdict a, after.VerdictOf(v.rule_id));
    const RuleInfo& info = content.rules().at(v.rule_id);
    report.rules.push_back({v.rule_id, v.verdict, a, info.classification.decidability, !info.fix_bash.empty()});
  }
  return report;
}

}  // namespace temper::stig
