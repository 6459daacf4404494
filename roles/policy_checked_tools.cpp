#include "roles/policy_checked_tools.h"

namespace temper {

PolicyCheckedTools::PolicyCheckedTools(WorkerTools& target, const PolicyContext& policy)
    : target_(target),
      policy_(policy),
      read_target_([&target](const std::string& path, size_t max_bytes) { return target.ReadFile(path, max_bytes); }) {}

bool PolicyCheckedTools::Refuses(const Status& judgement) {
  last_call_refused_ = !judgement.ok();
  return last_call_refused_;
}

Result<CommandResult> PolicyCheckedTools::RunCommand(const std::string& command, std::chrono::seconds timeout) {
  if (Status judgement = CheckCommand(command, policy_, read_target_); Refuses(judgement)) return judgement;
  return target_.RunCommand(command, timeout);
}

Result<std::string> PolicyCheckedTools::ReadFile(const std::string& path, size_t max_bytes) {
  last_call_refused_ = false;
  return target_.ReadFile(path, max_bytes);
}

Status PolicyCheckedTools::WriteFile(const std::string& path, const std::string& content) {
  if (Status judgement = CheckWrite(path, content, policy_, read_target_); Refuses(judgement)) return judgement;
  return target_.WriteFile(path, content);
}

Result<std::string> PolicyCheckedTools::InstallPackages(const std::vector<std::string>& names,
                                                        std::chrono::seconds timeout) {
  last_call_refused_ = false;
  return target_.InstallPackages(names, timeout);
}

Result<std::string> PolicyCheckedTools::RemovePackages(const std::vector<std::string>& names, bool purge,
                                                       std::chrono::seconds timeout) {
  if (Status judgement = CheckPackageRemoval(names, policy_); Refuses(judgement)) return judgement;
  return target_.RemovePackages(names, purge, timeout);
}

}  // namespace temper
