// The Worker's tool loop end to end: a scripted model behind a real HTTP server (through
// OpenAIClient) drives real commands and files in a temporary directory standing in for the target.
// Checks what the model is told at each turn (errors, refusals, truncation, budgets) and where the
// loop stops.
#include "roles/worker.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "common/sha256.h"
#include "roles/local_server.h"
#include "roles/openai_client.h"
#include "scratch_space.h"

using namespace temper;
using nlohmann::json;
using temper::testing::LocalServer;
namespace fs = std::filesystem;

namespace {

// A target that is a directory: absolute paths map under it, commands run there with /bin/sh.
class DirectoryTools final : public WorkerTools {
 public:
  DirectoryTools() {
    std::string tmpl = temper::testing::TestTempDir() + "/worker-XXXXXX";
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    root_ = tmpl;
  }
  ~DirectoryTools() override { fs::remove_all(root_); }
  const std::string& root() const { return root_; }

  Result<CommandResult> RunCommand(const std::string& command, std::chrono::seconds timeout) override {
    int out[2];
    if (pipe(out) != 0) return Status::FromErrno(errno, "pipe");
    pid_t pid = fork();
    if (pid == 0) {
      dup2(out[1], 1);
      dup2(out[1], 2);
      close(out[0]);
      if (chdir(root_.c_str()) != 0) _exit(127);
      execl("/bin/sh", "sh", "-c", command.c_str(), nullptr);
      _exit(127);
    }
    close(out[1]);
    CommandResult r;
    auto deadline = std::chrono::steady_clock::now() + timeout;
    char buf[4096];
    for (;;) {
      pollfd p{out[0], POLLIN, 0};
      int left = static_cast<int>(
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count());
      if (left <= 0) {
        kill(pid, SIGKILL);
        r.timed_out = true;
        break;
      }
      if (poll(&p, 1, left) <= 0) continue;
      ssize_t n = read(out[0], buf, sizeof buf);
      if (n <= 0) break;
      r.output.append(buf, static_cast<size_t>(n));
    }
    close(out[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    r.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return r;
  }
  Result<std::string> ReadFile(const std::string& path, size_t max_bytes) override {
    std::ifstream in(root_ + path);
    if (!in) return Status::NotFound(path + " does not exist");
    std::string s(max_bytes, '\0');
    in.read(s.data(), static_cast<std::streamsize>(max_bytes));
    s.resize(static_cast<size_t>(in.gcount()));
    return s;
  }
  Status WriteFile(const std::string& path, const std::string& content) override {
    fs::create_directories(fs::path(root_ + path).parent_path());
    std::ofstream(root_ + path) << content;
    return Status::OK();
  }
  // A package manager in memory: "aide" and "aide-common" exist, nothing else does.
  Result<std::string> InstallPackages(const std::vector<std::string>& names, std::chrono::seconds) override {
    std::string report;
    for (const std::string& n : names) {
      if (n != "aide" && n != "aide-common") return Status::NotFound(n + " is not in the archive");
    }
    for (const std::string& n : names) {
      installed.insert(n);
      report += "Setting up " + n + " (1.0)\n";
    }
    return report;
  }
  Result<std::string> RemovePackages(const std::vector<std::string>& names, bool purge, std::chrono::seconds) override {
    ++remove_calls;
    std::string report;
    for (const std::string& n : names) {
      if (installed.erase(n)) report += (purge ? "Purging configuration files for " : "Removing ") + n + " (1.0)\n";
    }
    return report.empty() ? "nothing removed\n" : report;
  }

  std::set<std::string> installed;
  int remove_calls = 0;

 private:
  std::string root_;
};

json ToolCallsReply(std::vector<std::pair<std::string, json>> calls) {
  json tc = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    tc.push_back({{"id", "call_" + std::to_string(i)},
                  {"type", "function"},
                  {"function", {{"name", calls[i].first}, {"arguments", calls[i].second.dump()}}}});
  }
  return {{"choices", {{{"finish_reason", "tool_calls"}, {"message", {{"content", nullptr}, {"tool_calls", tc}}}}}},
          {"usage", {{"prompt_tokens", 500}, {"completion_tokens", 40}}}};
}

json TextReply(const std::string& text) {
  return {{"choices", {{{"finish_reason", "stop"}, {"message", {{"content", text}}}}}},
          {"usage", {{"prompt_tokens", 500}, {"completion_tokens", 40}}}};
}

WorkerTask Task() {
  WorkerTask t;
  t.rule = {"xccdf_org.ssgproject.content_rule_banner_etc_issue",
            "Modify the System Login Banner",
            "medium",
            "",
            "",
            "cat /etc/issue",
            "echo 'Authorized use only' > /etc/issue",
            {}};
  t.approach = "Write the banner to /etc/issue and read it back.";
  return t;
}

RoleConfig Config() {
  RoleConfig c;
  c.role = "worker";
  c.context_tokens = 32768;
  c.max_output_tokens = 1024;
  return c;
}

struct Harness {
  Logger logger{LogLevel::kError};
  PromptLibrary prompts = PromptLibrary::Embedded();
  BytesTokenEstimator estimator;
  DirectoryTools tools;
};

}  // namespace

TEST_CASE("a full attempt: a malformed call, a refusal, truncation, files, then finish") {
  std::mutex mu;
  std::vector<json> seen;  // each request's messages
  json first_tools;
  LocalServer server([&](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mu);
    json body = json::parse(req.body);
    seen.push_back(body["messages"]);
    if (seen.size() == 1) first_tools = body["tools"];
    json reply;
    switch (seen.size()) {
      case 1:
        reply = TextReply(
            "<think>Write the banner.</think>\n{\"name\": \"run_command\", \"arguments\": {\"command\": \"echo hi\"");
        break;
      case 2:
        reply = ToolCallsReply({{"run_command", {{"command", "cd / && sudo reboot"}}}});
        break;
      case 3:
        reply = ToolCallsReply({{"run_command", {{"command", "seq 1 3000"}}},
                                {"write_file", {{"path", "/etc/issue"}, {"content", "Authorized use only\n"}}}});
        break;
      case 4:
        reply = TextReply(
            "Now I read it back.\n```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"/etc/issue\"}}\n```");
        break;
      default:
        reply = ToolCallsReply({{"finish", {{"summary", "Banner written to /etc/issue and verified."}}}});
        break;
    }
    res.set_content(reply.dump(), "application/json");
  });
  Harness h;
  auto client =
      OpenAIClient::Create("remote", {.base_url = server.base_url(), .model = "m", .max_retries = 0}, h.logger);
  REQUIRE(client.ok());
  WorkerBudget budget;
  budget.max_output_bytes = 1000;
  Worker worker(h.prompts, Config(), h.estimator, budget);
  std::vector<WorkerEvent> streamed;
  auto r = worker.Run(**client, h.tools, Task(), [&](const WorkerEvent& e) { streamed.push_back(e); });
  REQUIRE(r.ok());
  CHECK(r->outcome == WorkerOutcome::kFinished);
  CHECK(r->summary == "Banner written to /etc/issue and verified.");
  CHECK(r->model_calls == 5);
  CHECK(r->steps == 4);  // the refused reboot counts
  CHECK(r->usage.prompt_tokens == 2500);
  CHECK(streamed.size() == r->events.size());
  REQUIRE(seen.size() == 5);
  // Turn 2 was told why turn 1 was unusable.
  CHECK_THAT(seen[1].back()["content"].get<std::string>(), Catch::Contains("ends before its closing bracket"));
  // Turn 3 was told the reboot was refused, and nothing ran.
  CHECK(seen[2].back()["role"] == "tool");
  CHECK_THAT(seen[2].back()["content"].get<std::string>(),
             Catch::Contains("refused by policy: 'reboot' would take the host down"));
  // Turn 4 got both results: the long output truncated with a note, then the write; budgets at the end.
  const json& m4 = seen[3];
  std::string seq_out = m4[m4.size() - 2]["content"], write_out = m4.back()["content"];
  CHECK_THAT(seq_out, Catch::StartsWith("exit status 0\n1\n2\n"));
  CHECK_THAT(seq_out, Catch::Contains("output truncated"));
  CHECK_THAT(seq_out, Catch::Contains("3000\n"));  // the tail is kept
  CHECK(seq_out.size() < 1200);
  CHECK_THAT(write_out, Catch::Contains("wrote 20 bytes to /etc/issue"));
  CHECK_THAT(write_out, Catch::Contains("[budget left: 27 tool calls,"));
  // Turn 5 read the file back, through a call written in text.
  CHECK_THAT(seen[4].back()["content"].get<std::string>(), Catch::StartsWith("Authorized use only\n"));
  std::ifstream issue(h.tools.root() + "/etc/issue");
  std::string line;
  std::getline(issue, line);
  CHECK(line == "Authorized use only");
  CHECK_THAT(r->actions, Catch::Contains("$ seq 1 3000 → exit 0"));
  CHECK_THAT(r->actions, Catch::Contains("write /etc/issue (20 bytes)"));
  CHECK(std::count_if(r->events.begin(), r->events.end(),
                      [](const WorkerEvent& e) { return e.kind == WorkerEvent::Kind::kRefused; }) == 1);
  // The first request declared the seven tools with their schemas (the rule has a reference fix).
  REQUIRE(first_tools.size() == 7);
  CHECK(first_tools[0]["function"]["name"] == "run_command");
  CHECK(first_tools[3]["function"]["name"] == "install_package");
  CHECK(first_tools[5]["function"]["parameters"]["required"] == json::array({"summary"}));
  CHECK(first_tools[6]["function"]["name"] == "apply_reference_fix");
  CHECK_FALSE(first_tools[6]["function"]["parameters"].contains("required"));
}

// Whether a call was refused is the policy's decision, not something its output can claim: a log
// line or a file that quotes a refusal is a tool result like any other.
TEST_CASE("a tool whose own output says \"refused by policy\" was not refused: its call is journalled as run") {
  int turn = 0;
  LocalServer server([&](const httplib::Request&, httplib::Response& res) {
    json reply;
    switch (++turn) {
      case 1:
        reply = ToolCallsReply({{"run_command", {{"command", "printf 'sshd: refused by policy: root login\\n'"}}}});
        break;
      case 2:
        reply = ToolCallsReply({{"write_file", {{"path", "/var/log/audit.txt"}, {"content", "refused by policy: x\n"}}},
                                {"read_file", {{"path", "/var/log/audit.txt"}}}});
        break;
      case 3:
        reply = ToolCallsReply({{"run_command", {{"command", "reboot"}}}});
        break;
      default:
        reply = ToolCallsReply({{"finish", {{"summary", "read the log"}}}});
        break;
    }
    res.set_content(reply.dump(), "application/json");
  });
  Harness h;
  auto client =
      OpenAIClient::Create("remote", {.base_url = server.base_url(), .model = "m", .max_retries = 0}, h.logger);
  REQUIRE(client.ok());
  Worker worker(h.prompts, Config(), h.estimator, WorkerBudget{});
  auto r = worker.Run(**client, h.tools, Task());
  REQUIRE(r.ok());
  std::vector<std::pair<WorkerEvent::Kind, std::string>> calls;  // tool events: kind and tool
  for (const WorkerEvent& e : r->events) {
    if (e.kind == WorkerEvent::Kind::kToolCall || e.kind == WorkerEvent::Kind::kRefused)
      calls.emplace_back(e.kind, e.tool);
  }
  using K = WorkerEvent::Kind;
  CHECK(calls == std::vector<std::pair<K, std::string>>{{K::kToolCall, "run_command"},
                                                        {K::kToolCall, "write_file"},
                                                        {K::kToolCall, "read_file"},
                                                        {K::kRefused, "run_command"},
                                                        {K::kToolCall, "finish"}});
  CHECK_THAT(r->events[1].detail, Catch::Contains("exit status 0 sshd: refused by policy: root login"));
  CHECK_THAT(r->actions, Catch::Contains("$ printf"));
}

TEST_CASE("the loop stops at the step budget, the token budget, and after repeated unusable answers") {
  Harness h;
  std::string mode;
  LocalServer server([&](const httplib::Request&, httplib::Response& res) {
    json reply = mode == "prose" ? TextReply("I think the banner is fine as it is.")
                                 : ToolCallsReply({{"run_command", {{"command", "true"}}}});
    res.set_content(reply.dump(), "application/json");
  });
  auto client =
      OpenAIClient::Create("remote", {.base_url = server.base_url(), .model = "m", .max_retries = 0}, h.logger);
  REQUIRE(client.ok());

  mode = "tools";
  WorkerBudget steps;
  steps.max_steps = 3;
  auto a = Worker(h.prompts, Config(), h.estimator, steps).Run(**client, h.tools, Task());
  REQUIRE(a.ok());
  CHECK(a->outcome == WorkerOutcome::kStepBudget);
  CHECK(a->steps == 3);

  WorkerBudget tokens;
  tokens.max_tokens = 1500;  // each reply reports 540 tokens
  auto b = Worker(h.prompts, Config(), h.estimator, tokens).Run(**client, h.tools, Task());
  REQUIRE(b.ok());
  CHECK(b->outcome == WorkerOutcome::kTokenBudget);
  CHECK(b->model_calls == 3);

  mode = "prose";
  WorkerBudget retries;
  retries.max_format_retries = 2;
  auto c = Worker(h.prompts, Config(), h.estimator, retries).Run(**client, h.tools, Task());
  REQUIRE(c.ok());
  CHECK(c->outcome == WorkerOutcome::kUnusableAnswers);
  CHECK(c->model_calls == 3);
  CHECK_THAT(c->summary, Catch::Contains("holds no tool call"));
}

TEST_CASE("scripts are judged when they run, by their content read from the target") {
  Harness h;
  std::vector<std::string> results;
  std::atomic<int> n{0};
  LocalServer server([&](const httplib::Request& req, httplib::Response& res) {
    json body = json::parse(req.body);
    if (body["messages"].back()["role"] == "tool") results.push_back(body["messages"].back()["content"]);
    json reply;
    switch (++n) {
      case 1:
        reply = ToolCallsReply(
            {{"write_file", {{"path", "/root/fix.sh"}, {"content", "#!/bin/bash\nsystemctl mask sshd\n"}}}});
        break;
      case 2:
        reply = ToolCallsReply({{"run_command", {{"command", "bash /root/fix.sh"}}}});
        break;
      case 3:
        reply = ToolCallsReply({{"write_file", {{"path", "/root/ok.sh"}, {"content", "echo fixed\n"}}}});
        break;
      case 4:
        reply = ToolCallsReply({{"run_command", {{"command", "sh /root/ok.sh"}}}});
        break;
      default:
        reply = ToolCallsReply({{"finish", {{"summary", "gave up"}}}});
        break;
    }
    res.set_content(reply.dump(), "application/json");
  });
  auto client =
      OpenAIClient::Create("remote", {.base_url = server.base_url(), .model = "m", .max_retries = 0}, h.logger);
  REQUIRE(client.ok());
  auto r = Worker(h.prompts, Config(), h.estimator, {}).Run(**client, h.tools, Task());
  REQUIRE(r.ok());
  REQUIRE(results.size() == 4);
  CHECK_THAT(results[0], Catch::StartsWith("wrote 32 bytes to /root/fix.sh"));  // writing a script is not running it
  CHECK_THAT(results[1],
             Catch::Contains("would cut off remote access") && Catch::Contains("in the script /root/fix.sh"));
  // The harmless script reached the target (whose /bin/sh runs it in a scratch directory, where
  // /root/ok.sh is not: what matters here is that the policy let it through).
  CHECK_THAT(results[3], Catch::StartsWith("exit status"));
  CHECK_THAT(r->actions, Catch::Contains("$ sh /root/ok.sh"));
  CHECK(r->actions.find("bash /root/fix.sh") == std::string::npos);
}

TEST_CASE("install_package and remove_package reach the tools, bad names and protected removals are explained") {
  Harness h;
  std::vector<std::string> results;  // each tool result the model was shown
  std::atomic<int> n{0};
  LocalServer server([&](const httplib::Request& req, httplib::Response& res) {
    json body = json::parse(req.body);
    if (body["messages"].back()["role"] == "tool") results.push_back(body["messages"].back()["content"]);
    json reply;
    switch (++n) {
      case 1:
        reply = ToolCallsReply({{"install_package", {{"packages", {"aide", "aide-common"}}}}});
        break;
      case 2:
        reply = ToolCallsReply({{"install_package", {{"packages", {"aide-ng"}}}}});
        break;
      case 3:
        reply = ToolCallsReply({{"install_package", {{"packages", {"aide", 7}}}}});
        break;
      case 4:
        reply = ToolCallsReply({{"remove_package", {{"packages", {"openssh-server"}}}}});
        break;
      case 5:
        reply =
            ToolCallsReply({{"run_command", {{"command", "DEBIAN_FRONTEND=noninteractive apt-get -y purge sudo"}}}});
        break;
      case 6:
        reply = ToolCallsReply({{"remove_package", {{"packages", {"aide-common"}}, {"purge", true}}}});
        break;
      case 7:
        reply = ToolCallsReply({{"remove_package", {{"packages", json::array()}}}});
        break;
      default:
        reply = ToolCallsReply({{"finish", {{"summary", "aide installed"}}}});
        break;
    }
    res.set_content(reply.dump(), "application/json");
  });
  auto client =
      OpenAIClient::Create("remote", {.base_url = server.base_url(), .model = "m", .max_retries = 0}, h.logger);
  REQUIRE(client.ok());
  WorkerTask task = Task();
  task.allow_package_removal = true;  // the batch allows disruptive changes
  auto r = Worker(h.prompts, Config(), h.estimator, {}).Run(**client, h.tools, task);
  REQUIRE(r.ok());
  REQUIRE(results.size() == 7);
  CHECK_THAT(results[0], Catch::StartsWith("Setting up aide (1.0)\nSetting up aide-common (1.0)\n"));
  CHECK_THAT(results[1], Catch::StartsWith("error: aide-ng is not in the archive"));
  CHECK_THAT(results[2], Catch::StartsWith("error: install_package: every entry of 'packages' must be a package name"));
  CHECK_THAT(results[3], Catch::Contains("refused by policy: removing the package openssh-server"));
  CHECK_THAT(results[4], Catch::Contains("refused by policy: removing the package sudo"));
  CHECK_THAT(results[5], Catch::StartsWith("Purging configuration files for aide-common (1.0)"));
  CHECK_THAT(results[6], Catch::Contains("'packages' is empty"));
  CHECK(h.tools.installed == std::set<std::string>{"aide"});
  CHECK_THAT(r->actions, Catch::Contains("install aide aide-common → ok"));
  CHECK_THAT(r->actions, Catch::Contains("install aide-ng → failed"));
  CHECK_THAT(r->actions, Catch::Contains("purge aide-common → ok"));
  CHECK(std::count_if(r->events.begin(), r->events.end(),
                      [](const WorkerEvent& e) { return e.kind == WorkerEvent::Kind::kRefused; }) == 2);
}

TEST_CASE("without the batch's opt-in every package removal is refused, by the tool and in commands") {
  Harness h;
  std::vector<std::string> results;
  std::atomic<int> n{0};
  LocalServer server([&](const httplib::Request& req, httplib::Response& res) {
    json body = json::parse(req.body);
    if (body["messages"].back()["role"] == "tool") results.push_back(body["messages"].back()["content"]);
    json reply;
    switch (++n) {
      case 1:
        reply = ToolCallsReply({{"remove_package", {{"packages", {"telnet"}}}}});
        break;
      case 2:
        reply =
            ToolCallsReply({{"run_command", {{"command", "DEBIAN_FRONTEND=noninteractive apt-get remove -y telnet"}}}});
        break;
      case 3:
        reply = ToolCallsReply(
            {{"write_file", {{"path", "/root/fix.sh"}, {"content", "#!/bin/bash\ndpkg --purge telnet\n"}}}});
        break;
      case 4:
        reply = ToolCallsReply({{"run_command", {{"command", "/root/fix.sh"}}}});
        break;
      default:
        reply = ToolCallsReply({{"finish", {{"summary", "needs --allow-disruptive"}}}});
        break;
    }
    res.set_content(reply.dump(), "application/json");
  });
  auto client =
      OpenAIClient::Create("remote", {.base_url = server.base_url(), .model = "m", .max_retries = 0}, h.logger);
  REQUIRE(client.ok());
  auto r = Worker(h.prompts, Config(), h.estimator, {}).Run(**client, h.tools, Task());
  REQUIRE(r.ok());
  REQUIRE(results.size() == 4);
  CHECK_THAT(results[2], Catch::StartsWith("wrote 32 bytes to /root/fix.sh"));
  results.erase(results.begin() + 2);
  for (const std::string& result : results) {
    CHECK_THAT(result, Catch::Contains("refused by policy: removing packages (telnet) is a disruptive change") &&
                           Catch::Contains("--allow-disruptive"));
  }
  CHECK(h.tools.remove_calls == 0);
  CHECK(std::count_if(r->events.begin(), r->events.end(),
                      [](const WorkerEvent& e) { return e.kind == WorkerEvent::Kind::kRefused; }) == 3);
}

TEST_CASE("output truncation keeps head and tail on character boundaries") {
  CHECK(TruncateOutput("short", 100) == "short");
  std::string big;
  for (int i = 0; i < 1000; ++i) big += "é";  // two bytes each
  std::string cut = TruncateOutput(big, 301);
  CHECK(cut.size() <= 301 + 64);
  CHECK_THAT(cut, Catch::Contains("bytes left out"));
  std::string head = cut.substr(0, cut.find("\n[…"));
  CHECK(head.size() % 2 == 0);  // never half a character
  std::string tail = cut.substr(cut.find("…]\n") + std::string("…]\n").size());
  CHECK(tail.size() % 2 == 0);
}

// The in-process engine reports a native tool call it could not parse as malformed_reply; the
// random test model never writes one, so this client stands in for the engine at its boundary.
class MalformedThenFinish final : public ModelClient {
 public:
  Result<ChatResponse> Chat(const ChatRequest& request, const StreamCallbacks*) override {
    requests.push_back(request);
    ChatResponse r;
    r.usage = {100, 10, 0};
    if (requests.size() == 1) {
      r.text = "Let me check.";
      r.malformed_reply = "reply at byte 14: unexpected '}' in a tool call";
      return r;
    }
    r.tool_calls.push_back({"call_0", "finish", R"({"summary": "nothing to change"})"});
    r.finish_reason = FinishReason::kToolCalls;
    return r;
  }
  const std::string& endpoint_name() const override { return name; }
  std::string name = "local";
  std::vector<ChatRequest> requests;
};

TEST_CASE("a reply the engine could not parse is explained back to the model, not fatal") {
  Harness h;
  MalformedThenFinish client;
  Worker worker(h.prompts, Config(), h.estimator, WorkerBudget{});
  auto r = worker.Run(client, h.tools, Task());
  REQUIRE(r.ok());
  CHECK(r->outcome == WorkerOutcome::kFinished);
  REQUIRE(client.requests.size() == 2);
  CHECK_THAT(client.requests[1].messages.back().content,
             Catch::Contains("could not be parsed: reply at byte 14: unexpected '}'"));
}

// ---------------------------------------------------------------------------------------------
// apply_reference_fix, and the calls echoed back as the model wrote them.

namespace {

// DirectoryTools whose commands see the files the Worker wrote under /root/ where they were
// written (the directory's root/), so the script apply_reference_fix writes there runs. Keeps each
// command as it reached the target, before that mapping.
class RootMappedTools final : public WorkerTools {
 public:
  Result<CommandResult> RunCommand(const std::string& command, std::chrono::seconds timeout) override {
    commands.push_back(command);
    std::string mapped;
    for (size_t pos = 0;;) {
      size_t at = command.find(" /root/", pos);
      mapped += command.substr(pos, at == std::string::npos ? std::string::npos : at - pos);
      if (at == std::string::npos) break;
      mapped += " " + dir.root() + "/root/";
      pos = at + std::string_view(" /root/").size();
    }
    return dir.RunCommand(mapped, timeout);
  }
  Result<std::string> ReadFile(const std::string& path, size_t max_bytes) override {
    return dir.ReadFile(path, max_bytes);
  }
  Status WriteFile(const std::string& path, const std::string& content) override {
    return dir.WriteFile(path, content);
  }
  Result<std::string> InstallPackages(const std::vector<std::string>& names, std::chrono::seconds t) override {
    return dir.InstallPackages(names, t);
  }
  Result<std::string> RemovePackages(const std::vector<std::string>& names, bool purge,
                                     std::chrono::seconds t) override {
    return dir.RemovePackages(names, purge, t);
  }

  DirectoryTools dir;
  std::vector<std::string> commands;
};

// A Worker run against a model that calls apply_reference_fix once (with `arguments`), then
// finishes; each request body is kept.
struct ReferenceFixRun {
  std::vector<json> requests;
  Result<WorkerResult> result = Status::Internal("not run");
};

ReferenceFixRun RunReferenceFix(RootMappedTools& tools, const WorkerTask& task, json arguments = json::object()) {
  ReferenceFixRun run;
  std::mutex mu;
  LocalServer server([&](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mu);
    run.requests.push_back(json::parse(req.body));
    json reply = run.requests.size() == 1 ? ToolCallsReply({{"apply_reference_fix", arguments}})
                                          : ToolCallsReply({{"finish", {{"summary", "ran the reference fix"}}}});
    res.set_content(reply.dump(), "application/json");
  });
  Logger logger{LogLevel::kError};
  PromptLibrary prompts = PromptLibrary::Embedded();
  BytesTokenEstimator estimator;
  auto client = OpenAIClient::Create("remote", {.base_url = server.base_url(), .model = "m", .max_retries = 0}, logger);
  REQUIRE(client.ok());
  run.result = Worker(prompts, Config(), estimator, WorkerBudget{}).Run(**client, tools, task);
  return run;
}

std::vector<std::string> OfferedTools(const json& request) {
  std::vector<std::string> names;
  for (const json& t : request["tools"]) names.push_back(t["function"]["name"]);
  return names;
}

const WorkerEvent* EventOf(const WorkerResult& r, const std::string& tool) {
  for (const WorkerEvent& e : r.events) {
    if (e.tool == tool && (e.kind == WorkerEvent::Kind::kToolCall || e.kind == WorkerEvent::Kind::kRefused)) return &e;
  }
  return nullptr;
}

constexpr const char* kScriptPath = "/root/temper-reference-fix-banner_etc_issue.sh";

}  // namespace

TEST_CASE("apply_reference_fix runs the whole fix even where the prompt cut it short, and records which fix ran") {
  RootMappedTools tools;
  WorkerTask task = Task();
  // Longer than half the 32 K window: the prompt shows its head, the tool runs all of it.
  std::string fix = "echo started > reference-fix-started\n";
  for (int i = 0; i < 4000; ++i) fix += fmt::format("# line {} of the long SSG remediation comment block\n", i);
  fix += "echo whole > reference-fix-whole\necho the fix ran";
  task.rule.fix_text = fix;
  task.rule.reference_fix_source =
      "ssg-ubuntu2004-ds.xml, benchmark xccdf_org.ssgproject.content_benchmark_UBUNTU_20-04";

  ReferenceFixRun run = RunReferenceFix(tools, task, {{"reason", "the banner file is where SSG expects it"}});
  REQUIRE(run.result.ok());
  REQUIRE(run.requests.size() == 2);
  const std::string first_prompt = run.requests[0].dump();
  CHECK_THAT(first_prompt, Catch::Contains("truncated to fit the prompt budget"));
  CHECK(first_prompt.find("reference-fix-whole") == std::string::npos);
  CHECK(OfferedTools(run.requests[0]).back() == "apply_reference_fix");

  // The whole script ran, from its first line to its last, and its file is gone again.
  std::ifstream whole(tools.dir.root() + "/reference-fix-whole");
  std::string line;
  CHECK((std::getline(whole, line) && line == "whole"));
  CHECK(fs::exists(tools.dir.root() + "/reference-fix-started"));
  CHECK_FALSE(fs::exists(tools.dir.root() + kScriptPath));
  REQUIRE(tools.commands.size() == 1);
  CHECK_THAT(tools.commands[0], Catch::StartsWith(std::string("bash ") + kScriptPath));

  // The model saw the exit status and output as run_command shows them.
  const std::string shown = run.requests[1]["messages"].back()["content"];
  CHECK_THAT(shown, Catch::StartsWith("exit status 0\nthe fix ran"));

  // The journal's event and the attempt's commands name the rule, the content and the script's hash.
  const std::string digest = Sha256Hex(fix + "\n");
  const WorkerEvent* event = EventOf(*run.result, "apply_reference_fix");
  REQUIRE(event != nullptr);
  CHECK(event->kind == WorkerEvent::Kind::kToolCall);
  CHECK(event->reference_fix ==
        json{{"rule", task.rule.id}, {"source", task.rule.reference_fix_source}, {"sha256", digest}});
  CHECK(event->arguments == json{{"reason", "the banner file is where SSG expects it"}});
  CHECK_THAT(run.result->actions, Catch::Contains(fmt::format("reference fix {} from {} (sha256 {}) → exit 0",
                                                              task.rule.id, task.rule.reference_fix_source, digest)));
}

// The script is judged by its content when it runs, as the model's own would be: a fix with a
// refused command is refused, nothing of it runs, and the file written for it is removed.
TEST_CASE("a reference fix the policy refuses never reaches the target") {
  for (const std::string fix :
       {"touch reference-fix-ran\nreboot", "touch reference-fix-ran\neval \"$(cat commands.txt)\""}) {
    INFO(fix);
    RootMappedTools tools;
    WorkerTask task = Task();
    task.rule.fix_text = fix;
    ReferenceFixRun run = RunReferenceFix(tools, task);
    REQUIRE(run.result.ok());
    REQUIRE(run.requests.size() == 2);
    CHECK_THAT(run.requests[1]["messages"].back()["content"].get<std::string>(), Catch::Contains("refused by policy"));
    const WorkerEvent* event = EventOf(*run.result, "apply_reference_fix");
    REQUIRE(event != nullptr);
    CHECK(event->kind == WorkerEvent::Kind::kRefused);
    CHECK(event->reference_fix["sha256"] == Sha256Hex(fix + "\n"));
    CHECK(event->reference_fix["source"] == "its content");  // the task did not say
    CHECK_FALSE(fs::exists(tools.dir.root() + "/reference-fix-ran"));
    CHECK_FALSE(fs::exists(tools.dir.root() + kScriptPath));
    // Only the clean-up reached the target.
    CHECK(tools.commands == std::vector<std::string>{std::string("rm -f ") + kScriptPath});
    CHECK(run.result->actions.find("reference fix") == std::string::npos);
  }
}

TEST_CASE("a rule without a reference fix is not offered the tool, and a call of it names the rule") {
  RootMappedTools tools;
  WorkerTask task = Task();
  task.rule.fix_text = " \n";
  ReferenceFixRun run = RunReferenceFix(tools, task);
  REQUIRE(run.result.ok());
  REQUIRE(run.requests.size() == 2);
  const std::vector<std::string> offered = OfferedTools(run.requests[0]);
  CHECK(offered.size() == 6);
  CHECK(std::find(offered.begin(), offered.end(), "apply_reference_fix") == offered.end());
  CHECK_THAT(run.requests[1]["messages"].back()["content"].get<std::string>(),
             Catch::StartsWith("error: the rule xccdf_org.ssgproject.content_rule_banner_etc_issue has no reference "
                               "fix in its content"));
  CHECK(tools.commands.empty());
  CHECK(run.result->steps == 1);
}

// A server's prefix cache matches the next request only where the assistant turn it is sent back
// is the bytes the model generated: spacing and key order as the model wrote them.
TEST_CASE("tool calls are echoed with the arguments text the model generated") {
  const std::string write_args = R"({ "content": "Authorized use only\n",  "path": "/etc/issue" })";
  const std::string run_args = R"({"command" : "true"})";
  std::vector<json> requests;
  std::mutex mu;
  LocalServer server([&](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mu);
    requests.push_back(json::parse(req.body));
    json reply = ToolCallsReply({{"finish", {{"summary", "done"}}}});
    if (requests.size() == 1) {
      reply["choices"][0]["message"]["tool_calls"] = {
          {{"id", "a"}, {"type", "function"}, {"function", {{"name", "write_file"}, {"arguments", write_args}}}},
          {{"id", "b"}, {"type", "function"}, {"function", {{"name", "run_command"}, {"arguments", run_args}}}}};
    }
    res.set_content(reply.dump(), "application/json");
  });
  Harness h;
  auto client =
      OpenAIClient::Create("remote", {.base_url = server.base_url(), .model = "m", .max_retries = 0}, h.logger);
  REQUIRE(client.ok());
  auto r = Worker(h.prompts, Config(), h.estimator, {}).Run(**client, h.tools, Task());
  REQUIRE(r.ok());
  REQUIRE(requests.size() == 2);
  const json& messages = requests[1]["messages"];
  const json& assistant = messages[messages.size() - 3];
  REQUIRE(assistant["role"] == "assistant");
  REQUIRE(assistant["tool_calls"].size() == 2);
  CHECK(assistant["tool_calls"][0]["function"]["arguments"] == write_args);
  CHECK(assistant["tool_calls"][1]["function"]["arguments"] == run_args);
}
