// The risk tiers over SCAP Security Guide's real Ubuntu 20.04 content: the fix metadata as
// libopenscap reads it, and which rules the classifier holds back without the opt-in.
#include "stig/scap/rule_risk.h"

#include <map>
#include <set>

#include <catch2/catch.hpp>

#include "stig/rootfs_fixture.h"

namespace temper::stig {
namespace {

using testing::Ubuntu2004Stig;

const RuleInfo& R(const std::string& name) { return **Ubuntu2004Stig().Rule(name); }

std::vector<std::string> ReasonNames(const RuleInfo& rule) {
  std::vector<std::string> out;
  for (RiskReason r : AssessRisk(rule).reasons) out.emplace_back(RiskReasonName(r));
  return out;
}

TEST_CASE("fix metadata comes from the bash fix, else from another fix of the rule that declares it",
          "[stig][rule_risk]") {
  const FixMetadata& cramfs = R("kernel_module_cramfs_disabled").fix_metadata;
  CHECK(cramfs.declared);
  CHECK(cramfs.system == "urn:xccdf:fix:script:sh");
  CHECK(cramfs.reboot);
  CHECK(cramfs.disruption == "medium");
  CHECK(cramfs.complexity == "low");
  CHECK(cramfs.strategy == "disable");

  const FixMetadata& aide = R("package_aide_installed").fix_metadata;
  CHECK(aide.system == "urn:xccdf:fix:script:sh");
  CHECK_FALSE(aide.reboot);
  CHECK(aide.disruption == "low");
  CHECK(aide.strategy == "enable");

  // The bash fix of audit_rules_immutable declares nothing; its Ansible fix says reboot="true" (the
  // audit configuration is locked until the next boot).
  const FixMetadata& immutable = R("audit_rules_immutable").fix_metadata;
  CHECK(immutable.system == "urn:xccdf:fix:script:ansible");
  CHECK(immutable.reboot);
  CHECK(immutable.strategy == "restrict");

  // banner_etc_issue_net's bash fix declares nothing, its Ansible fix disruption="medium".
  const FixMetadata& banner = R("banner_etc_issue_net").fix_metadata;
  CHECK(banner.system == "urn:xccdf:fix:script:ansible");
  CHECK(banner.disruption == "medium");
  CHECK_FALSE(banner.reboot);

  // accounts_tmout has only a bash fix, declaring nothing: not declared, and no reboot.
  const FixMetadata& tmout = R("accounts_tmout").fix_metadata;
  CHECK_FALSE(tmout.declared);
  CHECK(tmout.system.empty());
  CHECK_FALSE(tmout.reboot);
  CHECK(tmout.disruption.empty());
  CHECK(tmout.strategy.empty());
}

TEST_CASE("named rules get the risk reasons of the documented list", "[stig][rule_risk]") {
  CHECK(ReasonNames(R("kernel_module_usb-storage_disabled")) == std::vector<std::string>{"reboot", "kernel_module"});
  CHECK(ReasonNames(R("is_fips_mode_enabled")) == std::vector<std::string>{"fips"});
  CHECK(ReasonNames(R("package_telnet_removed")) == std::vector<std::string>{"package_removal"});
  // SSG's Ansible fixes rate the /dev/shm mount options' disruption high (remounting a live mount).
  CHECK(ReasonNames(R("mount_option_dev_shm_noexec")) == std::vector<std::string>{"high_disruption", "noexec_mount"});
  CHECK(ReasonNames(R("mount_option_dev_shm_nosuid")) == std::vector<std::string>{"high_disruption", "nosuid_mount"});
  CHECK(ReasonNames(R("mount_option_dev_shm_nodev")) == std::vector<std::string>{"high_disruption"});
  CHECK(ReasonNames(R("fapolicyd_prevent_home_folder_access")) == std::vector<std::string>{"fapolicyd"});
  CHECK(ReasonNames(R("grub2_audit_argument")) == std::vector<std::string>{"bootloader"});
  CHECK(ReasonNames(R("grub2_disable_recovery")) == std::vector<std::string>{"reboot", "bootloader"});
  CHECK(ReasonNames(R("sudo_remove_nopasswd")) == std::vector<std::string>{"sudo_nopasswd"});
  CHECK(ReasonNames(R("audit_rules_immutable")) == std::vector<std::string>{"reboot"});
  CHECK(ReasonNames(R("sysctl_kernel_randomize_va_space")) == std::vector<std::string>{"reboot"});
  // Not disruptive: text settings, the owner of the grub config file, a package installation.
  for (const char* name : {"accounts_tmout", "banner_etc_issue_net", "sshd_disable_root_login", "file_owner_grub2_cfg",
                           "package_aide_installed"}) {
    INFO(name);
    CHECK_FALSE(AssessRisk(R(name)).disruptive());
  }
  CHECK(AssessRisk(R("package_telnet_removed")).Explain() == "its fix removes a package that something may depend on");
}

// Counts per reason over the 191 rules of the STIG profile and the 592 of the benchmark, pinned so a
// change to the content or to the classifier shows up here.
TEST_CASE("risk tiers over the whole Ubuntu 20.04 content", "[stig][rule_risk]") {
  const Content& c = Ubuntu2004Stig();
  auto tally = [&](const std::vector<std::string>& ids) {
    std::map<std::string, int> n;
    for (const std::string& id : ids) {
      const RuleInfo& rule = c.rules().at(id);
      RuleRisk risk = AssessRisk(rule);
      if (risk.disruptive()) ++n["disruptive"];
      if (rule.fix_metadata.declared) ++n["declared"];
      if (rule.classification.decidability == Decidability::kManual) ++n["manual"];
      for (RiskReason r : risk.reasons) ++n[std::string(RiskReasonName(r))];
    }
    return n;
  };
  std::vector<std::string> all;
  for (const auto& [id, rule] : c.rules()) all.push_back(id);
  // SSG 0.1.65: in the profile the disruptive rules are mostly the sysctl and audit rules whose fixes
  // SSG says need a reboot; "declared" counts rules with any fix metadata, "manual" those with no
  // OVAL check (content_test.cpp has the same 9).
  CHECK(tally(c.profile_rule_ids()) == std::map<std::string, int>{{"bootloader", 3},
                                                                  {"declared", 122},
                                                                  {"disruptive", 40},
                                                                  {"fips", 1},
                                                                  {"manual", 9},
                                                                  {"package_removal", 2},
                                                                  {"reboot", 34}});
  CHECK(tally(all) == std::map<std::string, int>{{"bootloader", 17},
                                                 {"declared", 361},
                                                 {"disruptive", 133},
                                                 {"fapolicyd", 1},
                                                 {"fips", 1},
                                                 {"high_disruption", 3},
                                                 {"kernel_module", 13},
                                                 {"manual", 32},
                                                 {"noexec_mount", 1},
                                                 {"nosuid_mount", 1},
                                                 {"package_removal", 23},
                                                 {"reboot", 88},
                                                 {"sudo_nopasswd", 1}});
}

}  // namespace
}  // namespace temper::stig
