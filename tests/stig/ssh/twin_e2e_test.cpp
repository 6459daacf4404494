// Twins end to end: the real temperd and `temper` CLI copy a real SSH host (a network namespace
// running sshd) into a twin with `temper twin create`, list it, refuse a name that is already a
// target's, run a batch on the twin as on any rootfs target, and remove it.
#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "orchestrator/daemon_process.h"
#include "scripted_model/scripted_answers.h"
#include "scripted_model/scripted_model_server.h"
#include "stig/ssh/ssh_test_support.h"

namespace temper::testing {
namespace {

namespace fs = std::filesystem;

// A JSON count as protobuf's JSON writes uint64 (a string), or a number.
uint64_t Count(const nlohmann::json& value) {
  return value.is_string() ? std::stoull(value.get<std::string>()) : value.get<uint64_t>();
}

TEST_CASE("temper twin create copies an SSH host into a target that batches run on", "[ssh][twin_e2e]") {
  TEMPER_SKIP_WITHOUT_SSH_HOSTS();
  auto host = StartHost("twin-e2e");  // before any thread: the test process unshares its mounts
  fs::create_directories(host->tree() + "/srv/data");
  std::ofstream(host->tree() + "/srv/data/dump") << "left out\n";
  auto server = scripted::ScriptedModelServer::Start(scripted::ModelScript{});
  REQUIRE(server.ok());
  TempDir dir;
  fs::create_directories(dir / "roots/lab");
  DaemonOptions options;
  options.models_yaml = (*server)->ModelsYaml();
  options.content_dirs = {"/usr/share/xml/scap/ssg/content"};
  options.ssh_yaml = fmt::format("key_file: {}\nconnect_timeout: 5s", TestRoot().client_key);
  options.extra_yaml = "twins:\n  max_bytes: 4GiB\n  exclude: [/srv/data]\n";
  DaemonProcess daemon(dir, options);
  REQUIRE(daemon.Start().ok());
  auto cli = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {TemperBinary(), "--socket", daemon.socket_path()});
    return RunProcess(args);
  };
  const std::string login = "root@" + host->address();
  ProcessResult accept = cli({"hosts", "accept", login, "--fingerprint", host->fingerprint()});
  INFO(accept.out + accept.err);
  REQUIRE(accept.exit_code == 0);

  ProcessResult created = cli({"twin", "create", "web-twin", "--from-host", login});
  INFO(created.out + created.err + daemon.Log());
  REQUIRE(created.exit_code == 0);
  CHECK_THAT(created.out, Catch::Contains("twin web-twin from root@" + host->address()));
  CHECK_THAT(created.out, Catch::Contains("/srv/data"));

  ProcessResult listed = cli({"twin", "list", "--json"});
  INFO(listed.out + listed.err);
  REQUIRE(listed.exit_code == 0);
  nlohmann::json twins = nlohmann::json::parse(listed.out)["twins"];
  REQUIRE(twins.size() == 1);
  CHECK(twins[0]["name"] == "web-twin");
  CHECK(twins[0]["host"] == fmt::format("root@{}:22", host->address()));
  CHECK(Count(twins[0]["packages"]) > 50);
  ProcessResult table = cli({"twin", "list"});
  CHECK_THAT(table.out, Catch::Contains("web-twin"));
  CHECK_THAT(table.out, Catch::Contains(host->address()));
  const std::string twin_dir = twins[0]["path"].get<std::string>();
  CHECK(fs::is_regular_file(twin_dir + "/twin.json"));
  CHECK(fs::is_regular_file(twin_dir + "/root/etc/os-release"));
  CHECK_FALSE(fs::exists(twin_dir + "/root/srv/data"));

  SECTION("a name that is already a target's is refused") {
    ProcessResult taken = cli({"twin", "create", "lab", "--from-host", login});
    CHECK(taken.exit_code != 0);
    CHECK_THAT(taken.err, Catch::Contains("'lab' is a target"));
    ProcessResult again = cli({"twin", "create", "web-twin", "--from-host", login});
    CHECK(again.exit_code != 0);
    CHECK_THAT(again.err, Catch::Contains("twin web-twin exists"));
  }
  SECTION("a batch runs on the twin, then the twin is removed") {
    ProcessResult submitted = cli({"submit", "-t", "web-twin", "-d", "ssg-ubuntu2004-ds.xml", "-p", "stig", "-r",
                                   "accounts_tmout", "--max-attempts", "2", "--json"});
    INFO(submitted.out + submitted.err);
    REQUIRE(submitted.exit_code == 0);
    const std::string batch = nlohmann::json::parse(submitted.out)["id"].get<std::string>();
    temper::v1::GetBatchRequest request;
    request.set_batch_id(batch);
    temper::v1::Batch b;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(10);
    while (std::chrono::steady_clock::now() < deadline) {
      REQUIRE(daemon.Stub()->GetBatch(CallContext(30).get(), request, &b).ok());
      if (b.state() == temper::v1::BATCH_STATE_COMPLETED || b.state() == temper::v1::BATCH_STATE_FAILED ||
          b.state() == temper::v1::BATCH_STATE_CANCELLED) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    INFO(daemon.Log());
    CHECK(b.state() == temper::v1::BATCH_STATE_COMPLETED);
    // The batch worked on the copy: the host's own /etc/profile.d holds no fix of it.
    CHECK_FALSE(fs::exists(host->tree() + "/etc/profile.d/tmout.sh"));

    ProcessResult removed = cli({"twin", "remove", "web-twin"});
    INFO(removed.out + removed.err);
    CHECK(removed.exit_code == 0);
    CHECK_FALSE(fs::exists(twin_dir));
    ProcessResult empty = cli({"twin", "list"});
    CHECK_THAT(empty.out, Catch::Contains("no twins"));
  }
}

}  // namespace
}  // namespace temper::testing
