#include "orchestrator/loop/twins.h"

#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>

#include "orchestrator/temp_dir.h"

namespace temper {
namespace {

namespace fs = std::filesystem;

const Logger& Quiet() {
  static const Logger log(LogLevel::kError);
  return log;
}

DaemonConfig ConfigIn(const testing::TempDir& dir) {
  auto config = ParseDaemonConfig(
      fmt::format("state_dir: {}\ntargets:\n  lab:\n    type: rootfs\n    path: /x\n", dir.path()), "t.yaml");
  REQUIRE(config.ok());
  return *config;
}

// What CopyHostRoot would leave: a root with one file, and its record.
Result<stig::HostCopyRecord> FakeCopy(const std::string& root) {
  fs::create_directories(root + "/etc");
  std::ofstream(root + "/etc/hostname") << "web1\n";
  stig::HostCopyRecord record;
  record.host = "root@web1:22";
  record.login = "root";
  record.copied_at = std::chrono::system_clock::now();
  record.bytes = 4096;
  record.files = 2;
  record.excluded = {"/proc", "/srv/data"};
  record.packages = {{"bash", "5.2"}, {"openssh-server", "9.2"}};
  record.os_release = "ID=debian\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n";
  return record;
}

TEST_CASE("Twins: a copy becomes a rootfs target with its record, kept across restarts, then removed") {
  testing::TempDir dir;
  DaemonConfig config = ConfigIn(dir);
  const std::string twins_dir = dir.path() + "/twins";
  {
    auto twins = Twins::Open(config, nullptr, Quiet());
    REQUIRE(twins.ok());
    CHECK((*twins)->List().empty());
    auto twin = (*twins)->Create("web-twin", FakeCopy);
    INFO(twin.status().ToString());
    REQUIRE(twin.ok());
    CHECK(twin->host == "root@web1:22");
    CHECK(twin->packages == 2);
    CHECK(twin->os_release == "Debian GNU/Linux 12 (bookworm)");
    CHECK(twin->Target().type == "rootfs");
    CHECK(twin->Target().path == twins_dir + "/web-twin");
    CHECK(fs::is_regular_file(twins_dir + "/web-twin/root/etc/hostname"));
    CHECK(fs::is_directory(twins_dir + "/web-twin/state"));
    std::ifstream packages(twins_dir + "/web-twin/packages.txt");
    std::string text((std::istreambuf_iterator<char>(packages)), std::istreambuf_iterator<char>());
    CHECK(text == "bash 5.2\nopenssh-server 9.2\n");

    // Names: a configured target's, a twin's and malformed ones are refused.
    CHECK((*twins)->Create("lab", FakeCopy).status().code() == StatusCode::kAlreadyExists);
    CHECK((*twins)->Create("web-twin", FakeCopy).status().code() == StatusCode::kAlreadyExists);
    for (const std::string& bad :
         std::vector<std::string>{"", "Web", "-x", "a/b", "..", "root@web1", std::string(65, 'a')}) {
      INFO(bad);
      CHECK((*twins)->Create(bad, FakeCopy).status().code() == StatusCode::kInvalidArgument);
    }
    // A copy that fails leaves nothing.
    auto failed = (*twins)->Create("db-twin", [](const std::string& root) -> Result<stig::HostCopyRecord> {
      fs::create_directories(root + "/etc");
      return Status::ResourceExhausted("over max_bytes");
    });
    CHECK(failed.status().code() == StatusCode::kResourceExhausted);
    CHECK_FALSE(fs::exists(twins_dir + "/db-twin"));
  }
  {
    auto twins = Twins::Open(config, nullptr, Quiet());
    REQUIRE(twins.ok());
    REQUIRE((*twins)->List().size() == 1);
    CHECK((*twins)->List()[0].bytes == 4096);
    CHECK((*twins)->List()[0].excluded == std::vector<std::string>{"/proc", "/srv/data"});
    REQUIRE((*twins)->Remove("web-twin").ok());
    CHECK_FALSE(fs::exists(twins_dir + "/web-twin"));
    CHECK((*twins)->Remove("web-twin").status().code() == StatusCode::kNotFound);
  }
}

TEST_CASE("Twins: a hostile or broken twins directory never stops the start") {
  testing::TempDir dir;
  DaemonConfig config = ConfigIn(dir);
  const std::string twins_dir = dir.path() + "/twins";
  {
    auto twins = Twins::Open(config, nullptr, Quiet());
    REQUIRE(twins.ok());
    REQUIRE((*twins)->Create("good", FakeCopy).ok());
  }
  auto write = [&](const std::string& path, const std::string& text) {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path) << text;
  };
  write(twins_dir + "/notjson/twin.json", "[");
  write(twins_dir + "/renamed/twin.json", R"({"version": 1, "name": "good", "host": "root@x:22"})");
  write(twins_dir + "/wrongtype/twin.json", R"({"version": 1, "name": "wrongtype", "host": 7})");
  write(twins_dir + "/negative/twin.json", R"({"version": 1, "name": "negative", "host": "h", "bytes": -1})");
  write(twins_dir + "/huge/twin.json", std::string(2 << 20, ' '));
  write(twins_dir + "/lab/twin.json", R"({"version": 1, "name": "lab", "host": "root@x:22"})");
  write(twins_dir + "/Bad Name/twin.json", "{}");
  fs::create_directories(twins_dir + "/unfinished/root/etc");
  fs::create_symlink("/etc", twins_dir + "/link");

  auto twins = Twins::Open(config, nullptr, Quiet());
  REQUIRE(twins.ok());
  REQUIRE((*twins)->List().size() == 1);
  CHECK((*twins)->List()[0].name == "good");
  // A copy that never finished is removed; what does not parse is kept for a person to look at.
  CHECK_FALSE(fs::exists(twins_dir + "/unfinished"));
  CHECK(fs::exists(twins_dir + "/notjson/twin.json"));
  CHECK(fs::exists(twins_dir + "/huge/twin.json"));
  CHECK(fs::is_directory("/etc"));
}

}  // namespace
}  // namespace temper
