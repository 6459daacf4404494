// StartOrder: which pending rules may start beside the rules in flight, with parallel attempts
// (batch_loop.h). What two rules at once would cost at the serialized commit decides it. Rules
// that edit one file (the audit rules' rules.d, /etc/login.defs) may run at once: their commits
// merge line by line (stig/rootfs/line_merge.h) and are verified again. But:
//   - package rules (checks that read nothing but the package database: a package installed or
//     removed) all write dpkg's database, so the second to land always clashes: one at a time,
//     first among the startable rules so that they end early;
//   - a rule never starts before the package rules that come before it in the batch have ended:
//     SSG orders a package before the rules that configure it (install_smartcard_packages before
//     smartcard_pam_enabled, whose fix does nothing until the package is there), and on forks
//     made before that package landed such a rule fails every attempt. The serial loop gets this
//     from the batch's order;
//   - a rule whose check names a file the known-good root lacks waits for every package rule
//     pending or in flight, wherever it is in the batch: the file may come with one of their
//     packages (the smartcard rules read /etc/pam_pkcs11/pam_pkcs11.conf);
//   - two audit syscall rules whose SSG fixes group syscalls on one line never run at once. SSG's
//     bash fix for such a rule (fix_audit_syscall_rule) sets SYSCALL_GROUPING="chown fchown
//     fchownat lchown" and rewrites the existing rules.d line that holds any syscall of that group
//     (with the same arch, filters and auid) to add its own: two such fixes on forks rewrite that
//     one line two ways, the commit cannot merge them (attempt.conflict), and one is made again.
//     On the Ubuntu 20.04 STIG most remakes were these (bench/RESULTS.md). The signal is the
//     groupings' overlap (AuditSyscallGrouping): the chown, chmod, xattr, deletion, module and
//     unsuccessful-access families each share one group; rules with no group (a path watch,
//     execve with -C) append lines of their own, which merge.
// With no rule in flight the first pending rule of the batch, or the first pending package rule,
// can start: the loop cannot stall.
//
// Thread safety: immutable once built.
#pragma once

#include <functional>
#include <map>
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

  // The rules of `pending` (in batch order; none of them in flight) that may start beside
  // `in_flight`: a package rule first, then the others in batch order.
  std::vector<std::string> Startable(const std::vector<std::string>& pending,
                                     const std::set<std::string>& in_flight) const;

  bool IsPackageRule(const std::string& rule_id) const { return package_rules_.count(rule_id) > 0; }
  bool WaitsForPackages(const std::string& rule_id) const { return waits_for_packages_.count(rule_id) > 0; }
  // Whether the two rules' fixes rewrite one combined audit syscall line (groupings that overlap).
  bool ShareAuditLine(const std::string& a, const std::string& b) const;

 private:
  std::map<std::string, size_t> position_;  // in the batch
  std::set<std::string> package_rules_;
  std::set<std::string> waits_for_packages_;
  std::map<std::string, std::set<std::string>> audit_grouping_;  // rules whose fix groups syscalls
};

// The syscalls an SSG bash fix groups on one audit line: the words of every SYSCALL_GROUPING="..."
// assignment in `fix_bash` (fix_audit_syscall_rule's argument); empty for any other fix.
std::set<std::string> AuditSyscallGrouping(const std::string& fix_bash);

}  // namespace temper
