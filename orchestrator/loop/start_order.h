// StartOrder: which pending rules may start beside the rules in flight, with parallel attempts
// (batch_loop.h). What two rules at once would cost at the serialized commit decides it. Rules
// that edit one file (the audit rules' rules.d, /etc/login.defs) may run at once: their commits
// merge line by line (stig/line_merge.h) and are verified again. But:
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
//   - two audit syscall rules whose SSG fixes group syscalls never run at once. SSG's bash fix for
//     such a rule (fix_audit_syscall_rule) sets SYSCALL_GROUPING="chown fchown fchownat lchown"
//     (its family's syscalls) and rewrites the existing line holding any syscall of that group
//     (same arch, filters and auid) to add its own, in rules.d/<key>.rules and, for auditctl, in
//     /etc/audit/audit.rules. Two fixes of one family on forks rewrite that one line two ways; two
//     of different families rewrite lines that sit next to each other in audit.rules (the fixes
//     append them in turn), and a line merge takes changes to adjacent lines for one clash too.
//     Either way the second commit cannot merge (attempt.conflict) and its attempt is made again:
//     on the Ubuntu 20.04 STIG most remakes were these (bench/RESULTS.md). Measured on the loop's
//     16-rule serial-versus-auto batch at N = 2 (tests/loop/loop_e2e_test.cpp): no order, 5
//     remakes; apart only when groupings overlap, 1 and 4 (fchmod beside a chown rule); every
//     grouping fix apart, 0. The signal is a SYSCALL_GROUPING assignment in the fix text
//     (AuditSyscallGrouping): the chown, chmod, xattr, deletion, module and unsuccessful-access
//     families; rules that group nothing (a path watch, execve with -C) only append lines of their
//     own, which merge, and run beside them.
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
  // Whether both rules' fixes rewrite combined audit syscall lines (both group syscalls), so that
  // they may not run at once.
  bool BothRewriteAuditLines(const std::string& a, const std::string& b) const;

 private:
  std::map<std::string, size_t> position_;  // in the batch
  std::set<std::string> package_rules_;
  std::set<std::string> waits_for_packages_;
  std::set<std::string> rewrite_audit_lines_;  // rules whose fix groups syscalls
};

// The syscalls an SSG bash fix groups on one audit line: the words of every SYSCALL_GROUPING="..."
// assignment in `fix_bash` (fix_audit_syscall_rule's argument); empty for any other fix.
std::set<std::string> AuditSyscallGrouping(const std::string& fix_bash);

}  // namespace temper
