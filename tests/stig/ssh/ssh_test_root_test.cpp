#include "stig/ssh/ssh_test_root.h"

#include <unistd.h>

#include <filesystem>

#include <catch2/catch.hpp>

#include "stig/ssh/ssh_test_support.h"

namespace temper::testing {
namespace {

// Hidden: ctest runs it once as the fixture that builds the layer (see CMakeLists.txt).
TEST_CASE("Build the SSH test layer", "[.ssh_root_build]") {
  if (::geteuid() != 0) TEMPER_SKIP("building the SSH test layer needs root");
  Logger log(LogLevel::kInfo);
  auto root = EnsureSshTestRoot(log);
  INFO(root.status().ToString());
  REQUIRE(root.ok());
}

TEST_CASE("The SSH test layer adds oscap, getfattr and the test logins to the shared root", "[ssh][ssh_test_root]") {
  TEMPER_SKIP_WITHOUT_SSH_HOSTS();
  const SshTestRoot& root = TestRoot();
  namespace fs = std::filesystem;
  CHECK(fs::exists(root.layer + "/usr/bin/oscap"));
  CHECK(fs::exists(root.layer + "/usr/bin/getfattr"));
  CHECK(fs::exists(root.layer + "/etc/sudoers.d/temper-admin"));
  CHECK(fs::exists(root.layer + "/home/clerk/.ssh/authorized_keys"));
  CHECK_FALSE(fs::exists(root.layer + "/usr/sbin/sshd"));  // from the shared root, not copied
  CHECK(fs::exists(root.base + "/usr/sbin/sshd"));
  // apt's indexes and archive stay the shared root's.
  CHECK_FALSE(fs::exists(root.layer + "/var/lib/apt/lists"));
}

}  // namespace
}  // namespace temper::testing
