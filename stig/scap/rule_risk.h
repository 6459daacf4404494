// RuleRisk: is remediating a rule disruptive enough that a person must opt in first?
//
// Operators of STIG tooling lose keyboards to usbguard and `nousb`, applications to fapolicyd,
// software to package removals and boots to kernel arguments (see the users' notes in
// ../shared/notes/users-stig.md, rows 4 and 7). temper remediates such rules only when the batch
// opts in (allow_disruptive); otherwise the loop holds them. A rule is disruptive when:
//   1. SCAP Security Guide's own fix metadata says so (FixMetadata): disruption="high", or
//      reboot="true" (the change takes effect only at the next boot, so a mistake shows up then);
//   2. its SSG name matches one of a short list of patterns, for the risks SSG's metadata does
//      not mark (it rates package removals "low" and leaves FIPS and bootloader fixes unrated):
//        *fips*                      FIPS mode: changes the kernel's crypto, needs a reboot
//        *usbguard*                  blocks USB devices, keyboards included
//        *fapolicyd*                 denies execution of applications it does not know
//        mount_option_*_noexec       remounts a system mount: programs there stop running
//        mount_option_*_nosuid       as above, setuid programs there stop working
//        package_*_removed           removes software someone may depend on
//        kernel_module_*_disabled    takes away a driver (usb-storage, filesystems, protocols)
//        grub2_*, bootloader_*, zipl_*  kernel arguments and boot settings: a mistake stops the boot
//        sudo_remove_nopasswd        breaks automation that runs sudo without a password
// Measured on SSG 0.1.65's Ubuntu 20.04 content: 40 of the STIG profile's 191 rules are disruptive
// (34 of them by reboot metadata), 133 of the benchmark's 592 (tests/stig/scap/rule_risk_test.cpp pins these).
//
// Manual rules (no automated check) are not a risk tier: stig/scap/classification.h decides those.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "stig/scap/content.h"

namespace temper::stig {

enum class RiskReason {
  kHighDisruption,  // SSG: disruption="high"
  kNeedsReboot,     // SSG: reboot="true"
  kFipsMode,
  kUsbguard,
  kFapolicyd,
  kNoexecMount,
  kNosuidMount,
  kPackageRemoval,
  kKernelModule,
  kBootloader,
  kSudoNopasswd,
};

// "high_disruption", "reboot", "fips", "usbguard", "fapolicyd", "noexec_mount", "nosuid_mount",
// "package_removal", "kernel_module", "bootloader", "sudo_nopasswd".
std::string_view RiskReasonName(RiskReason reason);
// What the reason means to an operator ("its fix takes effect only after a reboot").
std::string_view RiskReasonText(RiskReason reason);

struct RuleRisk {
  std::vector<RiskReason> reasons;  // metadata first, then the name pattern; empty: not disruptive

  bool disruptive() const { return !reasons.empty(); }
  // The reasons for an operator, joined with "; ".
  std::string Explain() const;
};

RuleRisk AssessRisk(const RuleInfo& rule);

}  // namespace temper::stig
