#include "orchestrator/loop/start_order.h"

#include <algorithm>

#include <catch2/catch.hpp>

#include "stig/rootfs_fixture.h"

namespace temper {
namespace {

using stig::testing::FullRuleId;

std::vector<std::string> Ids(std::initializer_list<const char*> names) {
  std::vector<std::string> out;
  for (const char* n : names) out.push_back(FullRuleId(n));
  return out;
}

// A root without the smartcard packages' configuration; everything else is there.
bool ExistsWithoutSmartcard(const std::string& path) { return path.rfind("/etc/pam_pkcs11", 0) != 0; }

TEST_CASE("start order: package rules one at a time and first, rules editing one file at once") {
  const stig::Content& c = stig::testing::Ubuntu2004Stig();
  // Batch order: the rules that configure nothing a package brings come first.
  const auto rules = Ids({"sshd_disable_root_login", "accounts_umask_etc_login_defs", "accounts_maximum_age_login_defs",
                          "package_aide_installed", "package_chrony_installed"});
  StartOrder order(c, rules, ExistsWithoutSmartcard);
  CHECK(order.IsPackageRule(FullRuleId("package_aide_installed")));
  CHECK_FALSE(order.IsPackageRule(FullRuleId("sshd_disable_root_login")));

  // Nothing in flight: the first package rule first (the second waits for it), then the others.
  CHECK(order.Startable(rules, {}) == Ids({"package_aide_installed", "sshd_disable_root_login",
                                           "accounts_umask_etc_login_defs", "accounts_maximum_age_login_defs"}));
  // Beside aide and the umask rule: not the other package rule; the other login.defs rule, yes
  // (their commits merge).
  const auto pending = Ids({"sshd_disable_root_login", "accounts_maximum_age_login_defs", "package_chrony_installed"});
  CHECK(order.Startable(pending, {FullRuleId("package_aide_installed"), FullRuleId("accounts_umask_etc_login_defs")}) ==
        Ids({"sshd_disable_root_login", "accounts_maximum_age_login_defs"}));
  // Aide ended: chrony's turn.
  CHECK(order.Startable(Ids({"package_chrony_installed"}), {FullRuleId("sshd_disable_root_login")}) ==
        Ids({"package_chrony_installed"}));
}

TEST_CASE("start order: no rule starts before the package rules ahead of it in the batch have ended") {
  const stig::Content& c = stig::testing::Ubuntu2004Stig();
  const auto rules =
      Ids({"banner_etc_issue_net", "install_smartcard_packages", "smartcard_pam_enabled", "accounts_tmout"});
  StartOrder order(c, rules, ExistsWithoutSmartcard);
  CHECK_FALSE(order.WaitsForPackages(FullRuleId("smartcard_pam_enabled")));  // it names files the root has
  CHECK(order.Startable(rules, {}) == Ids({"install_smartcard_packages", "banner_etc_issue_net"}));
  CHECK(order.Startable(Ids({"smartcard_pam_enabled", "accounts_tmout"}), {FullRuleId("install_smartcard_packages")})
            .empty());
  // The package rule ended (fixed, escalated or skipped): the rules after it may start.
  CHECK(order.Startable(Ids({"smartcard_pam_enabled", "accounts_tmout"}), {}) ==
        Ids({"smartcard_pam_enabled", "accounts_tmout"}));
}

TEST_CASE("start order: a rule whose check names a missing file waits for every package rule") {
  const stig::Content& c = stig::testing::Ubuntu2004Stig();
  // Out of SSG's order: the smartcard rule before the package that brings its file.
  const auto rules = Ids({"smartcard_configure_ca", "banner_etc_issue_net", "install_smartcard_packages"});
  StartOrder order(c, rules, ExistsWithoutSmartcard);
  CHECK(order.WaitsForPackages(FullRuleId("smartcard_configure_ca")));
  CHECK_FALSE(order.WaitsForPackages(FullRuleId("banner_etc_issue_net")));

  // The package rule is pending, then in flight: the smartcard rule waits either way.
  CHECK(order.Startable(rules, {}) == Ids({"install_smartcard_packages", "banner_etc_issue_net"}));
  CHECK(order.Startable(Ids({"smartcard_configure_ca", "banner_etc_issue_net"}),
                        {FullRuleId("install_smartcard_packages")}) == Ids({"banner_etc_issue_net"}));
  CHECK(order.Startable(Ids({"smartcard_configure_ca"}), {}) == Ids({"smartcard_configure_ca"}));

  // On a root that has the file, nothing waits.
  StartOrder installed(c, rules, [](const std::string&) { return true; });
  CHECK_FALSE(installed.WaitsForPackages(FullRuleId("smartcard_configure_ca")));
}

TEST_CASE("start order: two audit rules whose SSG fixes group syscalls never start together") {
  const stig::Content& c = stig::testing::Ubuntu2004Stig();
  // SSG's fix of each: SYSCALL_GROUPING="chown fchown fchownat lchown" (chmod's: chmod fchmod
  // fchmodat); the privileged-command rules watch a path and group nothing.
  CHECK(AuditSyscallGrouping((*c.Rule(FullRuleId("audit_rules_dac_modification_chown")))->fix_bash) ==
        std::set<std::string>{"chown", "fchown", "fchownat", "lchown"});
  CHECK(AuditSyscallGrouping((*c.Rule(FullRuleId("audit_rules_unsuccessful_file_modification_creat")))->fix_bash) ==
        std::set<std::string>{"creat", "ftruncate", "truncate", "open", "openat", "open_by_handle_at"});
  CHECK(AuditSyscallGrouping((*c.Rule(FullRuleId("audit_rules_privileged_commands_sudo")))->fix_bash).empty());
  CHECK(AuditSyscallGrouping((*c.Rule(FullRuleId("sshd_disable_root_login")))->fix_bash).empty());

  const auto rules = Ids({"audit_rules_dac_modification_chown", "audit_rules_dac_modification_fchown",
                          "audit_rules_dac_modification_chmod", "audit_rules_privileged_commands_sudo",
                          "audit_rules_dac_modification_lchown", "sshd_disable_root_login"});
  StartOrder order(c, rules, [](const std::string&) { return true; });
  // One grouping (one line, rewritten two ways), and two groupings (adjacent lines).
  CHECK(order.BothRewriteAuditLines(FullRuleId("audit_rules_dac_modification_chown"),
                                    FullRuleId("audit_rules_dac_modification_fchown")));
  CHECK(order.BothRewriteAuditLines(FullRuleId("audit_rules_dac_modification_chown"),
                                    FullRuleId("audit_rules_dac_modification_chmod")));
  CHECK_FALSE(order.BothRewriteAuditLines(FullRuleId("audit_rules_dac_modification_chown"),
                                          FullRuleId("audit_rules_privileged_commands_sudo")));
  // Nothing in flight: any of them may be picked.
  CHECK(order.Startable(rules, {}) == rules);
  // chown in flight: neither fchown, lchown nor chmod; sudo's path watch and the sshd rule may
  // start beside it.
  const auto pending = std::vector<std::string>(rules.begin() + 1, rules.end());
  CHECK(order.Startable(pending, {FullRuleId("audit_rules_dac_modification_chown")}) ==
        Ids({"audit_rules_privileged_commands_sudo", "sshd_disable_root_login"}));
  // chown ended: the others' turn, one at a time.
  CHECK(order.Startable(Ids({"audit_rules_dac_modification_fchown", "audit_rules_dac_modification_lchown"}),
                        {FullRuleId("audit_rules_privileged_commands_sudo")}) ==
        Ids({"audit_rules_dac_modification_fchown", "audit_rules_dac_modification_lchown"}));
  CHECK(order
            .Startable(Ids({"audit_rules_dac_modification_lchown", "audit_rules_dac_modification_chmod"}),
                       {FullRuleId("audit_rules_dac_modification_fchown")})
            .empty());
}

TEST_CASE("start order: with nothing in flight some rule of the whole profile can always start") {
  const stig::Content& c = stig::testing::Ubuntu2004Stig();
  std::vector<std::string> pending = c.profile_rule_ids();
  StartOrder order(c, pending, ExistsWithoutSmartcard);
  size_t package_rules = 0, waiting = 0;
  for (const std::string& id : pending) {
    package_rules += order.IsPackageRule(id);
    waiting += order.WaitsForPackages(id);
  }
  CHECK(package_rules >= 5);
  CHECK(waiting >= 3);  // the smartcard rules at least
  // Start, run and end one rule at a time, always the last startable: every rule gets its turn.
  while (!pending.empty()) {
    const std::vector<std::string> startable = order.Startable(pending, {});
    REQUIRE_FALSE(startable.empty());
    pending.erase(std::find(pending.begin(), pending.end(), startable.back()));
  }
}

}  // namespace
}  // namespace temper
