// Attacks on the host through the files of a rootfs target (issue 20, part B): FIFOs that would block
// a host thread forever, device nodes and symlinks that would make a host write land where the
// target's author wants. Each case plants the trap from inside the sandbox, as a Worker's command
// would, then calls the real RootfsTarget or TargetTools.
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <atomic>
#include <filesystem>

#include <catch2/catch.hpp>

#include "orchestrator/loop/target_tools.h"
#include "scratch_space.h"
#include "security/security_b_support.h"
#include "stig/package_install.h"
#include "stig/rootfs_fixture.h"

namespace temper {
namespace {

using security::CallWithin;
using security::OpenBothEnds;
using stig::testing::ScopedTarget;
using namespace std::chrono_literals;

void Sandboxed(stig::RootfsTarget& t, const std::string& command) {
  auto r = t.Run(command, temper::SandboxLimits{});
  REQUIRE(r.ok());
  INFO(command << ": " << r->err);
  REQUIRE(r->Succeeded());
}

TEST_CASE("read_file of a FIFO made in the target returns an error within a second") {
  ScopedTarget target("fifo-read");
  Sandboxed(*target, "mkfifo /etc/x");
  auto read = CallWithin(
      1000ms, [&] { return target->ReadFile("/etc/x", 4096); }, [&] { OpenBothEnds(target->root() + "/etc/x"); });
  CHECK(read.in_time);
  CHECK(read.took < 1000ms);
  REQUIRE_FALSE(read.value.ok());
  CHECK(read.value.status().code() == StatusCode::kInvalidArgument);
  CHECK(read.value.status().message() == "/etc/x is a FIFO in the target, not a regular file");
}

TEST_CASE("write_file over a FIFO made in the target returns an error within a second") {
  ScopedTarget target("fifo-write");
  Sandboxed(*target, "mkfifo /etc/x");
  auto write = CallWithin(
      1000ms, [&] { return target->WriteFile("/etc/x", "data\n", 0644); },
      [&] { OpenBothEnds(target->root() + "/etc/x"); });
  CHECK(write.in_time);
  CHECK(write.value.code() == StatusCode::kInvalidArgument);
  CHECK(write.value.message() == "/etc/x is a FIFO in the target, not a regular file");
  struct stat st {};
  REQUIRE(::lstat((target->root() + "/etc/x").c_str(), &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));
}

TEST_CASE("install_package with a FIFO as the target's dpkg status returns an error within a second") {
  const testing::ScratchPath cache_dir("fifo-install-cache");
  stig::PackageCacheOptions cache;
  cache.dir = cache_dir.path();
  cache.sources = {"deb [trusted=yes] file:" + cache.dir + "/no-repository ./"};
  ScopedTarget target("fifo-install", cache);
  Sandboxed(*target, "mv /var/lib/dpkg/status /var/lib/dpkg/status.real && mkfifo /var/lib/dpkg/status");
  temper::SandboxLimits limits;
  limits.timeout = 30s;
  auto install = CallWithin(
      1000ms, [&] { return stig::InstallPackages(*target, {"vlock"}, limits); },
      [&] { OpenBothEnds(target->root() + "/var/lib/dpkg/status"); });
  CHECK(install.in_time);
  REQUIRE_FALSE(install.value.ok());
  CHECK_THAT(install.value.status().message(),
             Catch::Contains("/var/lib/dpkg/status is a FIFO in the target, not a regular file"));
}

TEST_CASE("a Worker blocked on a FIFO still sees the batch's cancel: its tools answer in time, then Cancelled") {
  ScopedTarget target("fifo-cancel");
  std::atomic<bool> cancelled{false};
  TargetTools tools(*target, [&] { return cancelled.load(); });
  Sandboxed(*target, "mkfifo /root/trap");
  auto unblock = [&] { OpenBothEnds(target->root() + "/root/trap"); };
  auto read = CallWithin(
      1000ms, [&] { return tools.ReadFile("/root/trap", 100); }, unblock);
  CHECK(read.in_time);
  CHECK_FALSE(read.value.ok());
  auto write = CallWithin(
      1000ms, [&] { return tools.WriteFile("/root/trap", "x"); }, unblock);
  CHECK(write.in_time);
  CHECK_FALSE(write.value.ok());
  // A command that blocks on the FIFO inside the sandbox ends as soon as the batch is cancelled,
  // not at its timeout.
  std::thread cancel([&] {
    std::this_thread::sleep_for(500ms);
    cancelled = true;
  });
  auto run = CallWithin(
      5000ms, [&] { return tools.RunCommand("cat /root/trap", 20s); }, [] {});
  cancel.join();
  CHECK(run.in_time);
  CHECK(run.value.status().code() == StatusCode::kCancelled);
  CHECK(tools.ReadFile("/etc/hostname", 100).status().code() == StatusCode::kCancelled);
}

TEST_CASE("write_file through a final symlink to a device node is refused") {
  ScopedTarget target("device-link");
  // The sandbox cannot make device nodes (no CAP_MKNOD), but a target's tree may hold some (its
  // base, a package): one is planted from the host, /dev/null's numbers so nothing can go wrong.
  REQUIRE(::mknod((target->root() + "/root/nulldev").c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0);
  REQUIRE(::chmod((target->root() + "/root/nulldev").c_str(), 0666) == 0);
  Sandboxed(*target, "ln -s /root/nulldev /etc/devlink && mkfifo /root/fifo && ln -s ../root/fifo /etc/fifolink");

  Status through_link = target->WriteFile("/etc/devlink", "overwrite\n", 0644);
  CHECK(through_link.code() == StatusCode::kInvalidArgument);
  CHECK(through_link.message() == "/etc/devlink is a character device in the target, not a regular file");
  CHECK(target->WriteFile("/root/nulldev", "x", 0644).message() ==
        "/root/nulldev is a character device in the target, not a regular file");
  CHECK(target->ReadFile("/etc/devlink", 100).status().message() ==
        "/etc/devlink is a character device in the target, not a regular file");
  auto fifo = CallWithin(
      1000ms, [&] { return target->WriteFile("/etc/fifolink", "x", 0644); },
      [&] { OpenBothEnds(target->root() + "/root/fifo"); });
  CHECK(fifo.in_time);
  CHECK(fifo.value.message() == "/etc/fifolink is a FIFO in the target, not a regular file");
  // The device node is untouched (still a device, still root's), nothing was written through it.
  struct stat st {};
  REQUIRE(::lstat((target->root() + "/root/nulldev").c_str(), &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
  CHECK((st.st_mode & 07777) == 0666);
}

TEST_CASE("write_file does not create a file through a dangling final symlink") {
  ScopedTarget target("dangling-link");
  Sandboxed(*target, "ln -s /root/made-through-link /etc/dangling");
  Status s = target->WriteFile("/etc/dangling", "x\n", 0644);
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::StartsWith("/etc/dangling is a symlink to /root/made-through-link, which does not "
                                            "exist in the target"));
  CHECK_FALSE(std::filesystem::exists(std::filesystem::symlink_status(target->root() + "/root/made-through-link")));
  // A link to a regular file in the target is written through, as before; new files are created.
  Sandboxed(*target, "echo old > /root/real && ln -s /root/real /etc/to-real");
  REQUIRE(target->WriteFile("/etc/to-real", "new\n", 0644).ok());
  CHECK(*target->ReadFile("/root/real", 100) == "new\n");
  REQUIRE(target->WriteFile("/etc/brand-new", "fresh\n", 0600).ok());
  CHECK(*target->ReadFile("/etc/brand-new", 100) == "fresh\n");
}

}  // namespace
}  // namespace temper
