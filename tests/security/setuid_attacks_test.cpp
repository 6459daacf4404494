// A setuid-root program made inside a rootfs target's sandbox must not give root on the host
// (issue 20, part B). With the identity uid map, `chmod 4755` of a root-owned file in the sandbox
// is a real setuid-root file in the layers on the host; the target's mounts and directories must
// keep every unprivileged host user from running it with its privileges.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>

#include "platform/process.h"
#include "stig/rootfs_fixture.h"

namespace temper {
namespace {

namespace fs = std::filesystem;
using stig::testing::ScopedTarget;

void Sandboxed(stig::RootfsTarget& t, const std::string& command) {
  auto r = t.Run(command, temper::SandboxLimits{});
  REQUIRE(r.ok());
  INFO(command << ": " << r->err);
  REQUIRE(r->Succeeded());
}

// Every setuid file named `name` at or below `dir` on the host, mounts included.
std::vector<std::string> SetuidCopies(const std::string& dir, const std::string& name) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st {};
    if (it->path().filename() == name && ::lstat(it->path().c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        (st.st_mode & S_ISUID)) {
      out.push_back(it->path().string());
    }
  }
  return out;
}

// What `path` (a copy of id(1)) prints when nobody (65534) runs it on the host.
std::string RunAsNobody(const std::string& path) {
  temper::ProcessSpec spec;
  spec.argv = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", path};
  spec.timeout = std::chrono::seconds(10);
  auto r = temper::RunProcess(spec);
  REQUIRE(r.ok());
  return r->out + r->err;
}

// The options of the mount at `point`, from /proc/self/mountinfo ("" when nothing is mounted there).
std::string MountOptions(const std::string& point) {
  std::ifstream in("/proc/self/mountinfo");
  std::string found;
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    std::string id, parent, dev, root, at, options;
    f >> id >> parent >> dev >> root >> at >> options;
    if (at == point) found = options;  // the last mount there is the one seen
  }
  return found;
}

TEST_CASE("a setuid-root shell made in the sandbox gives no root to an unprivileged host user") {
  ScopedTarget target("setuid");
  // id(1) stands for the shell: as a setuid-root copy it prints euid=0 when its bit takes effect.
  Sandboxed(*target, "cp /usr/bin/id /root/rootid && chown root:root /root/rootid && chmod 4755 /root/rootid");
  REQUIRE(target->Snapshot().ok());                                            // the copy now lives in a frozen layer
  Sandboxed(*target, "cp /usr/bin/id /tmp/rootid && chmod 4755 /tmp/rootid");  // and one in the upper layer

  const std::string state = fs::absolute(target.dir()).string();
  auto attempt_all = [&](const std::string& under, std::size_t at_least) {
    std::vector<std::string> copies = SetuidCopies(under, "rootid");
    CHECK(copies.size() >= at_least);
    for (const std::string& copy : copies) {
      std::string out = RunAsNobody(copy);
      INFO(copy << " run by uid 65534 printed: " << out);
      CHECK(out.find("euid=0") == std::string::npos);
      CHECK(out.find("uid=0(") == std::string::npos);
    }
  };
  // The merged view, the frozen layer and the upper layer each hold one.
  attempt_all(state, 4);
  // The scratch view the evaluator reads is another mount of the same files.
  REQUIRE(target->snapshots()
              .WithScratchView([&](const std::string& view) {
                CHECK_THAT(MountOptions(view), Catch::Contains("nosuid") && Catch::Contains("nodev"));
                attempt_all(view, 2);
                return Status::OK();
              })
              .ok());

  // Defence in depth, each checked on its own: every overlay is nosuid,nodev, and the target's
  // directory is root's alone.
  CHECK_THAT(MountOptions(target->root()), Catch::Contains("nosuid") && Catch::Contains("nodev"));
  struct stat st {};
  REQUIRE(::stat(state.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0700);
  CHECK(st.st_uid == 0);
}

TEST_CASE("a target directory left world-readable is made root-only when the target is opened") {
  ScopedTarget target("setuid-reopen");
  ::chmod(target.dir().c_str(), 0755);
  target.Reopen();
  struct stat st {};
  REQUIRE(::stat(target.dir().c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0700);
}

}  // namespace
}  // namespace temper
