// TargetPlatform (stig/platform_id.h): what a target runs, read through the target's own file reads
// from a real Debian 12 root (the suite's shared rootfs), os-release's quoting, dpkg's architecture
// with and without /var/lib/dpkg/arch, a target that cannot be told, and the JSON form both ways.
#include "stig/platform_id.h"

#include <catch2/catch.hpp>

#include "stig/rootfs_fixture.h"

namespace temper::stig {
namespace {

using testing::ScopedTarget;

SandboxLimits QuickLimits() {
  SandboxLimits l;
  l.timeout = std::chrono::seconds(60);
  return l;
}

TEST_CASE("the platform of a real Debian root: os-release, dpkg's architecture and installed packages") {
  ScopedTarget t("platform");
  auto platform = ReadTargetPlatform(*t);
  INFO(platform.status().ToString());
  REQUIRE(platform.ok());
  CHECK(platform->os == "debian");
  CHECK(platform->version == "12");
  CHECK(platform->arch == "amd64");
  CHECK(platform->Label() == "debian 12 amd64");
  REQUIRE(platform->packages.count("dpkg") == 1);
  CHECK_FALSE(platform->packages.at("dpkg").empty());
  CHECK(platform->packages.count("base-files") == 1);
  CHECK(platform->packages.count("aide") == 0);  // the shared root does not have it
}

TEST_CASE("os-release values are read as a shell reads them, whichever file holds them") {
  ScopedTarget t("platform-quotes");
  // /etc/os-release is a symlink to /usr/lib/os-release on Debian: writing the link's target is what
  // an image that ships its own os-release does.
  REQUIRE(t->WriteFile("/usr/lib/os-release",
                       "# a comment\n"
                       "NAME=\"Ubuntu\"\n"
                       "ID=Ubuntu\n"
                       "  VERSION_ID = \"20.04\"  \n"
                       "PRETTY_NAME='Ubuntu 20.04.6 LTS \"Focal\"'\n"
                       "ID_LIKE=\"debian \\\"x\\\"\"\n",
                       0644)
              .ok());
  auto platform = ReadTargetPlatform(*t);
  REQUIRE(platform.ok());
  CHECK(platform->os == "ubuntu");  // lower case, as os-release(5) defines ID
  CHECK(platform->version == "20.04");

  SECTION("the link gone, /usr/lib/os-release is read") {
    REQUIRE(t->Run("rm /etc/os-release", QuickLimits()).ok());
    auto fallback = ReadTargetPlatform(*t);
    REQUIRE(fallback.ok());
    CHECK(fallback->os == "ubuntu");
  }
  SECTION("single quotes are literal") {
    REQUIRE(t->WriteFile("/usr/lib/os-release", "ID='rocky'\nVERSION_ID='9.3'\n", 0644).ok());
    auto single = ReadTargetPlatform(*t);
    REQUIRE(single.ok());
    CHECK(single->os == "rocky");
    CHECK(single->version == "9.3");
  }
}

TEST_CASE("without /var/lib/dpkg/arch the architecture comes from the Essential packages") {
  ScopedTarget t("platform-arch");
  REQUIRE(t->Run("rm -f /var/lib/dpkg/arch", QuickLimits()).ok());
  auto platform = ReadTargetPlatform(*t);
  INFO(platform.status().ToString());
  REQUIRE(platform.ok());
  CHECK(platform->arch == "amd64");
}

TEST_CASE("a target whose platform cannot be told is refused, naming the file") {
  ScopedTarget t("platform-unknown");
  SECTION("no ID in os-release") {
    REQUIRE(t->WriteFile("/usr/lib/os-release", "NAME=\"Something\"\nVERSION_ID=1\n", 0644).ok());
    auto platform = ReadTargetPlatform(*t);
    CHECK(platform.status().code() == StatusCode::kFailedPrecondition);
    CHECK(platform.status().message().find("os-release has no ID") != std::string::npos);
  }
  SECTION("no dpkg status") {
    REQUIRE(t->Run("rm /var/lib/dpkg/status", QuickLimits()).ok());
    auto platform = ReadTargetPlatform(*t);
    CHECK(platform.status().code() == StatusCode::kFailedPrecondition);
    CHECK(platform.status().message().find("/var/lib/dpkg/status") != std::string::npos);
  }
}

TEST_CASE("a platform's JSON form round-trips and FromJson refuses what it cannot check") {
  TargetPlatform p;
  p.os = "ubuntu";
  p.version = "20.04";
  p.arch = "amd64";
  p.packages = {{"aide", "0.16.1-1build2"}, {"libc6:i386", "2.31-0ubuntu9"}};
  const std::string json = p.ToJson();
  CHECK(json == R"({"arch":"amd64","os":"ubuntu","packages":{"aide":"0.16.1-1build2","libc6:i386":"2.31-0ubuntu9"},)"
                R"("version":"20.04"})");
  auto back = TargetPlatform::FromJson(json);
  REQUIRE(back.ok());
  CHECK(*back == p);
  CHECK(p.Label() == "ubuntu 20.04 amd64");

  auto refused = [](std::string_view text, std::string_view field) {
    auto r = TargetPlatform::FromJson(text);
    INFO(text);
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK(r.status().message().find(field) != std::string::npos);
  };
  refused("not json", "platform: not JSON");
  refused("[]", "not a JSON object");
  refused(R"({"version":"1","arch":"amd64","packages":{}})", "platform.os: missing");
  refused(R"({"os":"","version":"1","arch":"amd64","packages":{}})", "platform.os: empty");
  refused(R"({"os":"debian","version":12,"arch":"amd64","packages":{}})", "platform.version: not a string");
  refused(R"({"os":"debian","version":"12","arch":"amd64"})", "platform.packages: missing");
  refused(R"({"os":"debian","version":"12","arch":"amd64","packages":[]})", "platform.packages: not a JSON object");
  refused(R"({"os":"debian","version":"12","arch":"amd64","packages":{"aide":1}})", "platform.packages.aide");
  refused(R"({"os":"debian","version":"12","arch":"amd64","packages":{},"kernel":"6.1"})",
          "platform.kernel: unknown field");
}

}  // namespace
}  // namespace temper::stig
