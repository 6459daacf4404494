#include "orchestrator/loop/target_tools.h"

#include <algorithm>

#include <fmt/format.h>

#include "stig/package_install.h"

namespace temper {

namespace {
// Larger files (logs, databases) are not configuration a STIG fix edits through read_file.
constexpr size_t kLargestReadableFile = size_t{64} << 20;

std::string Report(const stig::PackageChange& change, std::string_view verb) {
  std::string out = change.changed.empty() ? fmt::format("nothing {}\n", verb) : "";
  for (const std::string& line : change.changed) out += line + "\n";
  return out + fmt::format("({:.1f} s)\n--- apt output ---\n{}", change.seconds, change.output);
}
}  // namespace

Status TargetTools::CheckCancelled() const {
  if (cancelled_ && cancelled_()) {
    return Status::Cancelled(fmt::format("target {}: the batch was cancelled or temperd is stopping", target_.name()));
  }
  return Status::OK();
}

temper::SandboxLimits TargetTools::Limits(std::chrono::seconds timeout) const {
  temper::SandboxLimits limits;
  limits.timeout = timeout;
  limits.memory_limit_bytes = 0;  // the target's own cap (temperd.yaml sandbox.memory)
  limits.stop_requested = cancelled_;
  return limits;
}

Result<CommandResult> TargetTools::RunCommand(const std::string& command, std::chrono::seconds timeout) {
  TEMPER_RETURN_IF_ERROR(CheckCancelled());
  TEMPER_ASSIGN_OR_RETURN(temper::ProcessResult run, target_.Run(command, Limits(timeout)));
  std::string output = std::move(run.out);
  if (run.out_truncated) output += "\n[stdout cut by the sandbox's output limit]\n";
  output += run.err;
  if (run.err_truncated) output += "\n[stderr cut by the sandbox's output limit]\n";
  if (!run.cap_hit.empty()) {
    return Status::FailedPrecondition(fmt::format("{}; its output:\n{}", run.Describe(), output));
  }
  if (run.stopped) {  // by `cancelled_`, the only other reason the sandbox stops a command
    return Status::Cancelled(
        fmt::format("target {}: the batch was cancelled or temperd is stopping; the command was {}", target_.name(),
                    run.Describe()));
  }
  CommandResult out;
  out.timed_out = run.timed_out;
  out.exit_status = run.term_signal != 0 ? 128 + run.term_signal : run.exit_code;
  out.output = std::move(output);
  return out;
}

Result<std::string> TargetTools::ReadFile(const std::string& path, size_t max_bytes) {
  TEMPER_RETURN_IF_ERROR(CheckCancelled());
  Result<std::string> text = target_.ReadFile(path, max_bytes);
  // The Worker asks for at most what it will show; a larger file is shown cut, not refused.
  if (text.status().code() == StatusCode::kOutOfRange) {
    text = target_.ReadFile(path, kLargestReadableFile);
    if (text.ok()) text->resize(std::min(text->size(), max_bytes));
  }
  return text;
}

Status TargetTools::WriteFile(const std::string& path, const std::string& content) {
  TEMPER_RETURN_IF_ERROR(CheckCancelled());
  mode_t mode = content.starts_with("#!") ? 0755 : 0644;
  return target_.WriteFile(path, content, mode);
}

Result<std::string> TargetTools::InstallPackages(const std::vector<std::string>& names, std::chrono::seconds timeout) {
  TEMPER_RETURN_IF_ERROR(CheckCancelled());
  TEMPER_ASSIGN_OR_RETURN(stig::PackageChange change, stig::InstallPackages(target_, names, Limits(timeout)));
  return Report(change, "installed (already present)");
}

Result<std::string> TargetTools::RemovePackages(const std::vector<std::string>& names, bool purge,
                                                std::chrono::seconds timeout) {
  TEMPER_RETURN_IF_ERROR(CheckCancelled());
  TEMPER_ASSIGN_OR_RETURN(stig::PackageChange change, stig::RemovePackages(target_, names, purge, Limits(timeout)));
  return Report(change, "removed");
}

}  // namespace temper
