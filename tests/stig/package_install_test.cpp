// Package installs and removals on a real rootfs target: the target's own apt and dpkg in the
// sandbox, from a package cache over a flat repository the test makes (no network), with the
// maintainer scripts running inside; revert restores the exact tree.
#include "stig/package_install.h"

#include <unistd.h>

#include <filesystem>

#include <catch2/catch.hpp>

#include "rootfs_fixture.h"
#include "scratch_space.h"
#include "test_repository.h"
#include "tree_listing.h"

namespace temper::stig {
namespace {

namespace fs = std::filesystem;
using testing::ScopedTarget;

SandboxLimits Limits() {
  SandboxLimits l;
  l.timeout = std::chrono::minutes(5);
  return l;
}

// A package cache over a fresh test repository, removed at the end of the test.
struct RepoCache {
  testing::TestRepository repo;
  ::temper::testing::ScratchPath dir;
  PackageCacheOptions options;
  explicit RepoCache(const std::string& name) : dir("package-cache-" + name) {
    options.dir = dir.path();
    options.sources = {repo.Source()};
  }
};

std::string Shell(RootfsTarget& t, const std::string& command) {
  auto r = t.Run(command, Limits());
  REQUIRE(r.ok());
  return r->out;
}

TEST_CASE("Packages install from the cache inside the sandbox, and revert restores the exact tree",
          "[stig][package_install][snapshot]") {
  RepoCache cache("install");
  ScopedTarget t("pkg-install", cache.options);
  auto before = testing::TreeListing(t->root());
  auto apt_cache_before = testing::TreeListing(t->root() + "/var/cache/apt");
  auto snap = t->Snapshot();
  REQUIRE(snap.ok());

  auto installed = InstallPackages(*t, {"temper-test-dep"}, Limits());
  INFO(installed.status().ToString());
  REQUIRE(installed.ok());
  CHECK(installed->changed ==
        std::vector<std::string>{"Setting up temper-test-ok (1.0)", "Setting up temper-test-dep (1.0)"});
  // The cache was only mounted for the command: the target's tree holds none of it (and the
  // target's own apt cache is as it was; the next apt run there will refresh it).
  CHECK(testing::TreeListing(t->root() + "/var/cache/apt") == apt_cache_before);
  CHECK_FALSE(fs::exists(t->root() + "/var/cache/apt/temper"));
  CHECK(Shell(*t, "dpkg-query -W -f '${Package} ${Status}\\n' temper-test-ok temper-test-dep") ==
        "temper-test-dep install ok installed\ntemper-test-ok install ok installed\n");
  CHECK(Shell(*t, "cat /usr/share/temper-test/dep") == "dep\n");
  CHECK(Shell(*t, "apt-mark showauto temper-test-ok") == "temper-test-ok\n");  // a dependency, marked so
  // The cache was only mounted for the command: the target's tree holds none of it.
  CHECK_FALSE(fs::exists(t->root() + "/var/cache/apt/temper"));
  // The host's dpkg never saw the package.
  CHECK_FALSE(fs::exists("/usr/share/temper-test/dep"));

  REQUIRE(t->Revert(*snap).ok());
  CHECK(testing::TreeListing(t->root()) == before);
}

TEST_CASE("Install failures are named errors that carry apt's and dpkg's lines", "[stig][package_install]") {
  RepoCache cache("install-errors");
  ScopedTarget t("pkg-errors", cache.options);

  auto unknown = InstallPackages(*t, {"temper-no-such-package"}, Limits());
  CHECK(unknown.status().code() == StatusCode::kNotFound);
  CHECK(unknown.status().message().find("temper-no-such-package is not in the archive") != std::string::npos);

  auto conflict = InstallPackages(*t, {"temper-test-ok", "temper-test-conflict"}, Limits());
  CHECK(conflict.status().code() == StatusCode::kFailedPrecondition);
  CHECK(conflict.status().message().find("Conflicts: temper-test-ok") != std::string::npos);

  auto failing = InstallPackages(*t, {"temper-test-failing"}, Limits());
  CHECK(failing.status().code() == StatusCode::kFailedPrecondition);
  CHECK(failing.status().message().find("a maintainer script failed") != std::string::npos);
  CHECK(failing.status().message().find("temper-test-failing: configuring fails on purpose") != std::string::npos);
  CHECK(failing.status().message().find("post-installation script subprocess returned error exit status 1") !=
        std::string::npos);

  CHECK(InstallPackages(*t, {"temper-test-ok;reboot"}, Limits()).status().code() == StatusCode::kInvalidArgument);

  ScopedTarget bare("pkg-nocache");
  auto none = InstallPackages(*bare, {"temper-test-ok"}, Limits());
  CHECK(none.status().code() == StatusCode::kFailedPrecondition);
  CHECK(none.status().message().find("no package cache") != std::string::npos);
}

TEST_CASE("Removals take only the packages named", "[stig][package_install]") {
  RepoCache cache("remove");
  ScopedTarget t("pkg-remove", cache.options);
  REQUIRE(InstallPackages(*t, {"temper-test-dep"}, Limits()).ok());

  auto cascade = RemovePackages(*t, {"temper-test-ok"}, false, Limits());
  CHECK(cascade.status().code() == StatusCode::kFailedPrecondition);
  CHECK(cascade.status().message().find("would also remove temper-test-dep") != std::string::npos);
  CHECK(Shell(*t, "dpkg-query -W -f '${Status}' temper-test-ok") == "install ok installed");

  auto purged = RemovePackages(*t, {"temper-test-ok", "temper-test-dep"}, true, Limits());
  INFO(purged.status().ToString());
  REQUIRE(purged.ok());
  CHECK(std::count(purged->changed.begin(), purged->changed.end(), "Removing temper-test-dep (1.0)") == 1);
  CHECK(Shell(*t, "dpkg-query -W -f '${Status}' temper-test-ok 2>&1") ==
        "dpkg-query: no packages found matching temper-test-ok\n");

  // Known to the target's apt (it is in Debian) but not installed: nothing to do, not an error.
  auto again = RemovePackages(*t, {"vlock"}, false, Limits());
  INFO(again.status().ToString());
  REQUIRE(again.ok());
  CHECK(again->changed.empty());
  CHECK(again->output.find("nothing to remove") != std::string::npos);

  // Purged and not in the target's indexes: unknown.
  CHECK(RemovePackages(*t, {"temper-test-dep"}, false, Limits()).status().code() == StatusCode::kNotFound);
  auto essential = RemovePackages(*t, {"bash"}, false, Limits());
  CHECK(essential.status().code() == StatusCode::kFailedPrecondition);
  CHECK(Shell(*t, "dpkg-query -W -f '${Status}' bash") == "install ok installed");
}

TEST_CASE("The packages a fix script installs are read from its apt-get lines", "[stig][package_install]") {
  // As SSG 0.1.65's generated fix.sh writes them, and as people do.
  const char* script = R"(if [ ! -f /.dockerenv ] && [ ! -f /run/.containerenv ]; then
DEBIAN_FRONTEND=noninteractive apt-get install -y "aide"
fi
DEBIAN_FRONTEND=noninteractive apt-get install -y "vlock"
apt-get install -y -q chrony ufw && systemctl enable ufw  # and again: apt-get install aide
apt install --no-install-recommends 'opensc-pkcs11'; apt-get remove -y telnetd
apt-get install -y "$pkg" ${OTHER}
echo "apt-get install is what fixes use")";
  CHECK(PackagesInstalledBy(script) == std::vector<std::string>{"aide", "vlock", "chrony", "ufw", "opensc-pkcs11"});
}

// With systemd not running, systemctl still enables, disables and masks units by their symlinks,
// as on a host (`systemctl --root` style): what SSG's service fixes and the Worker rely on. Only
// the runtime verbs (start, --now) fail, saying so.
TEST_CASE("Units are enabled and masked by their symlinks with systemd not running",
          "[stig][package_install][services]") {
  RepoCache cache("services");
  ScopedTarget t("pkg-services", cache.options);
  REQUIRE(InstallPackages(*t, {"temper-test-service"}, Limits()).ok());
  // Installing does not enable it (the package has no maintainer scripts that would).
  CHECK(Shell(*t, "systemctl is-enabled temper-test.service") == "disabled\n");

  CHECK(Shell(*t, "systemctl enable temper-test.service >/dev/null 2>&1; echo $?") == "0\n");
  CHECK(fs::read_symlink(t->root() + "/etc/systemd/system/multi-user.target.wants/temper-test.service") ==
        "/lib/systemd/system/temper-test.service");
  CHECK(Shell(*t, "systemctl is-enabled temper-test.service") == "enabled\n");

  CHECK(Shell(*t, "systemctl mask ctrl-alt-del.target >/dev/null 2>&1; echo $?") == "0\n");
  CHECK(fs::read_symlink(t->root() + "/etc/systemd/system/ctrl-alt-del.target") == "/dev/null");

  CHECK(Shell(*t, "systemctl disable temper-test.service >/dev/null 2>&1; echo $?") == "0\n");
  CHECK_FALSE(fs::exists(t->root() + "/etc/systemd/system/multi-user.target.wants/temper-test.service"));

  auto start = t->Run("systemctl start temper-test.service", Limits());
  REQUIRE(start.ok());
  CHECK_FALSE(start->Succeeded());
  CHECK(start->err.find("System has not been booted with systemd") != std::string::npos);
}

}  // namespace
}  // namespace temper::stig
