#include "security/worker_tool_attacks.h"

#include <atomic>
#include <mutex>

#include <catch2/catch.hpp>

#include "common/log.h"
#include "roles/local_server.h"
#include "roles/openai_client.h"
#include "roles/prompt_library.h"
#include "roles/token_estimator.h"
#include "roles/worker.h"

namespace temper::testing {

using nlohmann::json;

Result<CommandResult> RecordingTarget::RunCommand(const std::string& command, std::chrono::seconds) {
  commands.push_back(command);
  return CommandResult{0, "", false};
}

Result<std::string> RecordingTarget::ReadFile(const std::string& path, size_t max_bytes) {
  auto it = files.find(path);
  if (it == files.end()) return Status::NotFound(path + " does not exist");
  return it->second.substr(0, max_bytes);
}

Status RecordingTarget::WriteFile(const std::string& path, const std::string& content) {
  written.push_back(path);
  files[path] = content;
  return Status::OK();
}

Result<std::string> RecordingTarget::InstallPackages(const std::vector<std::string>&, std::chrono::seconds) {
  return std::string("nothing installed\n");
}

Result<std::string> RecordingTarget::RemovePackages(const std::vector<std::string>&, bool, std::chrono::seconds) {
  return std::string("nothing removed\n");
}

namespace {

json ToolCallReply(const std::string& name, const json& arguments) {
  json call = {{"id", "call_0"}, {"type", "function"}, {"function", {{"name", name}, {"arguments", arguments.dump()}}}};
  return {{"choices", {{{"finish_reason", "tool_calls"}, {"message", {{"content", nullptr}, {"tool_calls", {call}}}}}}},
          {"usage", {{"prompt_tokens", 100}, {"completion_tokens", 10}}}};
}

}  // namespace

AttackOutcome PlayToolCalls(RecordingTarget& target, const std::vector<std::pair<std::string, json>>& calls) {
  std::mutex mu;
  AttackOutcome outcome;
  size_t turn = 0;
  LocalServer server([&](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mu);
    json body = json::parse(req.body);
    const json& last = body["messages"].back();
    if (last["role"] == "tool") {
      std::string shown = last["content"];
      outcome.results.push_back(shown);
      if (shown.find("refused") != std::string::npos) outcome.refused.push_back(shown);
    }
    json reply = turn < calls.size() ? ToolCallReply(calls[turn].first, calls[turn].second)
                                     : ToolCallReply("finish", {{"summary", "done"}});
    ++turn;
    res.set_content(reply.dump(), "application/json");
  });
  Logger logger(LogLevel::kError);
  PromptLibrary prompts = PromptLibrary::Embedded();
  BytesTokenEstimator estimator;
  RoleConfig config;
  config.role = "worker";
  config.context_tokens = 1 << 20;
  config.max_output_tokens = 1024;
  WorkerBudget budget;
  budget.max_steps = static_cast<uint32_t>(calls.size() + 1);
  budget.max_tokens = 1ull << 40;
  WorkerTask task;
  task.rule = {"xccdf_org.ssgproject.content_rule_banner_etc_issue",
               "Modify the System Login Banner",
               "medium",
               "",
               "",
               "",
               "",
               {}};
  task.approach = "Write the banner.";
  auto client =
      OpenAIClient::Create("attacker", {.base_url = server.base_url(), .model = "m", .max_retries = 0}, logger);
  REQUIRE(client.ok());
  auto run = Worker(prompts, config, estimator, budget).Run(**client, target, task);
  INFO(run.status().ToString());
  REQUIRE(run.ok());
  REQUIRE(outcome.results.size() == calls.size());
  return outcome;
}

std::vector<std::string> CommandsThatRan(const std::vector<std::string>& commands) {
  RecordingTarget target;
  std::vector<std::pair<std::string, json>> calls;
  for (const std::string& c : commands) calls.push_back({"run_command", {{"command", c}}});
  PlayToolCalls(target, calls);
  return target.commands;
}

}  // namespace temper::testing
