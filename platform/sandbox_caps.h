// SandboxCaps: how much of the host a rootfs target's sandbox may take, and the byte sizes they are
// written in.
//
// Whatever runs in a target's sandbox (a model's command, a package's maintainer script) must not
// take the host with it: a fork bomb, a memory hog or a disk fill there has to end in the sandbox.
// Each command runs in a cgroup of its own with the pids, memory and CPU caps (platform/cgroup.h), and
// the target's writable layers live on a file system of fixed size (overlay_snapshots.h). Hitting a
// cap ends the command with an error that names the cap (CapHitMessage). temperd.yaml sets them
// (section `sandbox:`); these are the defaults.
//
// The rule: the caps are the target's, not each command's. The commands' cgroups lie in one cgroup
// of the target (its CgroupTree, shared with its forks) that has the same caps, so however many
// commands run at once (N parallel attempts, each on a fork) they share one set and the target
// never takes more than the caps; a command running alone may use all of them. The command cannot
// lift them: its sandbox may not make namespaces or mounts (sandbox_seccomp.h).
// Thread safety: values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace temper {

inline constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
inline constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

struct SandboxCaps {
  // Processes and threads of the target's commands together (cgroup pids.max): far above what a
  // package install forks at once, far below what takes a host down (pid_max is 4 million at most).
  std::uint32_t pids = 512;
  // Memory of the target's commands together, page cache and tmpfs included (memory.max; no swap
  // beyond it).
  std::uint64_t memory_bytes = 2 * kGiB;
  // CPU weight against temperd and other work (cgroup v2 cpu.weight, 1..10000; 100 is a peer's):
  // half a peer's share, so a busy sandbox never starves the daemon that must be able to stop it.
  std::uint32_t cpu_weight = 50;
  // Everything the target writes, frozen snapshots included: the size of its layers' file system.
  std::uint64_t disk_bytes = 8 * kGiB;

  // InvalidArgument naming the field: pids under 16, memory under 64 MiB, a weight outside
  // 1..10000, disk under 64 MiB (an ext4 file system smaller than that cannot hold a journal and a
  // package install).
  Status Validate() const;
};

// Which cap a command hit, for CapHitMessage.
enum class CapKind { kPids, kMemory, kDisk };

// "the command hit the sandbox's pids cap of 512", "... memory cap of 2 GiB",
// "the target's writable layer is full (cap 8 GiB)".
std::string CapHitMessage(CapKind kind, const SandboxCaps& caps);

// "8 GiB", "512 MiB", "1.5 GiB", "4096 bytes": binary units, for messages.
std::string FormatBytes(std::uint64_t bytes);
// The inverse for configuration: "8GiB", "8 GiB", "512MiB", "64KiB", "1TiB", or plain bytes.
// InvalidArgument naming the text for anything else (decimal units such as "8GB" included: they
// would be ambiguous) and for sizes past 2^63.
Result<std::uint64_t> ParseBytes(std::string_view text);

}  // namespace temper
