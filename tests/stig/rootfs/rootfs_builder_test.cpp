#include "stig/rootfs/rootfs_builder.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>

#include "stig/rootfs_fixture.h"

namespace temper::stig {
namespace {

// Hidden: ctest runs it once as the fixture that builds the shared root (see CMakeLists.txt).
TEST_CASE("Build the shared rootfs", "[.rootfs_build]") {
  Logger log(LogLevel::kInfo);
  auto built = EnsureRootfs(testing::RootfsDir(), RootfsSpec{}, log);
  INFO(built.status().ToString());
  REQUIRE(built.ok());
}

TEST_CASE("The shared rootfs is Debian 12 presented as Ubuntu 20.04 and reused", "[stig][rootfs_builder]") {
  Logger log(LogLevel::kWarning);
  auto again = EnsureRootfs(testing::RootfsDir(), RootfsSpec{}, log);
  REQUIRE(again.ok());
  CHECK_FALSE(again->built);  // the fixture built it; the same spec reuses it
  CHECK(again->root == testing::SharedRoot());

  std::ifstream lsb(again->root + "/etc/lsb-release");
  std::stringstream ss;
  ss << lsb.rdbuf();
  CHECK(ss.str().find("DISTRIB_ID=Ubuntu") != std::string::npos);
  CHECK(ss.str().find("DISTRIB_CODENAME=focal") != std::string::npos);
  CHECK(std::filesystem::exists(again->root + "/etc/debian_version"));
  CHECK(std::filesystem::exists(again->root + "/usr/sbin/sshd"));
  CHECK(std::filesystem::exists(again->root + "/usr/sbin/auditd"));
  CHECK(std::filesystem::exists(again->root + "/usr/bin/sudo"));
  // Fix scripts install these offline from the apt cache; they are downloaded, not installed.
  bool aide_cached = false;
  for (const auto& e : std::filesystem::directory_iterator(again->root + "/var/cache/apt/archives")) {
    if (e.path().filename().string().starts_with("aide_")) aide_cached = true;
  }
  CHECK(aide_cached);
  CHECK_FALSE(std::filesystem::exists(again->root + "/usr/bin/aide"));
}

TEST_CASE("RootfsSpec keys change with the package list", "[stig][rootfs_builder]") {
  RootfsSpec a;
  RootfsSpec b;
  CHECK(a.Key() == b.Key());
  b.packages.push_back("vim-tiny");
  CHECK(a.Key() != b.Key());
  RootfsSpec c;
  c.cached_packages.pop_back();
  CHECK(a.Key() != c.Key());
}

}  // namespace
}  // namespace temper::stig
