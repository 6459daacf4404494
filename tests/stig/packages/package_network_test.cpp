// The package cache against Debian's real archive (needs deb.debian.org; ctest label "network",
// so `ctest -LE network` leaves these out). Kept to one small package: vlock (34 kB, no new
// dependencies on the shared root). The cache lives in the build tree and is reused between runs,
// like temperd's.
#include <filesystem>

#include <catch2/catch.hpp>

#include "stig/baseline.h"
#include "stig/package_install.h"
#include "stig/rootfs_fixture.h"

namespace temper::stig {
namespace {

namespace fs = std::filesystem;
using testing::ScopedTarget;

PackageCacheOptions ArchiveCache() {
  PackageCacheOptions o;
  o.dir = std::string(TEMPER_BINARY_DIR) + "/package-cache-network";
  return o;  // Debian 12's archive, the default source
}

SandboxLimits Limits() {
  SandboxLimits l;
  l.timeout = std::chrono::minutes(5);
  return l;
}

TEST_CASE("vlock installs into a target from Debian's archive, resolved against the target", "[network]") {
  ScopedTarget t("pkg-archive", ArchiveCache());
  auto snap = t->Snapshot();
  REQUIRE(snap.ok());

  // libpam-pwquality is installed in the root, so nothing needs fetching for it.
  auto present = t->PreparePackages({"libpam-pwquality"});
  INFO(present.status().ToString());
  REQUIRE(present.ok());
  CHECK(present->files.empty());

  auto installed = InstallPackages(*t, {"vlock"}, Limits());
  INFO(installed.status().ToString());
  REQUIRE(installed.ok());
  REQUIRE(installed->changed.size() == 1);
  CHECK(installed->changed[0].starts_with("Setting up vlock ("));
  CHECK(fs::exists(t->root() + "/usr/bin/vlock"));
  bool cached = false;
  for (const auto& e : fs::directory_iterator(ArchiveCache().dir + "/archives")) {
    cached = cached || e.path().filename().string().starts_with("vlock_");
  }
  CHECK(cached);

  auto unknown = InstallPackages(*t, {"temper-no-such-package"}, Limits());
  CHECK(unknown.status().code() == StatusCode::kNotFound);
  CHECK(unknown.status().message().find("deb.debian.org") != std::string::npos);

  REQUIRE(t->Revert(*snap).ok());
  CHECK_FALSE(fs::exists(t->root() + "/usr/bin/vlock"));
}

TEST_CASE("The baseline's fix script installs its packages from the cache", "[network][baseline]") {
  static const Result<Content> content = Content::Load(kUbuntu2004Datastream, "stig");
  REQUIRE(content.ok());
  Logger log(LogLevel::kWarning);
  Evaluator ev(*content, {}, log);
  ScopedTarget t("baseline-archive", ArchiveCache());
  BaselineOptions opts;
  opts.rule_ids = {"vlock_installed"};
  opts.output_dir = t.dir() + "/baseline";
  auto r = RunBaseline(*t, ev, opts, log);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  INFO(r->ToText());
  REQUIRE(r->rules.size() == 1);
  CHECK(r->rules[0].before == Verdict::kFail);
  CHECK(r->rules[0].after == Verdict::kPass);
  CHECK(r->packages_prepared == std::vector<std::string>{"vlock"});
  CHECK(r->packages_unavailable.empty());
  CHECK(r->ToText().find("packages from the cache") != std::string::npos);
}

}  // namespace
}  // namespace temper::stig
