#include "stig/sandbox.h"

#include <unistd.h>

#include <filesystem>

namespace temper::stig {

std::vector<std::string> SandboxArgv(const std::string& root, const std::string& command,
                                     const SandboxExtras& extras) {
  std::vector<std::string> argv = {
      "/usr/bin/bwrap",
      "--bind", root, "/",
      "--proc", "/proc",
      // bubblewrap skips covering /proc/sys when access(2) calls it read-only, yet its files stay
      // writable to uid 0; and uid 0 here is the host's uid 0. Bind it read-only ourselves.
      "--ro-bind", "/proc/sys", "/proc/sys",
      "--dev", "/dev",
      "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
      "--hostname", "temper-target",
      "--die-with-parent",
      // A new session: the command cannot push input into a terminal it inherited (TIOCSTI).
      "--new-session",
      "--clearenv",
      "--setenv", "PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
      "--setenv", "HOME", "/root",
      "--setenv", "LC_ALL", "C",
      "--setenv", "DEBIAN_FRONTEND", "noninteractive",
      "--chdir", "/",
      // Docker's default capability set, less NET_RAW and MKNOD: enough for package installs,
      // chown/chmod and setuid programs; without CAP_SYS_ADMIN nothing can be remounted writable.
      "--cap-drop", "ALL",
  };
  for (const char* cap : {"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID",
                          "CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
                          "CAP_SYS_CHROOT", "CAP_SETFCAP", "CAP_AUDIT_WRITE"}) {
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
                                   const SandboxExtras& extras) {
  if (::geteuid() != 0) {
    return Status::FailedPrecondition("the rootfs sandbox needs root on the host to map the id range");
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(root, ec)) return Status::NotFound("sandbox root " + root + " is not a directory");
  ProcessSpec spec;
  spec.argv = SandboxArgv(root, command, extras);
  spec.timeout = limits.timeout;
  spec.memory_limit_bytes = limits.memory_limit_bytes;
  spec.max_output_bytes = limits.max_output_bytes;
  spec.new_user_namespace = true;
  Result<ProcessResult> r = RunProcess(spec);
  if (!r.ok()) return r.status().WithContext("starting the sandbox over " + root);
  return r;
}

}  // namespace temper::stig
