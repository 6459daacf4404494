#include "orchestrator/loop/start_order.h"

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string_view>

namespace temper {

std::set<std::string> AuditSyscallGrouping(const std::string& fix_bash) {
  // `read -a syscall_grouping <<< $SYSCALL_GROUPING` reads it back: only the assignment has `="`.
  std::set<std::string> out;
  for (std::string_view assignment : {"SYSCALL_GROUPING=\"", "syscall_grouping=\""}) {
    for (size_t at = fix_bash.find(assignment); at != std::string::npos; at = fix_bash.find(assignment, at)) {
      at += assignment.size();
      const size_t end = fix_bash.find('"', at);
      if (end == std::string::npos) break;
      std::istringstream words(fix_bash.substr(at, end - at));
      for (std::string word; words >> word;) out.insert(word);
    }
  }
  return out;
}

bool StartOrder::BothRewriteAuditLines(const std::string& a, const std::string& b) const {
  return rewrite_audit_lines_.count(a) > 0 && rewrite_audit_lines_.count(b) > 0;
}

StartOrder::StartOrder(const stig::Content& content, const std::vector<std::string>& rule_ids,
                       const std::function<bool(const std::string&)>& exists) {
  for (const std::string& id : rule_ids) {
    position_.emplace(id, position_.size());
    Result<const stig::RuleInfo*> rule = content.Rule(id);
    if (!rule.ok()) continue;
    if (!AuditSyscallGrouping((*rule)->fix_bash).empty()) rewrite_audit_lines_.insert(id);
    const stig::CheckFootprint& footprint = (*rule)->footprint;
    if (footprint.ReadsOnlyPackages()) {
      package_rules_.insert(id);
      continue;
    }
    const std::vector<std::string> named = footprint.NamedPaths();
    if (std::any_of(named.begin(), named.end(), [&](const std::string& p) { return !exists(p); })) {
      waits_for_packages_.insert(id);
    }
  }
}

std::vector<std::string> StartOrder::Startable(const std::vector<std::string>& pending,
                                               const std::set<std::string>& in_flight) const {
  auto position = [&](const std::string& id) {
    auto it = position_.find(id);
    return it == position_.end() ? position_.size() : it->second;
  };
  // The first package rule of the batch not yet ended: no rule after it may start.
  size_t first_package = SIZE_MAX;
  auto note = [&](const std::string& id) {
    if (IsPackageRule(id)) first_package = std::min(first_package, position(id));
  };
  for (const std::string& id : in_flight) note(id);
  for (const std::string& id : pending) note(id);
  const bool package_in_flight =
      std::any_of(in_flight.begin(), in_flight.end(), [&](const std::string& id) { return IsPackageRule(id); });
  std::vector<std::string> out;
  for (const std::string& id : pending) {
    if (position(id) > first_package) continue;
    if (first_package != SIZE_MAX && WaitsForPackages(id)) continue;
    if (package_in_flight && IsPackageRule(id)) continue;
    if (std::any_of(in_flight.begin(), in_flight.end(),
                    [&](const std::string& f) { return BothRewriteAuditLines(id, f); }))
      continue;
    out.push_back(id);
  }
  std::stable_partition(out.begin(), out.end(), [&](const std::string& id) { return IsPackageRule(id); });
  return out;
}

}  // namespace temper
