// Sandbox: runs a shell command inside bubblewrap with a root file system as "/".
//
// What a model (or an SSG fix script) runs on a rootfs target must not reach the host. The command
// runs as root of a user namespace (ids mapped 1:1, so file owners stay exact), in new network,
// pid, ipc, uts and cgroup namespaces, with only the target's tree, a private /proc and a minimal
// /dev mounted. Because sandbox uid 0 is host uid 0 for permission checks that look only at the
// uid (sysctl files do), the model is Docker's: /proc/sys is bound read-only, and capabilities
// are cut to Docker's default set less NET_RAW and MKNOD, so without CAP_SYS_ADMIN nothing can be
// remounted writable, and the user namespace gives no capability over host resources. The network
// namespace has only a loopback that is down, so the network is unreachable. Time, memory (RLIMIT_AS) and output are bounded by the
// process runner, and killing bubblewrap (the pid namespace's init) ends every process inside.
//
// Requires root on the host (to map the id range) and /usr/bin/bwrap.
// Thread safety: RunInSandbox is reentrant.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "stig/process.h"

namespace temper::stig {

struct SandboxLimits {
  std::chrono::milliseconds timeout{std::chrono::minutes(2)};
  std::uint64_t memory_limit_bytes = std::uint64_t{2} << 30;
  std::size_t max_output_bytes = 1 << 20;
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

// The bwrap argv that RunInSandbox executes (for logs and tests).
std::vector<std::string> SandboxArgv(const std::string& root, const std::string& command,
                                     const SandboxExtras& extras = {});

// Runs `/bin/sh -c command` in the sandbox over `root`. A command that fails is not an error (see
// ProcessResult); errors are IOError/Unavailable when the sandbox cannot start, NotFound when
// `root` is not a directory, and FailedPrecondition when not running as root.
Result<ProcessResult> RunInSandbox(const std::string& root, const std::string& command, const SandboxLimits& limits,
                                   const SandboxExtras& extras = {});

}  // namespace temper::stig
