// PolicyCheckedTools: the Worker's tools behind the command policy (policy/command_policy.h), as a
// decorator over the tools the orchestrator gives the Worker. Every command, file write and package
// removal is judged first; one the policy refuses never reaches the target, and the call returns
// the refusal. A refusal is shown to the model and counted as one (WorkerEvent::kRefused), which a
// target's own error is not, so last_call_refused() says which of the two an error was. The
// policy reads the scripts a command runs, and the files it copies where they run later, from the
// target itself (unjudged: reading is not what the policy guards).
// Thread safety: as WorkerTools (one Worker at a time).
#pragma once

#include "policy/command_policy.h"
#include "roles/worker_tools.h"

namespace temper {

class PolicyCheckedTools final : public WorkerTools {
 public:
  PolicyCheckedTools(WorkerTools& target, const PolicyContext& policy);

  Result<CommandResult> RunCommand(const std::string& command, std::chrono::seconds timeout) override;
  Result<std::string> ReadFile(const std::string& path, size_t max_bytes) override;
  Status WriteFile(const std::string& path, const std::string& content) override;
  Result<std::string> InstallPackages(const std::vector<std::string>& names, std::chrono::seconds timeout) override;
  Result<std::string> RemovePackages(const std::vector<std::string>& names, bool purge,
                                     std::chrono::seconds timeout) override;

  // Whether the policy refused the last call (its error is the refusal) rather than the target
  // answering it.
  bool last_call_refused() const { return last_call_refused_; }

 private:
  // Records whether `judgement` refused the call about to be made.
  bool Refuses(const Status& judgement);

  WorkerTools& target_;
  const PolicyContext policy_;
  const TargetFileReader read_target_;
  bool last_call_refused_ = false;
};

}  // namespace temper
