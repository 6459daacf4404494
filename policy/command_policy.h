// The dangerous-command policy: what the Worker may never run on a target, checked before a
// command reaches it, whatever the model says. The aim is that no fix can lock the operator out
// or destroy the host: no reboot, shutdown or other switch of the system's state (systemctl start
// reboot.target, isolate, suspend), no stopping/disabling/killing sshd, no deleting or recursively
// re-owning system directories, no formatting or raw writes to block devices, no writes to
// host-killing kernel knobs (/proc/sysrq-trigger, /sys/power, core_pattern), no fork bombs, no
// taking the network down, no removing the packages that keep it reachable or bootable, no
// scheduling commands to run later unjudged (systemd-run, at, batch, crontab), no changing the
// command's own namespaces or limits (unshare, nsenter, cgexec, mounts of cgroup, proc, sysfs or
// bpf file systems: the rootfs sandbox forbids them itself, platform/sandbox_seccomp.h), and no
// bootloader edits unless the rule being fixed is about the bootloader. Removing any package is a
// disruptive change (software someone depends on goes away), allowed only when the batch opts in.
//
// It judges what will actually run:
//   - commands are split with policy/shell_split, so `true && sudo reboot`, `$(shutdown -h now)`,
//     `bash -c 'systemctl stop sshd'`, `env -S 'systemctl stop ssh'`, `flock /run/x reboot` and
//     `busybox reboot` are all seen; look-alikes that only mention a word (`grep reboot /etc/x`,
//     `systemctl status sshd`, `man shutdown`) are allowed;
//   - a program named by a variable is judged by the literal values the script gives that
//     variable (policy/shell_variables.h); one computed at run time (`$(cat x)`, `eval "$v"`,
//     `bash <<< "$x"`, `xargs sudo`) is refused;
//   - scripts are judged when they run, by their content read from the target (`bash /tmp/x`,
//     `sh x`, `./x`, `. x`, `source x`, a program outside the system's program directories); a
//     script that cannot be read, or that the same command line writes first, is refused by name;
//     code in other languages (python, perl, awk's system(), sed's e) is refused;
//   - files written where their content runs later (policy/execution_paths.h: cron, systemd units,
//     profile.d, bashrc, rc.local, sudoers, PAM, udev, modprobe, ...) are judged as the commands
//     they will become, whether written with write_file or by a command whose output, copied
//     file or sed edit the policy can see; a command that writes there what the policy cannot see
//     is refused.
// A command that cannot be parsed is refused (the policy cannot vouch for it).
//
// This is defense in depth. On a rootfs target the sandbox is the boundary; on an SSH host the
// policy, the lock-out guard (stig/ssh/login_guard.h), the host's own guards (stig/ssh/ssh_target.h) and
// the undo journal are.
//
// Errors: PermissionDenied with a message for the model: which part was refused, why, and what to
// do instead. Thread safety: pure functions (the reader is called on the caller's thread).
#pragma once

#include <cstddef>
#include <functional>
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

// Reads at most `max_bytes` of a file on the target (symlinks followed), for the policy to judge
// what a command will run: the scripts it executes and the files it copies where their content
// runs later. Errors are the target's (NotFound for a missing file) and end in a refusal naming
// the file.
using TargetFileReader = std::function<Result<std::string>(const std::string& path, size_t max_bytes)>;

// The largest file the policy reads to judge; a larger script is refused.
inline constexpr size_t kMaxJudgedFileBytes = size_t{1} << 20;

// True for rules whose fix is a bootloader or kernel command line change (grub2_*, bootloader_*,
// "boot loader" in the title).
bool IsBootloaderRule(std::string_view rule_id, std::string_view title);

Status CheckCommand(std::string_view command_line, const PolicyContext& context, const TargetFileReader& read);

// For remove_package (and, inside CheckCommand, apt-get/apt/aptitude remove|purge and dpkg -r|-P):
// refuses every removal unless context.allow_package_removal, and always the packages whose removal
// cuts off access or leaves the host unbootable (openssh-server, sudo, systemd, PAM, login, apt,
// dpkg, network managers, kernels, grub). One check for the tool and the commands alike.
Status CheckPackageRemoval(const std::vector<std::string>& names, const PolicyContext& context);

// For write_file: refuses block devices, /proc and /sys, bootloader files (unless allowed), and
// judges `content` written to an execution path as the commands the file will run.
Status CheckWrite(std::string_view path, std::string_view content, const PolicyContext& context,
                  const TargetFileReader& read);

}  // namespace temper
