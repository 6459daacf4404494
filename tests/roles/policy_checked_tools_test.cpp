// PolicyCheckedTools: a call the command policy refuses never reaches the target, and says it was
// refused; one it allows reaches the target unchanged, and the target's own errors are not refusals.
#include "roles/policy_checked_tools.h"

#include <map>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace temper {
namespace {

using namespace std::chrono_literals;

// A target that records every call that reaches it; its files are a map.
class RecordingTarget final : public WorkerTools {
 public:
  Result<CommandResult> RunCommand(const std::string& command, std::chrono::seconds) override {
    calls.push_back("run " + command);
    return CommandResult{0, "ran\n", false};
  }
  Result<std::string> ReadFile(const std::string& path, size_t max_bytes) override {
    reads.push_back(path);
    auto f = files.find(path);
    if (f == files.end()) return Status::NotFound(path + " does not exist");
    return f->second.substr(0, max_bytes);
  }
  Status WriteFile(const std::string& path, const std::string& content) override {
    calls.push_back("write " + path);
    if (path.starts_with("/missing/")) return Status::NotFound("no directory /missing");
    files[path] = content;
    return Status::OK();
  }
  Result<std::string> InstallPackages(const std::vector<std::string>& names, std::chrono::seconds) override {
    calls.push_back("install " + names.front());
    return std::string("Setting up\n");
  }
  Result<std::string> RemovePackages(const std::vector<std::string>& names, bool, std::chrono::seconds) override {
    calls.push_back("remove " + names.front());
    return std::string("Removing\n");
  }

  std::vector<std::string> calls, reads;
  std::map<std::string, std::string> files;
};

TEST_CASE("PolicyCheckedTools: a refused command never reaches the target and is marked refused", "[roles][policy]") {
  RecordingTarget target;
  PolicyCheckedTools tools(target, PolicyContext{});
  auto refused = tools.RunCommand("true && systemctl reboot", 10s);
  REQUIRE_FALSE(refused.ok());
  CHECK(tools.last_call_refused());
  CHECK_THAT(refused.status().message(), Catch::Contains("reboot"));
  CHECK(target.calls.empty());

  auto allowed = tools.RunCommand("grep -c PermitRootLogin /etc/ssh/sshd_config", 10s);
  REQUIRE(allowed.ok());
  CHECK_FALSE(tools.last_call_refused());
  CHECK(target.calls == std::vector<std::string>{"run grep -c PermitRootLogin /etc/ssh/sshd_config"});
}

TEST_CASE("PolicyCheckedTools: a script is judged by what it holds on the target", "[roles][policy]") {
  RecordingTarget target;
  PolicyCheckedTools tools(target, PolicyContext{});
  target.files["/root/fix.sh"] = "#!/bin/sh\nsed -i 's/a/b/' /etc/login.defs\nshutdown -h now\n";
  auto refused = tools.RunCommand("sh /root/fix.sh", 10s);
  REQUIRE_FALSE(refused.ok());
  CHECK(tools.last_call_refused());
  CHECK(target.calls.empty());
  // The policy read the script from the target itself, through no check of its own.
  CHECK(target.reads == std::vector<std::string>{"/root/fix.sh"});
}

TEST_CASE("PolicyCheckedTools: a write where content runs later is judged, and a target's error is not a refusal",
          "[roles][policy]") {
  RecordingTarget target;
  PolicyCheckedTools tools(target, PolicyContext{});
  Status refused = tools.WriteFile("/etc/cron.d/fix", "* * * * * root reboot\n");
  REQUIRE_FALSE(refused.ok());
  CHECK(tools.last_call_refused());
  CHECK(target.calls.empty());

  Status missing = tools.WriteFile("/missing/file.conf", "x\n");
  CHECK(missing.code() == StatusCode::kNotFound);
  CHECK_FALSE(tools.last_call_refused());
  CHECK(tools.WriteFile("/etc/login.defs", "PASS_MAX_DAYS 60\n").ok());
  CHECK_FALSE(tools.last_call_refused());
  CHECK(target.calls == std::vector<std::string>{"write /missing/file.conf", "write /etc/login.defs"});
}

TEST_CASE("PolicyCheckedTools: package removals follow the batch's permission and installs pass", "[roles][policy]") {
  RecordingTarget target;
  PolicyCheckedTools strict(target, PolicyContext{});
  auto refused = strict.RemovePackages({"telnet"}, false, 10s);
  REQUIRE_FALSE(refused.ok());
  CHECK(strict.last_call_refused());
  CHECK(strict.InstallPackages({"aide"}, 10s).ok());
  CHECK_FALSE(strict.last_call_refused());

  PolicyCheckedTools disruptive(target, PolicyContext{.allow_package_removal = true});
  CHECK_FALSE(disruptive.RemovePackages({"openssh-server"}, false, 10s).ok());  // never: it cuts off access
  CHECK(disruptive.last_call_refused());
  CHECK(disruptive.RemovePackages({"telnet"}, true, 10s).ok());
  CHECK_FALSE(disruptive.last_call_refused());
  CHECK(target.calls == std::vector<std::string>{"install aide", "remove telnet"});
}

}  // namespace
}  // namespace temper
