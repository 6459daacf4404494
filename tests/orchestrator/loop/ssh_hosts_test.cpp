#include "orchestrator/loop/ssh_hosts.h"

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "orchestrator/temp_dir.h"

namespace temper {
namespace {

const Logger& Quiet() {
  static const Logger log(LogLevel::kError);
  return log;
}

DaemonConfig ConfigIn(const testing::TempDir& dir) {
  auto config = ParseDaemonConfig(fmt::format("state_dir: {}\ntargets:\n  web1:\n    type: ssh\n    host: admin@web1\n"
                                              "  lab:\n    type: rootfs\n    path: /x\n",
                                              dir.path()),
                                  "t.yaml");
  REQUIRE(config.ok());
  return *config;
}

TEST_CASE("SSH hosts: configured and submitted ones, their states kept across restarts") {
  testing::TempDir dir;
  DaemonConfig config = ConfigIn(dir);
  {
    auto hosts = SshHosts::Open(config, Quiet());
    REQUIRE(hosts.ok());
    REQUIRE((*hosts)->List().size() == 1);
    CHECK((*hosts)->List()[0].configured);
    bool created = false;
    auto t = (*hosts)->FromSubmit("root@10.0.0.9:2222", HostRegistration::kMayRegister, &created);
    REQUIRE(t.ok());
    CHECK(created);
    CHECK(t->name == "root@10.0.0.9:2222");
    CHECK(t->type == "ssh");
    CHECK(t->host == "root@10.0.0.9:2222");
    CHECK((*hosts)->FromSubmit("root@10.0.0.9:2222", HostRegistration::kKnownOnly, &created)->name == t->name);
    CHECK_FALSE(created);
    CHECK(SshHosts::NameFor("ops@db1") == "ops@db1");
    // The configured target for the same login and host, whatever its name.
    CHECK((*hosts)->TargetNameFor("admin@web1:22") == "web1");
    CHECK((*hosts)->TargetNameFor("ops@web2") == "ops@web2");
    CHECK((*hosts)->FromSubmit("admin@web1:22", HostRegistration::kKnownOnly, &created)->name == "web1");
    CHECK_FALSE(created);
    CHECK((*hosts)->FromSubmit("web1", HostRegistration::kMayRegister).status().code() ==
          StatusCode::kInvalidArgument);
    REQUIRE((*hosts)->SetState("web1", HostState::kRunning, "", 4).ok());
    REQUIRE((*hosts)->SetState(t->name, HostState::kNeedsHuman, "revert failed: connection refused", 5).ok());
    CHECK((*hosts)->Clear("web1").status().code() == StatusCode::kFailedPrecondition);
    CHECK((*hosts)->SetState("nope", HostState::kIdle, "", 0).code() == StatusCode::kNotFound);
  }
  // A restart: the submitted host and both states are back; "running" was interrupted.
  auto hosts = SshHosts::Open(config, Quiet());
  REQUIRE(hosts.ok());
  auto web = (*hosts)->Find("web1");
  REQUIRE(web);
  CHECK(web->state == HostState::kIdle);
  CHECK(web->last_batch == 4);
  auto submitted = (*hosts)->Find("root@10.0.0.9:2222");
  REQUIRE(submitted);
  CHECK(submitted->state == HostState::kNeedsHuman);
  CHECK(submitted->detail == "revert failed: connection refused");
  CHECK((*hosts)->Submitted().size() == 1);
  auto cleared = (*hosts)->Clear("root@10.0.0.9:2222");
  REQUIRE(cleared.ok());
  CHECK(cleared->state == HostState::kIdle);
  CHECK((*hosts)->Clear("nope").status().code() == StatusCode::kNotFound);
}

TEST_CASE("SSH hosts: only a registering submit adds a host, and no more than ssh.max_hosts") {
  testing::TempDir dir;
  DaemonConfig config = ConfigIn(dir);
  config.ssh.max_hosts = 2;
  auto hosts = SshHosts::Open(config, Quiet());
  REQUIRE(hosts.ok());
  Result<TargetConfig> refused = (*hosts)->FromSubmit("root@10.0.0.1", HostRegistration::kKnownOnly);
  CHECK(refused.status().code() == StatusCode::kPermissionDenied);
  CHECK_THAT(refused.status().message(), Catch::Contains("root@10.0.0.1 is not a registered SSH host") &&
                                             Catch::Contains("an admin must register it"));
  CHECK_FALSE((*hosts)->Knows("root@10.0.0.1"));
  CHECK_FALSE(std::filesystem::exists(dir.path() + "/ssh/hosts.json"));
  CHECK((*hosts)->Knows("admin@web1"));  // configured
  REQUIRE((*hosts)->FromSubmit("root@10.0.0.1", HostRegistration::kMayRegister).ok());
  REQUIRE((*hosts)->FromSubmit("root@10.0.0.2", HostRegistration::kMayRegister).ok());
  CHECK((*hosts)->Knows("root@10.0.0.1"));
  Result<TargetConfig> over = (*hosts)->FromSubmit("root@10.0.0.3", HostRegistration::kMayRegister);
  CHECK(over.status().code() == StatusCode::kResourceExhausted);
  CHECK_THAT(over.status().message(), Catch::Contains("ssh.max_hosts"));
  CHECK((*hosts)->Submitted().size() == 2);
}

TEST_CASE("SSH hosts: a hosts.json that is not JSON is copied aside, and the registry opens with the configured hosts") {
  testing::TempDir dir;
  DaemonConfig config = ConfigIn(dir);
  std::filesystem::create_directories(dir.path() + "/ssh");
  std::ofstream(dir.path() + "/ssh/hosts.json") << "{not json";
  const std::string log_path = dir.path() + "/log";
  int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  REQUIRE(fd >= 0);
  {
    Logger log(LogLevel::kInfo, Logger::Style::kPlain, fd);
    auto hosts = SshHosts::Open(config, log);
    REQUIRE(hosts.ok());
    CHECK((*hosts)->List().size() == 1);
  }
  close(fd);
  CHECK_THAT(testing::ReadFileOrEmpty(log_path), Catch::Contains("hosts.json is not a JSON array of hosts; copied to"));
  size_t copies = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path() + "/ssh")) {
    if (entry.path().filename().string().rfind("hosts.json.unreadable-", 0) == 0) {
      ++copies;
      CHECK(testing::ReadFileOrEmpty(entry.path().string()) == "{not json");
    }
  }
  CHECK(copies == 1);
}

TEST_CASE("SSH hosts: hosts.json is written with the states' names, and an unknown state is refused by name") {
  testing::TempDir dir;
  DaemonConfig config = ConfigIn(dir);
  {
    auto hosts = SshHosts::Open(config, Quiet());
    REQUIRE(hosts.ok());
    REQUIRE((*hosts)->SetState("web1", HostState::kNeedsHuman, "revert failed", 3).ok());
  }
  std::ifstream written(dir.path() + "/ssh/hosts.json");
  nlohmann::json j = nlohmann::json::parse(written);
  CHECK(j[0]["state"] == "needs_human");
  CHECK(HostStateName(HostState::kRunning) == "running");
  CHECK(ParseHostState("idle") == HostState::kIdle);
  CHECK_FALSE(ParseHostState("broken").has_value());

  // An entry with an unknown state is skipped (logged, naming the file and entry) and kept in the file.
  for (const char* state : {R"("broken")", "7"}) {
    std::ofstream(dir.path() + "/ssh/hosts.json")
        << R"([{"name":"ops@db1","host":"ops@db1","state":)" << state << "}]";
    const std::string log_path = dir.path() + "/log";
    int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    REQUIRE(fd >= 0);
    {
      Logger log(LogLevel::kInfo, Logger::Style::kPlain, fd);
      auto hosts = SshHosts::Open(config, log);
      REQUIRE(hosts.ok());
      CHECK_FALSE((*hosts)->Find("ops@db1"));
      REQUIRE((*hosts)->FromSubmit("root@10.0.0.5", HostRegistration::kMayRegister).ok());
    }
    close(fd);
    CHECK_THAT(testing::ReadFileOrEmpty(log_path),
               Catch::Contains("hosts.json: skipped entry") &&
                   Catch::Contains("host ops@db1 has the state " + std::string(state)));
    nlohmann::json kept = nlohmann::json::parse(testing::ReadFileOrEmpty(dir.path() + "/ssh/hosts.json"));
    CHECK(kept.size() == 3);  // web1, the new host, and the skipped entry as it was
    CHECK(kept.back()["name"] == "ops@db1");
  }
}

}  // namespace
}  // namespace temper
