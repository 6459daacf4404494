// The harness of the command-policy attacks: a model that plays a fixed list of tool calls to the
// real Worker (over a real OpenAI-compatible HTTP server and OpenAIClient), and a target that
// records what reaches it instead of running it. The attacks stop sshd, reboot the host or write
// to /proc/sysrq-trigger: they must never run for real on the test machine, so the target keeps
// files in memory (read_file reads back what write_file wrote, plus the files a case seeds) and
// answers every command with exit status 0.
//
// A case asserts on what reached the target (the command or file that must not) and on what the
// model was told (the refusal naming the policy's rule).
// Thread safety: one attack at a time per harness.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "roles/worker_tools.h"

namespace temper::testing {

class RecordingTarget final : public WorkerTools {
 public:
  Result<CommandResult> RunCommand(const std::string& command, std::chrono::seconds timeout) override;
  Result<std::string> ReadFile(const std::string& path, size_t max_bytes) override;
  Status WriteFile(const std::string& path, const std::string& content) override;
  Result<std::string> InstallPackages(const std::vector<std::string>& names, std::chrono::seconds timeout) override;
  Result<std::string> RemovePackages(const std::vector<std::string>& names, bool purge,
                                     std::chrono::seconds timeout) override;

  std::vector<std::string> commands;         // every command that reached the target, in order
  std::map<std::string, std::string> files;  // path → content (seeded by a case, or written)
  std::vector<std::string> written;          // paths write_file reached, in order
};

struct AttackOutcome {
  std::vector<std::string> results;  // what the model was shown for each call, in order
  std::vector<std::string> refused;  // the refusals among them
};

// Plays `calls` (tool name, arguments), one per model turn, then finish, against `target`.
AttackOutcome PlayToolCalls(RecordingTarget& target, const std::vector<std::pair<std::string, nlohmann::json>>& calls);

// Runs each command as its own run_command call and returns the commands that reached the target.
std::vector<std::string> CommandsThatRan(const std::vector<std::string>& commands);

}  // namespace temper::testing
