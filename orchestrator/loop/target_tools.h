// TargetTools: the Worker's tools (roles/worker_tools.h) over a stig::Target, so the roles never see
// stig/ and the target never sees a model.
//
// Every call first asks `cancelled()`: once the batch is cancelled or the daemon stops, the tools
// answer Cancelled, which ends the Worker's attempt at its next step instead of after its budget;
// a command (or package install) running then is stopped within about 100 ms, not at its timeout.
// A command that hits one of the sandbox's caps (pids, memory, the writable layer's size) is a
// FailedPrecondition naming the cap, followed by its output, which the model is shown.
// Files are written root-owned, mode 0644, or 0755 when they start with "#!" (scripts the model
// writes to run next). Command output is stdout followed by stderr: the sandbox captures them on
// separate pipes, so their interleaving is not kept.
// Thread safety: as the Target (one owner).
#pragma once

#include <functional>

#include "roles/worker_tools.h"
#include "stig/target.h"

namespace temper {

class TargetTools final : public WorkerTools {
 public:
  // `target` must outlive the tools.
  TargetTools(stig::Target& target, std::function<bool()> cancelled)
      : target_(target), cancelled_(std::move(cancelled)) {}

  Result<CommandResult> RunCommand(const std::string& command, std::chrono::seconds timeout) override;
  Result<std::string> ReadFile(const std::string& path, size_t max_bytes) override;
  Status WriteFile(const std::string& path, const std::string& content) override;
  Result<std::string> InstallPackages(const std::vector<std::string>& names, std::chrono::seconds timeout) override;
  Result<std::string> RemovePackages(const std::vector<std::string>& names, bool purge,
                                     std::chrono::seconds timeout) override;

 private:
  Status CheckCancelled() const;
  // Limits of a Worker's command: `timeout`, the target's memory cap, stopped by `cancelled_`.
  temper::SandboxLimits Limits(std::chrono::seconds timeout) const;

  stig::Target& target_;
  std::function<bool()> cancelled_;
};

}  // namespace temper
