// The command policy's rules for one simple command on its own: what its program does, judged by
// name, options and operands — power and runlevel changes, systemctl switches of the system state,
// stopping sshd or the network, disks, recursive deletes and re-owning of system trees, package
// removals, killing sshd or init, firewall flushes, the bootloader, schedulers that run a command
// later (systemd-run, at, batch, crontab), writes to host-killing kernel knobs
// (/proc/sysrq-trigger, /sys/power, core_pattern, ...), code in languages other than the shell
// (python, perl, awk's system(), sed's e command), package files installed with their maintainer
// scripts, bind mounts, and a command changing its own namespaces or limits (unshare, nsenter,
// cgexec and their kind, in front of it or as it; mounts of cgroup, cgroup2, proc, sysfs and bpf
// file systems). What needs the rest of the command line or the target's files (scripts it runs,
// files whose content runs later, variables) is command_policy.cpp's.
//
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/lexical_path.h"
#include "policy/command_policy.h"
#include "policy/shell_split.h"

namespace temper {

struct Refusal {
  std::string why;      // what the command would do, for the model
  std::string instead;  // what to do instead
};

// Why the policy refuses `c` (its program, after runners), or nullopt.
std::optional<Refusal> JudgeSimpleCommand(const SimpleCommand& c, const PolicyContext& context);

// Every removal unless context.allow_package_removal; always the packages that keep the host
// reachable and bootable.
std::optional<Refusal> JudgeRemoval(const std::vector<std::string>& names, const PolicyContext& context);

// `unit` (".service" when it has no suffix) is sshd's service or socket, under any of its names.
bool IsSshUnit(std::string_view unit);
// Starting `unit` (".service" when it has no suffix) switches the host's state: power, kexec, rescue
// and emergency, sleep.
bool IsStateUnit(std::string_view unit);

// Writing `path` (normalized) would take the host down: /proc/sysrq-trigger, /sys/power, the
// kernel's helper programs, binfmt_misc, device removal, EFI variables. Empty when it would not.
std::string HostKillingKnob(std::string_view path);

bool IsBlockDevice(std::string_view path);
bool IsBootloaderPath(std::string_view path);

}  // namespace temper
