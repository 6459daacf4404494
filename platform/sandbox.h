// Sandbox: runs a shell command inside bubblewrap with a root file system as "/".
//
// What a model (or an SSG fix script) runs on a rootfs target must not reach the host. The command
// runs as root of a user namespace (ids mapped 1:1, so file owners stay exact), in new network,
// pid, ipc, uts and cgroup namespaces, with only the target's tree, a private /proc and a minimal
// /dev mounted. Because sandbox uid 0 is host uid 0 for permission checks that look only at the
// uid (sysctl files do), the model is Docker's: /proc/sys is bound read-only, and capabilities
// are cut to Docker's default set less NET_RAW and MKNOD, so without CAP_SYS_ADMIN nothing can be
// remounted writable, and the user namespace gives no capability over host resources. The network
// namespace has only a loopback that is down, so the network is unreachable. A seccomp filter
// (sandbox_seccomp.h) refuses namespaces of the command's own, setns, every mount call and bpf:
// in a user namespace of its own that uid 0 would hold CAP_SYS_ADMIN again, could mount its
// cgroup's hierarchy and write its own caps away, since cgroupfs checks only the owner's uid.
//
// What the command may take of the host is capped by the kernel: it runs in a cgroup of its own
// (platform/cgroup.h) with the target's pids, memory and CPU caps (sandbox_caps.h), made before it
// starts and removed, with anything left in it, after it ends; hitting a cap ends the command at
// once and the result names the cap (ProcessResult::cap_hit). Its processes are the OOM killer's
// first choice on the host (oom_score_adj 1000). Time and output are bounded by the process
// runner, and killing bubblewrap (the pid namespace's init) ends every process inside.
//
// Requires root on the host (to map the id range, to make cgroups) and /usr/bin/bwrap.
// Thread safety: RunInSandbox is reentrant (the CgroupTree may be shared).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "platform/cgroup.h"
#include "platform/process.h"
#include "platform/sandbox_caps.h"

namespace temper {

struct SandboxLimits {
  std::chrono::milliseconds timeout{std::chrono::minutes(2)};
  // The memory the command may use. In a rootfs sandbox: all its processes together (its cgroup's
  // memory cap), never more than the target's SandboxCaps::memory_bytes; 0 means that cap. On an
  // SSH host: each process's address space (ulimit -v); 0 means unlimited.
  std::uint64_t memory_limit_bytes = std::uint64_t{2} << 30;
  std::size_t max_output_bytes = 1 << 20;
  // Asked about every 100 ms while a rootfs sandbox's command runs: true ends it at once (the
  // result is `stopped`), e.g. when the batch is cancelled or temperd stops. Empty: never.
  std::function<bool()> stop_requested;
};

struct SandboxMount {
  std::string host_path;     // a file or directory; symlinks are followed
  std::string sandbox_path;  // read-only inside
};

// What one command sees besides the target's tree, e.g. the host's package cache (package_cache.h).
// Applied in this order: each `tmpfs` path gets an empty tmpfs, `dirs` are made, then the read-only
// mounts are bound. A path that does not exist in the target would be created in the target's tree
// as the mount point, so the tmpfs paths must exist there, and `dirs` and mounts must lie inside a
// tmpfs; then the command leaves no trace of them in the target.
struct SandboxExtras {
  std::vector<std::string> tmpfs;
  std::vector<std::string> dirs;
  std::vector<SandboxMount> read_only_mounts;
  std::vector<std::pair<std::string, std::string>> env;  // set after the sandbox's own variables
};

// The bwrap argv that RunInSandbox executes (for logs and tests); bwrap reads the seccomp filter
// (sandbox_seccomp.h) from `seccomp_fd`, which the child must inherit.
std::vector<std::string> SandboxArgv(const std::string& root, const std::string& command, int seccomp_fd,
                                     const SandboxExtras& extras = {});

// Runs `/bin/sh -c command` in the sandbox over `root`, in a new cgroup under `cgroups` with
// `caps` (memory lowered to limits.memory_limit_bytes when that is smaller). A command that fails
// or hits a cap is not an error (see ProcessResult: cap_hit, stopped); errors are IOError/
// Unavailable when the sandbox or its cgroup cannot be made or emptied, NotFound when `root` is
// not a directory, and FailedPrecondition when not running as root.
Result<ProcessResult> RunInSandbox(const std::string& root, const std::string& command, const SandboxLimits& limits,
                                   CgroupTree& cgroups, const SandboxCaps& caps, const SandboxExtras& extras = {});

}  // namespace temper
