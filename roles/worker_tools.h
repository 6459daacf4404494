// WorkerTools: what the Worker can do on a target, as an interface the orchestrator implements over
// a stig/ target (rootfs sandbox, SSH host) — roles/ never depends on stig/. The policy
// (policy/command_policy, applied by roles/policy_checked_tools.h) has already approved every command
// and path that reaches these methods.
//
// Errors: a Status whose code says whether the attempt can go on. InvalidArgument, NotFound,
// PermissionDenied, FailedPrecondition and IOError describe the request (a missing file, a
// directory that does not exist) and are shown to the model as the tool's result; any other code
// (Unavailable, Internal, DataLoss, ...) means the target itself failed and ends the attempt.
// Thread safety: one Worker drives one WorkerTools at a time.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "common/status.h"

namespace temper {

struct CommandResult {
  int exit_status = 0;     // 128+N when killed by signal N
  std::string output;      // stdout and stderr interleaved as the command wrote them
  bool timed_out = false;  // killed at the timeout
};

class WorkerTools {
 public:
  virtual ~WorkerTools() = default;
  // Runs `command` with /bin/sh -c as root on the target, killed after `timeout`.
  virtual Result<CommandResult> RunCommand(const std::string& command, std::chrono::seconds timeout) = 0;
  // At most `max_bytes` of the file (more need not be read).
  virtual Result<std::string> ReadFile(const std::string& path, size_t max_bytes) = 0;
  // Creates or replaces the file.
  virtual Status WriteFile(const std::string& path, const std::string& content) = 0;
  // Installs Debian packages and what they depend on with the target's own package manager, from
  // the package source the daemon keeps for the target (targets may have no network). Returns the
  // report to show the model (what was set up). `names` are package names the Worker has checked
  // to be non-empty strings; NotFound for a package not in the archive, FailedPrecondition for
  // conflicts, failing maintainer scripts or a target that cannot install packages.
  virtual Result<std::string> InstallPackages(const std::vector<std::string>& names, std::chrono::seconds timeout) = 0;
  // Removes packages (`purge`: with their configuration files); the policy has approved the names.
  // FailedPrecondition when the removal would take other packages along (they are named).
  virtual Result<std::string> RemovePackages(const std::vector<std::string>& names, bool purge,
                                             std::chrono::seconds timeout) = 0;
};

}  // namespace temper
