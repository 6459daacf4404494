// StartOrder: which pending rules may start beside the rules in flight, with parallel attempts
// (batch_loop.h). What two rules at once would cost at the serialized commit decides it:
//   - rules whose checks read a common file (CheckFootprint::SharesFilesWith) would clash when the
//     second lands: never at once;
//   - package rules (checks that read nothing but the package database: a package installed or
//     removed) all write dpkg's database, so the second to land always clashes: one at a time;
//   - a rule whose check names a file the known-good root lacks waits while package rules are
//     pending or in flight: the file may come with one of their packages (the smartcard rules read
//     /etc/pam_pkcs11/pam_pkcs11.conf, which install_smartcard_packages brings). On forks made
//     before that package landed such a rule fails every attempt; the serial loop gets the same
//     order from the profile's.
// With no rule in flight, some pending rule can always start: the loop cannot stall.
//
// Thread safety: immutable once built.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "stig/scap/content.h"

namespace temper {

class StartOrder {
 public:
  // `rule_ids`: the batch's rules; `exists` says whether a path is on the known-good root (asked
  // here, once per path a rule's check names). Rules the content does not hold are ignored.
  StartOrder(const stig::Content& content, const std::vector<std::string>& rule_ids,
             const std::function<bool(const std::string&)>& exists);

  // The rules of `pending` (in its order; none of them in flight) that may start beside `in_flight`.
  std::vector<std::string> Startable(const std::vector<std::string>& pending,
                                     const std::set<std::string>& in_flight) const;

  bool IsPackageRule(const std::string& rule_id) const { return package_rules_.count(rule_id) > 0; }
  bool WaitsForPackages(const std::string& rule_id) const { return waits_for_packages_.count(rule_id) > 0; }

 private:
  bool Clash(const std::string& a, const std::string& b) const;

  const stig::Content& content_;
  std::set<std::string> package_rules_;
  std::set<std::string> waits_for_packages_;
};

}  // namespace temper
