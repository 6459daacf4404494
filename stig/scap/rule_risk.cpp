#include "stig/scap/rule_risk.h"

#include <optional>

#include <fmt/format.h>

namespace temper::stig {

namespace {

// The name after "_rule_" for SSG ids; other ids as they are.
std::string_view ShortName(std::string_view id) {
  return id.starts_with(kRulePrefix) ? id.substr(kRulePrefix.size()) : id;
}

bool Contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

bool Between(std::string_view s, std::string_view prefix, std::string_view suffix) {
  return s.size() > prefix.size() + suffix.size() && s.starts_with(prefix) && s.ends_with(suffix);
}

// The pattern list of rule_risk.h, in its order; at most one reason per rule.
std::optional<RiskReason> ReasonFromName(std::string_view name) {
  if (Contains(name, "fips")) return RiskReason::kFipsMode;
  if (Contains(name, "usbguard")) return RiskReason::kUsbguard;
  if (Contains(name, "fapolicyd")) return RiskReason::kFapolicyd;
  if (Between(name, "mount_option_", "_noexec")) return RiskReason::kNoexecMount;
  if (Between(name, "mount_option_", "_nosuid")) return RiskReason::kNosuidMount;
  if (Between(name, "package_", "_removed")) return RiskReason::kPackageRemoval;
  if (Between(name, "kernel_module_", "_disabled")) return RiskReason::kKernelModule;
  if (name.starts_with("grub2_") || name.starts_with("bootloader_") || name.starts_with("zipl_")) {
    return RiskReason::kBootloader;
  }
  if (name == "sudo_remove_nopasswd") return RiskReason::kSudoNopasswd;
  return std::nullopt;
}

}  // namespace

std::string_view RiskReasonName(RiskReason reason) {
  switch (reason) {
    case RiskReason::kHighDisruption:
      return "high_disruption";
    case RiskReason::kNeedsReboot:
      return "reboot";
    case RiskReason::kFipsMode:
      return "fips";
    case RiskReason::kUsbguard:
      return "usbguard";
    case RiskReason::kFapolicyd:
      return "fapolicyd";
    case RiskReason::kNoexecMount:
      return "noexec_mount";
    case RiskReason::kNosuidMount:
      return "nosuid_mount";
    case RiskReason::kPackageRemoval:
      return "package_removal";
    case RiskReason::kKernelModule:
      return "kernel_module";
    case RiskReason::kBootloader:
      return "bootloader";
    case RiskReason::kSudoNopasswd:
      return "sudo_nopasswd";
  }
  return "?";
}

std::string_view RiskReasonText(RiskReason reason) {
  switch (reason) {
    case RiskReason::kHighDisruption:
      return "SCAP Security Guide rates its fix's disruption high";
    case RiskReason::kNeedsReboot:
      return "its fix takes effect only after a reboot (SCAP Security Guide: reboot=true)";
    case RiskReason::kFipsMode:
      return "it switches the kernel's cryptography to FIPS mode";
    case RiskReason::kUsbguard:
      return "usbguard blocks USB devices, keyboards included";
    case RiskReason::kFapolicyd:
      return "fapolicyd denies running applications it does not know";
    case RiskReason::kNoexecMount:
      return "noexec on a system mount stops programs there from running";
    case RiskReason::kNosuidMount:
      return "nosuid on a system mount stops setuid programs there from working";
    case RiskReason::kPackageRemoval:
      return "its fix removes a package that something may depend on";
    case RiskReason::kKernelModule:
      return "its fix takes a kernel module (a driver) away";
    case RiskReason::kBootloader:
      return "it changes kernel arguments or boot settings: a mistake stops the boot";
    case RiskReason::kSudoNopasswd:
      return "removing NOPASSWD breaks automation that runs sudo without a password";
  }
  return "?";
}

std::string RuleRisk::Explain() const {
  std::string out;
  for (RiskReason r : reasons) out += fmt::format("{}{}", out.empty() ? "" : "; ", RiskReasonText(r));
  return out;
}

RuleRisk AssessRisk(const RuleInfo& rule) {
  RuleRisk risk;
  if (rule.fix_metadata.disruption == "high") risk.reasons.push_back(RiskReason::kHighDisruption);
  if (rule.fix_metadata.reboot) risk.reasons.push_back(RiskReason::kNeedsReboot);
  if (std::optional<RiskReason> named = ReasonFromName(ShortName(rule.id))) risk.reasons.push_back(*named);
  return risk;
}

}  // namespace temper::stig
