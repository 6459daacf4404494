#include "stig/health.h"

#include <algorithm>

namespace temper::stig {

std::vector<HealthCheck> DefaultHealthChecks() {
  return {
      {"sshd-config", "/usr/sbin/sshd -t"},
      {"sudoers", "/usr/sbin/visudo -c"},
      {"passwd-files", "/usr/sbin/pwck -r"},
      // A login shell reads /etc/profile and /etc/profile.d, which STIG fixes edit (TMOUT).
      {"login-shell", "/bin/bash -l -c true"},
  };
}

bool HealthReport::healthy() const {
  return std::all_of(results.begin(), results.end(), [](const HealthResult& r) { return r.ok; });
}

std::vector<std::string> HealthReport::BrokenSince(const HealthReport* before) const {
  std::vector<std::string> broken;
  for (const auto& r : results) {
    if (r.ok) continue;
    bool was_ok = true;
    if (before) {
      auto it = std::find_if(before->results.begin(), before->results.end(),
                             [&](const HealthResult& b) { return b.name == r.name; });
      was_ok = it == before->results.end() || it->ok;
    }
    if (was_ok) broken.push_back(r.name);
  }
  return broken;
}

Result<HealthReport> CheckHealth(Target& target, const std::vector<HealthCheck>& checks, const SandboxLimits& limits) {
  HealthReport report;
  for (const auto& c : checks) {
    Result<ProcessResult> r = target.Run(c.command, limits);
    if (!r.ok()) return r.status().WithContext("health check " + c.name);
    std::string output = r->err.empty() ? r->out : r->err;
    if (output.size() > 500) output = output.substr(output.size() - 500);
    report.results.push_back(
        {c.name, c.command, r->Succeeded(), r->Describe() + (output.empty() ? "" : ": " + output)});
  }
  Result<std::vector<AccessCheck>> access = target.CheckAccess();
  if (!access.ok()) return access.status().WithContext("access check");
  for (AccessCheck& a : *access) report.results.push_back({a.name, a.method, a.ok, a.ok ? "ok" : a.detail});
  return report;
}

}  // namespace temper::stig
