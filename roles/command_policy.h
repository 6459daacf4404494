// The dangerous-command policy: what the Worker may never run on a target, checked before a
// command reaches it, whatever the model says. The aim is that no fix can lock the operator out
// or destroy the host: no reboot or shutdown, no stopping/disabling/killing sshd, no deleting or
// recursively re-owning system directories, no formatting or raw writes to block devices, no
// taking the network down, no removing the packages that keep it reachable or bootable, and no
// bootloader edits unless the rule being fixed is about the bootloader. Removing any package is a
// disruptive change (software someone depends on goes away), allowed only when the batch opts in.
//
// Commands are split with roles/shell_split, so `true && sudo reboot`, `$(shutdown -h now)`,
// `bash -c 'systemctl stop sshd'` and `nohup env X=1 halt` are all seen; look-alikes that only
// mention a word (`grep reboot /etc/x`, `systemctl status sshd`, `man shutdown`) are allowed.
// A command that cannot be parsed is refused (the policy cannot vouch for it), and so is a shell
// running a script another command produces (`curl … | bash`, `bash <(curl …)`, `source <(…)`).
//
// Errors: PermissionDenied with a message for the model: which part was refused, why, and what to
// do instead. Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace temper {

struct PolicyContext {
  // The rule being fixed concerns the bootloader (grub), so editing its files is the fix itself.
  bool bootloader_rule = false;
  // The batch allows disruptive changes (allow_disruptive): packages other than the protected
  // ones may be removed. Without it every removal is refused.
  bool allow_package_removal = false;
};

// True for rules whose fix is a bootloader or kernel command line change (grub2_*, bootloader_*,
// "boot loader" in the title).
bool IsBootloaderRule(std::string_view rule_id, std::string_view title);

Status CheckCommand(std::string_view command_line, const PolicyContext& context);

// For remove_package (and, inside CheckCommand, apt-get/apt/aptitude remove|purge and dpkg -r|-P):
// refuses every removal unless context.allow_package_removal, and always the packages whose removal
// cuts off access or leaves the host unbootable (openssh-server, sudo, systemd, PAM, login, apt,
// dpkg, network managers, kernels, grub). One check for the tool and the commands alike.
Status CheckPackageRemoval(const std::vector<std::string>& names, const PolicyContext& context);

// For write_file: refuses bootloader files (unless allowed), block devices and /proc, /sys.
Status CheckWritePath(std::string_view path, const PolicyContext& context);

}  // namespace temper
