// Change sets read from real overlay stacks: a rootfs target over the shared root, changed through
// its sandbox by ordinary commands (and the real apt, dpkg and systemctl), with frozen layers in
// between, so every path is resolved through layers, whiteouts and opaque directories as the kernel
// resolved it.
#include "stig/rootfs/overlay_changes.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <future>
#include <map>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "scratch_space.h"
#include "stig/package_install.h"
#include "stig/rootfs_fixture.h"
#include "stig/test_repository.h"

namespace temper::stig {
namespace {

namespace fs = std::filesystem;
using testing::ScopedTarget;

SandboxLimits Limits() {
  SandboxLimits l;
  l.timeout = std::chrono::minutes(5);
  return l;
}

void Shell(RootfsTarget& t, const std::string& command) {
  auto r = t.Run("set -e; " + command, Limits());
  REQUIRE(r.ok());
  INFO(command << "\n" << r->err);
  REQUIRE(r->Succeeded());
}

std::map<std::string, FileChange> ByPath(const ChangeSet& cs) {
  std::map<std::string, FileChange> out;
  for (const FileChange& f : cs.files) out[f.path] = f;
  return out;
}

// GNU diff's own output, for comparing with the diffs the change set writes itself.
std::string GnuDiff(const std::string& path, const std::string& before, const std::string& after) {
  ProcessSpec p;
  p.argv = {"diff", "-u", "--label", "a" + path, "--label", "b" + path, before, after};
  auto r = RunProcess(p);
  REQUIRE(r.ok());
  return r->out;
}

ChangeSet Changes(RootfsTarget& t) {
  auto cs = t.ChangesSinceSnapshot();
  INFO(cs.status().ToString());
  REQUIRE(cs.ok());
  // Whatever it finds must survive its stored form.
  auto back = ChangeSet::FromJson(cs->ToJson());
  REQUIRE(back.ok());
  CHECK(*back == *cs);
  return *cs;
}

TEST_CASE("File changes since the last snapshot, resolved through frozen layers", "[stig][overlay_changes]") {
  ScopedTarget t("changes-files");
  REQUIRE(t->Snapshot().ok());
  CHECK(Changes(*t).empty());

  // Layer 1 (frozen below the changes under test): a new file, a deletion and a symlink.
  Shell(*t,
        "echo layer1 > /etc/temper-layer1; rm /etc/debian_version; ln -s /etc/issue /etc/temper-link; "
        "touch /etc/profile");
  REQUIRE(t->Snapshot().ok());
  CHECK(Changes(*t).empty());

  std::vector<std::string> cron_daily;
  for (const auto& e : fs::directory_iterator(testing::SharedRoot() + "/etc/cron.daily")) {
    cron_daily.push_back("/etc/cron.daily/" + e.path().filename().string());
  }
  REQUIRE_FALSE(cron_daily.empty());

  Shell(*t,
        "umask 022; "
        "printf 'hello\\n' > /etc/temper-new.conf; chmod 600 /etc/temper-new.conf; "  // added
        "printf 'Authorized uses only.\\n' > /etc/issue.net; "                        // modified
        "echo upper >> /etc/temper-layer1; "                                          // modified (below: layer 1)
        "chmod 600 /etc/motd; chown 42:43 /etc/shells; "                              // metadata only
        "rm /etc/issue; rm -r /etc/cron.daily; "                                      // deleted, a whole dir too
        "rm -r /etc/cron.monthly; echo now-a-file > /etc/cron.monthly; "              // dir replaced by a file
        "rm /etc/host.conf; mkdir /etc/host.conf; echo x > /etc/host.conf/inner; "    // file replaced by a dir
        "rm -r /etc/cron.weekly; mkdir /etc/cron.weekly; echo new > /etc/cron.weekly/new; "  // opaque dir
        "ln -sfn /etc/issue.net /etc/temper-link; ln -s ../usr/bin /etc/temper-link2; "      // symlinks
        "printf 'ELF\\000\\001\\002' > /etc/temper.bin; "                                    // binary
        "printf 'a\\nno newline' > /etc/temper-nonl; : > /etc/temper-empty; "                // edge cases of diff
        "yes temper | head -c 300000 > /etc/temper-big.txt; "                                // too large to diff
        "echo back > /etc/debian_version; "                                                  // deleted below, back
        "cat /etc/profile > /etc/profile.new && cat /etc/profile.new > /etc/profile && rm /etc/profile.new; "
        "touch -d 2001-01-01 /etc/passwd");  // copied up with the same content: no change
  ChangeSet cs = Changes(*t);
  auto files = ByPath(cs);
  INFO(cs.ToJson());

  const FileChange& added = files.at("/etc/temper-new.conf");
  CHECK(added.change == FileChangeKind::kAdded);
  CHECK_FALSE(added.before);
  CHECK(*added.after == FileState{FileType::kFile, 0600, 0, 0, 6, ""});
  CHECK(added.diff == "--- a/etc/temper-new.conf\n+++ b/etc/temper-new.conf\n@@ -0,0 +1 @@\n+hello\n");

  const FileChange& issue_net = files.at("/etc/issue.net");
  CHECK(issue_net.change == FileChangeKind::kModified);
  CHECK(issue_net.after->size == 22);
  CHECK(issue_net.diff.starts_with("--- a/etc/issue.net\n+++ b/etc/issue.net\n@@ -1"));
  CHECK(issue_net.diff.find("\n+Authorized uses only.\n") != std::string::npos);
  CHECK_FALSE(issue_net.binary);

  // "Before" is the frozen layer's state, not the base's.
  const FileChange& layer1 = files.at("/etc/temper-layer1");
  CHECK(layer1.change == FileChangeKind::kModified);
  CHECK(layer1.diff.find(" layer1\n+upper\n") != std::string::npos);

  const FileChange& motd = files.at("/etc/motd");
  CHECK(motd.change == FileChangeKind::kMetadata);
  CHECK(motd.before->mode == 0644);
  CHECK(motd.after->mode == 0600);
  CHECK(motd.diff.empty());
  const FileChange& shells = files.at("/etc/shells");
  CHECK(shells.change == FileChangeKind::kMetadata);
  CHECK(shells.before->uid == 0);
  CHECK(shells.after->uid == 42);
  CHECK(shells.after->gid == 43);

  const FileChange& issue = files.at("/etc/issue");
  CHECK(issue.change == FileChangeKind::kDeleted);
  CHECK(issue.before->type == FileType::kFile);
  CHECK_FALSE(issue.after);
  CHECK(issue.diff.starts_with("--- a/etc/issue\n+++ b/etc/issue\n@@ -1,2 +0,0 @@\n-Debian"));
  // A deleted directory lists what it held.
  CHECK(files.at("/etc/cron.daily").change == FileChangeKind::kDeleted);
  CHECK(files.at("/etc/cron.daily").before->type == FileType::kDir);
  for (const std::string& p : cron_daily) {
    INFO(p);
    REQUIRE(files.contains(p));
    CHECK(files.at(p).change == FileChangeKind::kDeleted);
  }

  const FileChange& monthly = files.at("/etc/cron.monthly");
  CHECK(monthly.change == FileChangeKind::kModified);
  CHECK(monthly.before->type == FileType::kDir);
  CHECK(monthly.after->type == FileType::kFile);
  CHECK(monthly.diff.find("+now-a-file\n") != std::string::npos);
  CHECK(files.at("/etc/cron.monthly/.placeholder").change == FileChangeKind::kDeleted);

  const FileChange& host_conf = files.at("/etc/host.conf");
  CHECK(host_conf.change == FileChangeKind::kModified);
  CHECK(host_conf.before->type == FileType::kFile);
  CHECK(host_conf.after->type == FileType::kDir);
  CHECK(host_conf.diff.find("\n-multi on\n") != std::string::npos);  // the file's content went away
  CHECK(files.at("/etc/host.conf/inner").change == FileChangeKind::kAdded);

  // Recreated with the same owner and mode: the directory itself is no change, its old entries
  // (hidden by the opaque directory) are deleted and its new one added.
  CHECK_FALSE(files.contains("/etc/cron.weekly"));
  CHECK(files.at("/etc/cron.weekly/.placeholder").change == FileChangeKind::kDeleted);
  CHECK(files.at("/etc/cron.weekly/new").change == FileChangeKind::kAdded);

  const FileChange& link = files.at("/etc/temper-link");
  CHECK(link.change == FileChangeKind::kModified);
  CHECK(link.before->link == "/etc/issue");
  CHECK(link.after->link == "/etc/issue.net");
  CHECK(link.diff.empty());
  CHECK(files.at("/etc/temper-link2").after->link == "../usr/bin");
  CHECK(files.at("/etc/temper-link2").after->type == FileType::kSymlink);

  const FileChange& binary = files.at("/etc/temper.bin");
  CHECK(binary.binary);
  CHECK(binary.diff.empty());
  const FileChange& big = files.at("/etc/temper-big.txt");
  CHECK_FALSE(big.binary);
  CHECK(big.diff.empty());
  CHECK(big.diff_skipped == "larger than 256 KiB");
  CHECK(big.after->size == 300000);

  // Diffs of whole files added or deleted are diff's own, byte for byte.
  CHECK(files.at("/etc/temper-nonl").diff == GnuDiff("/etc/temper-nonl", "/dev/null", t->root() + "/etc/temper-nonl"));
  CHECK(files.at("/etc/temper-nonl").diff.ends_with("+no newline\n\\ No newline at end of file\n"));
  CHECK(files.at("/etc/temper-empty").change == FileChangeKind::kAdded);
  CHECK(files.at("/etc/temper-empty").diff.empty());
  CHECK(issue.diff == GnuDiff("/etc/issue", testing::SharedRoot() + "/etc/issue", "/dev/null"));
  CHECK(added.diff == GnuDiff("/etc/temper-new.conf", "/dev/null", t->root() + "/etc/temper-new.conf"));

  // Whited out in layer 1, so "added" now.
  CHECK(files.at("/etc/debian_version").change == FileChangeKind::kAdded);

  // Copied up, but the same in every compared field.
  CHECK_FALSE(files.contains("/etc/profile"));
  CHECK_FALSE(files.contains("/etc/passwd"));
  CHECK_FALSE(files.contains("/etc/profile.new"));
  CHECK_FALSE(files.contains("/etc"));  // the parent of all of these, unchanged itself

  CHECK(cs.packages == PackageChanges{});
  CHECK(cs.services == ServiceChanges{});

  // After the revert to the last snapshot nothing has changed.
  REQUIRE(t->Revert(t->snapshots().depth()).ok());
  CHECK(Changes(*t).empty());
}

TEST_CASE("FIFOs and device nodes in the layers are listed as changes and never opened", "[stig][overlay_changes]") {
  ScopedTarget t("changes-fifo");
  REQUIRE(t->Snapshot().ok());
  // A regular file replaced by a FIFO, a new FIFO, and a device node (planted from the host: the
  // sandbox has no CAP_MKNOD) where a file was.
  Shell(*t, "rm /etc/issue.net && mkfifo /etc/issue.net /etc/temper-fifo && rm /etc/motd");
  REQUIRE(::mknod((t->root() + "/etc/motd").c_str(), S_IFCHR | 0644, makedev(1, 3)) == 0);
  auto pending = std::async(std::launch::async, [&] { return t->ChangesSinceSnapshot(); });
  if (pending.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    // Blocked on a FIFO: open the other end so the test can end, and fail.
    for (const char* fifo : {"/etc/issue.net", "/etc/temper-fifo"}) {
      int fd = ::open((t->root() + fifo).c_str(), O_RDWR | O_NONBLOCK);
      if (fd >= 0) ::close(fd);
    }
    FAIL("the change set blocked on a FIFO in the upper layer");
  }
  Result<ChangeSet> cs = pending.get();
  REQUIRE(cs.ok());
  auto files = ByPath(*cs);
  const FileChange& replaced = files.at("/etc/issue.net");
  CHECK(replaced.change == FileChangeKind::kModified);
  CHECK(replaced.before->type == FileType::kFile);
  CHECK(replaced.after->type == FileType::kOther);
  CHECK(replaced.diff.starts_with("--- a/etc/issue.net\n+++ b/etc/issue.net\n@@ -1"));  // the file's side only
  CHECK(files.at("/etc/temper-fifo").after->type == FileType::kOther);
  CHECK(files.at("/etc/temper-fifo").diff.empty());
  CHECK(files.at("/etc/motd").after->type == FileType::kOther);
}

TEST_CASE("Packages and services in a change set come from dpkg's database and systemd's links",
          "[stig][overlay_changes][package_install][services]") {
  testing::TestRepository repo;
  ::temper::testing::ScratchPath cache_dir("package-cache-changes");
  PackageCacheOptions cache;
  cache.dir = cache_dir.path();
  cache.sources = {repo.Source()};
  {
    ScopedTarget t("changes-packages", cache);
    REQUIRE(t->Snapshot().ok());
    auto installed = InstallPackages(*t, {"temper-test-dep", "temper-test-service"}, Limits());
    INFO(installed.status().ToString());
    REQUIRE(installed.ok());
    ChangeSet cs = Changes(*t);
    INFO(cs.ToJson());
    CHECK(cs.packages.installed ==
          std::vector<std::string>{"temper-test-dep 1.0", "temper-test-ok 1.0", "temper-test-service 1.0"});
    CHECK(cs.packages.removed.empty());
    auto files = ByPath(cs);
    CHECK(files.at("/usr/share/temper-test/dep").change == FileChangeKind::kAdded);
    CHECK(files.at("/usr/share/temper-test/dep").diff.find("+dep\n") != std::string::npos);
    CHECK(files.at("/var/lib/dpkg/status").change == FileChangeKind::kModified);
    CHECK(cs.services == ServiceChanges{});  // installed, not enabled

    REQUIRE(t->Snapshot().ok());
    Shell(*t,
          "systemctl enable temper-test.service 2>/dev/null; systemctl disable cron.service 2>/dev/null; "
          "systemctl mask ctrl-alt-del.target 2>/dev/null");
    cs = Changes(*t);
    CHECK(cs.services.enabled == std::vector<std::string>{"temper-test.service"});
    CHECK(cs.services.disabled == std::vector<std::string>{"cron.service"});
    CHECK(cs.services.masked == std::vector<std::string>{"ctrl-alt-del.target"});
    CHECK(cs.services.unmasked.empty());
    CHECK(cs.packages == PackageChanges{});
    files = ByPath(cs);
    CHECK(files.at("/etc/systemd/system/ctrl-alt-del.target").after->link == "/dev/null");

    REQUIRE(t->Snapshot().ok());
    Shell(*t, "systemctl unmask ctrl-alt-del.target 2>/dev/null");
    auto removed = RemovePackages(*t, {"temper-test-dep"}, false, Limits());
    REQUIRE(removed.ok());
    cs = Changes(*t);
    CHECK(cs.services.unmasked == std::vector<std::string>{"ctrl-alt-del.target"});
    CHECK(cs.services.masked.empty());
    CHECK(cs.packages.removed == std::vector<std::string>{"temper-test-dep 1.0"});
    CHECK(cs.packages.installed.empty());
    CHECK(ByPath(cs).at("/usr/share/temper-test/dep").change == FileChangeKind::kDeleted);
  }
}

TEST_CASE("A password change through usermod and useradd leaves no hash in the change set", "[stig][overlay_changes]") {
  ScopedTarget t("changes-shadow");
  REQUIRE(t->Snapshot().ok());
  const std::string sha512 = "$6$temper$" + std::string(86, 'Q');
  const std::string yescrypt = "$y$j9T$temper$" + std::string(43, 'Z');
  Shell(*t, fmt::format("usermod -p '{}' root; useradd -p '{}' alice; groupadd -p '{}' ops", sha512, yescrypt, sha512));
  ChangeSet cs = Changes(*t);
  const std::string stored = cs.ToJson();
  INFO(stored);
  CHECK(stored.find("$6$") == std::string::npos);
  CHECK(stored.find("$y$") == std::string::npos);
  auto files = ByPath(cs);
  REQUIRE(files.count("/etc/shadow") == 1);
  const std::string& diff = files.at("/etc/shadow").diff;
  CHECK_THAT(diff, Catch::Contains("+root:<sha512crypt hash redacted>:"));
  CHECK_THAT(diff, Catch::Contains("+alice:<yescrypt hash redacted>:"));
  REQUIRE(files.count("/etc/gshadow") == 1);
  CHECK_THAT(files.at("/etc/gshadow").diff, Catch::Contains("+ops:<sha512crypt hash redacted>:"));
}

}  // namespace
}  // namespace temper::stig
