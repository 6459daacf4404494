#include "orchestrator/loop/ssh_hosts.h"

#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "orchestrator/temp_dir.h"

namespace temper {
namespace {

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
    auto hosts = SshHosts::Open(config);
    REQUIRE(hosts.ok());
    REQUIRE((*hosts)->List().size() == 1);
    CHECK((*hosts)->List()[0].configured);
    bool created = false;
    auto t = (*hosts)->FromSubmit("root@10.0.0.9:2222", &created);
    REQUIRE(t.ok());
    CHECK(created);
    CHECK(t->name == "root@10.0.0.9:2222");
    CHECK(t->type == "ssh");
    CHECK(t->host == "root@10.0.0.9:2222");
    CHECK((*hosts)->FromSubmit("root@10.0.0.9:2222", &created)->name == t->name);
    CHECK_FALSE(created);
    CHECK(SshHosts::NameFor("ops@db1") == "ops@db1");
    // The configured target for the same login and host, whatever its name.
    CHECK((*hosts)->TargetNameFor("admin@web1:22") == "web1");
    CHECK((*hosts)->TargetNameFor("ops@web2") == "ops@web2");
    CHECK((*hosts)->FromSubmit("admin@web1:22", &created)->name == "web1");
    CHECK_FALSE(created);
    CHECK((*hosts)->FromSubmit("web1").status().code() == StatusCode::kInvalidArgument);
    REQUIRE((*hosts)->SetState("web1", HostState::kRunning, "", 4).ok());
    REQUIRE((*hosts)->SetState(t->name, HostState::kNeedsHuman, "revert failed: connection refused", 5).ok());
    CHECK((*hosts)->Clear("web1").status().code() == StatusCode::kFailedPrecondition);
    CHECK((*hosts)->SetState("nope", HostState::kIdle, "", 0).code() == StatusCode::kNotFound);
  }
  // A restart: the submitted host and both states are back; "running" was interrupted.
  auto hosts = SshHosts::Open(config);
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

TEST_CASE("SSH hosts: a damaged hosts.json stops the daemon naming the file") {
  testing::TempDir dir;
  DaemonConfig config = ConfigIn(dir);
  std::filesystem::create_directories(dir.path() + "/ssh");
  std::ofstream(dir.path() + "/ssh/hosts.json") << "{not json";
  auto hosts = SshHosts::Open(config);
  CHECK(hosts.status().code() == StatusCode::kDataLoss);
  CHECK_THAT(hosts.status().message(), Catch::Contains("hosts.json"));
}

TEST_CASE("SSH hosts: hosts.json is written with the states' names, and an unknown state is refused by name") {
  testing::TempDir dir;
  DaemonConfig config = ConfigIn(dir);
  {
    auto hosts = SshHosts::Open(config);
    REQUIRE(hosts.ok());
    REQUIRE((*hosts)->SetState("web1", HostState::kNeedsHuman, "revert failed", 3).ok());
  }
  std::ifstream written(dir.path() + "/ssh/hosts.json");
  nlohmann::json j = nlohmann::json::parse(written);
  CHECK(j[0]["state"] == "needs_human");
  CHECK(HostStateName(HostState::kRunning) == "running");
  CHECK(ParseHostState("idle") == HostState::kIdle);
  CHECK_FALSE(ParseHostState("broken").has_value());

  for (const char* state : {R"("broken")", "7"}) {
    std::ofstream(dir.path() + "/ssh/hosts.json")
        << R"([{"name":"web1","host":"admin@web1","configured":true,"state":)" << state << "}]";
    auto hosts = SshHosts::Open(config);
    CHECK(hosts.status().code() == StatusCode::kDataLoss);
    CHECK_THAT(hosts.status().message(), Catch::Contains("hosts.json: host web1 has the state " + std::string(state)));
  }
}

}  // namespace
}  // namespace temper
