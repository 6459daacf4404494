// Fix bundles captured from real overlay stacks: a rootfs target over the shared root, changed
// through its sandbox by ordinary commands and the real apt and dpkg, so every byte, owner, mode,
// link and deletion is read back from the layers as the kernel left them.
#include "stig/rootfs/overlay_fix_capture.h"

#include <map>

#include <catch2/catch.hpp>

#include "common/md5.h"
#include "stig/package_install.h"
#include "stig/rootfs_fixture.h"
#include "stig/test_repository.h"

namespace temper::stig {
namespace {

using testing::ScopedTarget;

SandboxLimits Limits() {
  SandboxLimits l;
  l.timeout = std::chrono::minutes(5);
  return l;
}

void Shell(Target& t, const std::string& command) {
  auto r = t.Run("set -e; " + command, Limits());
  REQUIRE(r.ok());
  INFO(command << "\n" << r->err);
  REQUIRE(r->Succeeded());
}

std::map<std::string, BundleFile> ByPath(const FixBundle& b) {
  std::map<std::string, BundleFile> out;
  for (const BundleFile& f : b.files) out[f.path] = f;
  return out;
}

FixBundle Capture(Target& t) {
  auto b = t.FixSinceSnapshot();
  INFO(b.status().ToString());
  REQUIRE(b.ok());
  return *b;
}

TEST_CASE("A fix is captured whole: bytes, owners, modes, links and deletions before and after",
          "[stig][fix_bundle][rootfs_target]") {
  ScopedTarget t("capture");
  REQUIRE(t->Snapshot().ok());
  // Copied up unchanged: left out, as in the change set.
  Shell(*t,
        "cat /etc/hostname > /tmp/h && cat /tmp/h > /etc/hostname && rm /tmp/h; "
        "printf 'Authorized use only\\n' > /etc/issue.net; "
        "chmod 0600 /etc/motd; chown 12:34 /etc/motd; "
        "mkdir -m 0750 /etc/fixdir; printf 'a\\0b' > /etc/fixdir/bin; chmod 0640 /etc/fixdir/bin; "
        "ln -s /etc/issue.net /etc/fixdir/link; rm /etc/host.conf; rm -r /etc/cron.weekly");
  FixBundle b = Capture(*t);
  auto files = ByPath(b);

  CHECK_FALSE(files.contains("/etc/hostname"));
  REQUIRE(files.contains("/etc/issue.net"));
  const BundleFile& issue = files["/etc/issue.net"];
  REQUIRE(issue.before);
  REQUIRE(issue.after);
  CHECK(issue.after->content == "Authorized use only\n");
  CHECK(issue.after->sha256 == ContentSha256("Authorized use only\n"));
  CHECK(issue.before->content.size() == issue.before->state.size);
  CHECK(issue.before->content != issue.after->content);

  REQUIRE(files["/etc/motd"].after);
  CHECK(files["/etc/motd"].after->state.mode == 0600);
  CHECK(files["/etc/motd"].after->state.uid == 12);
  CHECK(files["/etc/motd"].after->state.gid == 34);
  CHECK(files["/etc/motd"].before->content == files["/etc/motd"].after->content);

  CHECK(files["/etc/fixdir"].before == std::nullopt);
  CHECK(files["/etc/fixdir"].after->state.type == FileType::kDir);
  CHECK(files["/etc/fixdir"].after->state.mode == 0750);
  CHECK(files["/etc/fixdir/bin"].after->content == std::string("a\0b", 3));
  CHECK(files["/etc/fixdir/bin"].after->state.mode == 0640);
  CHECK(files["/etc/fixdir/link"].after->state.type == FileType::kSymlink);
  CHECK(files["/etc/fixdir/link"].after->state.link == "/etc/issue.net");

  REQUIRE(files["/etc/host.conf"].before);
  CHECK(files["/etc/host.conf"].after == std::nullopt);
  CHECK_FALSE(files["/etc/host.conf"].before->content.empty());
  // A deleted directory is carried with what it held, so a replay deletes each (deepest first).
  CHECK(files["/etc/cron.weekly"].before->state.type == FileType::kDir);
  CHECK(files["/etc/cron.weekly"].after == std::nullopt);
  bool weekly_child = false;
  for (const auto& [path, f] : files) weekly_child = weekly_child || path.starts_with("/etc/cron.weekly/");
  CHECK(weekly_child);

  // The same paths the change set lists.
  auto changes = t->ChangesSinceSnapshot();
  REQUIRE(changes.ok());
  REQUIRE(changes->files.size() == b.files.size());
  for (std::size_t i = 0; i < b.files.size(); ++i) CHECK(changes->files[i].path == b.files[i].path);

  // And through JSON unchanged.
  auto back = FixBundle::FromJson(b.ToJson());
  INFO(back.status().ToString());
  REQUIRE(back.ok());
  CHECK(*back == b);
}

TEST_CASE("A fork's fix is what it changed since it was made", "[stig][fix_bundle][fork]") {
  ScopedTarget t("capture-fork");
  Shell(*t, "printf 'one\\n' > /etc/first");
  REQUIRE(t->Snapshot().ok());
  auto fork = t->Fork();
  REQUIRE(fork.ok());
  Shell(**fork, "printf 'two\\n' > /etc/second");
  FixBundle b = Capture(**fork);
  REQUIRE(b.files.size() == 1);
  CHECK(b.files[0].path == "/etc/second");
  CHECK(b.files[0].after->content == "two\n");
}

TEST_CASE("A file over a bundle's limit fails the capture, naming the path and the limit",
          "[stig][fix_bundle][rootfs_target]") {
  ScopedTarget t("capture-big");
  REQUIRE(t->Snapshot().ok());
  Shell(*t, "head -c " + std::to_string(kMaxBundleFileBytes + 1) + " /dev/zero > /etc/too-big");
  auto b = t->FixSinceSnapshot();
  REQUIRE_FALSE(b.ok());
  CHECK(b.status().code() == StatusCode::kFailedPrecondition);
  CHECK(b.status().message().find("/etc/too-big") != std::string::npos);
  CHECK(b.status().message().find("kMaxBundleFileBytes") != std::string::npos);
}

TEST_CASE("A package the fix installed is captured as the package, not its files",
          "[stig][fix_bundle][package_install]") {
  testing::TestRepository repo;
  ::temper::testing::ScratchPath cache_dir("package-cache-capture");
  PackageCacheOptions options{.dir = cache_dir.path(), .sources = {repo.Source()}};
  ScopedTarget t("capture-pkg", options);
  REQUIRE(t->Snapshot().ok());
  auto installed = InstallPackages(*t, {"temper-test-dep"}, Limits());
  INFO(installed.status().ToString());
  REQUIRE(installed.ok());
  // Changed after the install: carried with the package's md5 instead of a before.
  Shell(*t, "printf 'changed\\n' > /usr/share/temper-test/dep; printf 'x\\n' > /etc/fix-own");
  FixBundle b = Capture(*t);
  CHECK(b.packages.installed == std::vector<std::string>{"temper-test-dep 1.0", "temper-test-ok 1.0"});
  auto files = ByPath(b);
  CHECK_FALSE(files.contains("/usr/share/temper-test/ok"));  // as the package ships it
  CHECK_FALSE(files.contains("/usr/share/temper-test"));     // the package's directory
  REQUIRE(files.contains("/usr/share/temper-test/dep"));
  CHECK(files["/usr/share/temper-test/dep"].package == "temper-test-dep");
  CHECK(files["/usr/share/temper-test/dep"].package_md5 == Md5Hex("dep\n"));
  CHECK(files["/usr/share/temper-test/dep"].before == std::nullopt);
  CHECK(files["/usr/share/temper-test/dep"].after->content == "changed\n");
  CHECK(files.contains("/etc/fix-own"));
  for (const auto& [path, f] : files) CHECK_FALSE(IsPackageManagerState(path));
  REQUIRE(FixBundle::FromJson(b.ToJson()).ok());
}

}  // namespace
}  // namespace temper::stig
