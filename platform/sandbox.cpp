#include "platform/sandbox.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "platform/sandbox_seccomp.h"

namespace temper {
namespace {

// The OOM killer's score adjustment of every sandboxed process: the most it can be. When the host
// runs out of memory, what a target runs is what should go first (never temperd, never sshd).
constexpr int kSandboxOomScoreAdj = 1000;

}  // namespace

std::vector<std::string> SandboxArgv(const std::string& root, const std::string& command, int seccomp_fd,
                                     const SandboxExtras& extras) {
  std::vector<std::string> argv = {
      "/usr/bin/bwrap",
      "--bind",
      root,
      "/",
      "--proc",
      "/proc",
      // bubblewrap skips covering /proc/sys when access(2) calls it read-only, yet its files stay
      // writable to uid 0; and uid 0 here is the host's uid 0. Bind it read-only ourselves.
      "--ro-bind",
      "/proc/sys",
      "/proc/sys",
      "--dev",
      "/dev",
      "--unshare-net",
      "--unshare-pid",
      "--unshare-ipc",
      "--unshare-uts",
      "--unshare-cgroup-try",
      "--hostname",
      "temper-target",
      "--die-with-parent",
      // A new session: the command cannot push input into a terminal it inherited (TIOCSTI).
      "--new-session",
      // No namespaces of its own, no setns, no mounts, no bpf (sandbox_seccomp.h): uid 0 here is
      // the host's, so a user namespace of its own would let it mount its cgroup and lift its caps.
      "--seccomp",
      std::to_string(seccomp_fd),
      "--clearenv",
      "--setenv",
      "PATH",
      "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
      "--setenv",
      "HOME",
      "/root",
      "--setenv",
      "LC_ALL",
      "C",
      "--setenv",
      "DEBIAN_FRONTEND",
      "noninteractive",
      "--chdir",
      "/",
      // Docker's default capability set, less NET_RAW and MKNOD: enough for package installs,
      // chown/chmod and setuid programs; without CAP_SYS_ADMIN nothing can be remounted writable.
      "--cap-drop",
      "ALL",
  };
  for (const char* cap :
       {"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL", "CAP_SETGID",
        "CAP_SETUID", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_SETFCAP", "CAP_AUDIT_WRITE"}) {
    argv.insert(argv.end(), {"--cap-add", cap});
  }
  for (const auto& path : extras.tmpfs) argv.insert(argv.end(), {"--tmpfs", path});
  for (const auto& path : extras.dirs) argv.insert(argv.end(), {"--dir", path});
  for (const auto& m : extras.read_only_mounts) argv.insert(argv.end(), {"--ro-bind", m.host_path, m.sandbox_path});
  for (const auto& [name, value] : extras.env) argv.insert(argv.end(), {"--setenv", name, value});
  argv.insert(argv.end(), {"/bin/sh", "-c", command});
  return argv;
}

Result<ProcessResult> RunInSandbox(const std::string& root, const std::string& command, const SandboxLimits& limits,
                                   CgroupTree& cgroups, const SandboxCaps& caps, const SandboxExtras& extras) {
  if (::geteuid() != 0) {
    return Status::FailedPrecondition("the rootfs sandbox needs root on the host to map the id range");
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(root, ec)) return Status::NotFound("sandbox root " + root + " is not a directory");
  SandboxCaps effective = caps;
  if (limits.memory_limit_bytes > 0) effective.memory_bytes = std::min(caps.memory_bytes, limits.memory_limit_bytes);
  Result<std::unique_ptr<CommandCgroup>> cgroup = cgroups.NewCommand(effective);
  if (!cgroup.ok()) return Status::Unavailable(cgroup.status().message()).WithContext("making the sandbox's cgroup");
  CommandCgroup& cg = **cgroup;
  Result<UniqueFd> seccomp = SandboxSeccompFd();
  if (!seccomp.ok()) return seccomp.status().WithContext("preparing the sandbox over " + root);
  ProcessSpec spec;
  spec.argv = SandboxArgv(root, command, seccomp->get(), extras);
  spec.inherit_fds = {seccomp->get()};
  spec.timeout = limits.timeout;
  // The cgroup caps the memory of the whole command; a per-process address-space limit would only
  // make a single large process fail before the cap could name what happened.
  spec.memory_limit_bytes = 0;
  spec.max_output_bytes = limits.max_output_bytes;
  spec.new_user_namespace = true;
  // bubblewrap's pid 1 outlives bubblewrap: reaped here, its pid leaves the target's cgroup at once.
  spec.reap_orphans = true;
  spec.join_cgroup_fds = cg.join_fds();
  spec.oom_score_adj = kSandboxOomScoreAdj;
  spec.stop_when = [&] { return (limits.stop_requested && limits.stop_requested()) || cg.CapHit().has_value(); };
  Result<ProcessResult> r = RunProcess(spec);
  if (r.ok()) {
    if (std::optional<CapKind> hit = cg.CapHit()) r->cap_hit = CapHitMessage(*hit, effective);
  } else if (std::optional<CapKind> hit = cg.CapHit()) {
    // The start itself (the reaper's fork) was refused by a cap the target's other commands hold
    // at the moment: the command hit the cap before its first instruction, like one whose own
    // fork is refused, and says so the same way.
    ProcessResult refused;
    refused.exit_code = 127;
    refused.err = r.status().message() + "\n";
    refused.cap_hit = CapHitMessage(*hit, effective);
    r = std::move(refused);
  }
  Status removed = cg.Remove();
  if (!r.ok()) return r.status().WithContext("starting the sandbox over " + root);
  if (!removed.ok()) return Status::Unavailable(removed.message()).WithContext("ending the sandbox over " + root);
  return r;
}

}  // namespace temper
