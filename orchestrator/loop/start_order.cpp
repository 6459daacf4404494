#include "orchestrator/loop/start_order.h"

#include <algorithm>

namespace temper {

StartOrder::StartOrder(const stig::Content& content, const std::vector<std::string>& rule_ids,
                       const std::function<bool(const std::string&)>& exists)
    : content_(content) {
  for (const std::string& id : rule_ids) {
    Result<const stig::RuleInfo*> rule = content.Rule(id);
    if (!rule.ok()) continue;
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

bool StartOrder::Clash(const std::string& a, const std::string& b) const {
  if (IsPackageRule(a) && IsPackageRule(b)) return true;
  Result<const stig::RuleInfo*> ra = content_.Rule(a), rb = content_.Rule(b);
  return ra.ok() && rb.ok() && (*ra)->footprint.SharesFilesWith((*rb)->footprint);
}

std::vector<std::string> StartOrder::Startable(const std::vector<std::string>& pending,
                                               const std::set<std::string>& in_flight) const {
  auto is_package_rule = [&](const std::string& id) { return IsPackageRule(id); };
  const bool packages_outstanding = std::any_of(pending.begin(), pending.end(), is_package_rule) ||
                                    std::any_of(in_flight.begin(), in_flight.end(), is_package_rule);
  std::vector<std::string> out;
  for (const std::string& id : pending) {
    if (packages_outstanding && WaitsForPackages(id)) continue;
    if (std::none_of(in_flight.begin(), in_flight.end(), [&](const std::string& busy) { return Clash(id, busy); })) {
      out.push_back(id);
    }
  }
  return out;
}

}  // namespace temper
