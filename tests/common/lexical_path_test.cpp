// Paths as text.
#include "common/lexical_path.h"

#include <catch2/catch.hpp>

using namespace temper;

TEST_CASE("paths normalize lexically") {
  CHECK(NormalizePath("/etc/") == "/etc");
  CHECK(NormalizePath("//etc/./ssh//sshd_config") == "/etc/ssh/sshd_config");
  CHECK(NormalizePath("/tmp/../root/.ssh") == "/root/.ssh");
  CHECK(NormalizePath("/../..") == "/");
  CHECK(NormalizePath("a/./b/../c") == "a/c");
  CHECK(NormalizePath(".") == "");
  CHECK(PathWithin("/var/lib/temper/undo", "/var/lib/temper"));
  CHECK(PathWithin("/var/lib/temper", "/var/lib/temper"));
  CHECK_FALSE(PathWithin("/var/lib/temperx", "/var/lib/temper"));
  CHECK(PathWithin("/anything", "/"));
}
