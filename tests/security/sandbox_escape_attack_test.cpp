// A rootfs target's sandbox must not be able to change its own limits (issue 46, part B).
//
// The attack that worked (cgroup v1): uid 0 in the sandbox is the host's uid 0, so a command that
// makes a user namespace of its own (`unshare -UrmC`) gains CAP_SYS_ADMIN over a new mount and
// cgroup namespace, mounts its cgroup's hierarchy there and writes -1 into memory.limit_in_bytes
// and max into pids.max: the kernel checks only the file's owner, which is that same uid 0. Each
// case tries it, or one of its steps (nested namespaces, setns, mounts of cgroup, proc, sysfs and
// bpf file systems, clone3, the x32 door past the filter), for real in a real sandbox with small
// caps, and asserts that the caps still hold: the host-side cgroup files keep their values, and
// the memory hog and the fork count that follow are stopped with the cap named. The last case
// checks that attempts running at once on forks of one target share its caps instead of getting
// a full set each.
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "skip.h"
#include "stig/rootfs_fixture.h"

namespace temper {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using stig::RootfsTarget;
using stig::testing::SharedRoot;

// The reproduction's caps: the smallest SandboxCaps::Validate accepts.
temper::SandboxCaps SmallCaps() {
  temper::SandboxCaps caps;
  caps.pids = 16;
  caps.memory_bytes = 64 * temper::kMiB;
  caps.disk_bytes = 1 * temper::kGiB;
  return caps;
}

// A target over the shared root with `caps`, in a scratch directory removed at the end.
class CappedTarget {
 public:
  explicit CappedTarget(const std::string& name, const temper::SandboxCaps& caps = SmallCaps()) {
    REQUIRE(fs::is_directory(SharedRoot()));
    dir_ = testing::TestScratchDir() + "/target-" + name;
    fs::remove_all(dir_);
    auto t = RootfsTarget::Open(name, dir_, SharedRoot(), {}, caps);
    INFO(t.status().ToString());
    REQUIRE(t.ok());
    target_ = std::move(*t);
  }
  ~CappedTarget() {
    target_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  CappedTarget(const CappedTarget&) = delete;
  CappedTarget& operator=(const CappedTarget&) = delete;
  RootfsTarget* operator->() { return target_.get(); }
  RootfsTarget& operator*() { return *target_; }

 private:
  std::string dir_;
  std::unique_ptr<RootfsTarget> target_;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  std::string text = s.str();
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

// The mount point of each cgroup hierarchy this process sees: "" for cgroup2, else each v1
// controller, read from /proc/self/mountinfo.
std::map<std::string, std::string> CgroupMountPoints() {
  std::map<std::string, std::string> out;
  std::ifstream in("/proc/self/mountinfo");
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    std::string id, parent, dev, root, point, options, field, fstype, source, super;
    f >> id >> parent >> dev >> root >> point >> options;
    while (f >> field && field != "-") {
    }
    f >> fstype >> source >> super;
    if (fstype == "cgroup2") out.emplace("", point);
    if (fstype != "cgroup") continue;
    std::stringstream controllers(super);
    for (std::string c; std::getline(controllers, c, ',');) out.emplace(c, point);
  }
  return out;
}

// Where the host keeps a sandboxed command's caps: its cgroup (and its target's, the parent) seen
// from the host, found through one of the command's processes.
struct HostCgroupFiles {
  std::string memory_limit;  // memory.limit_in_bytes (v1) or memory.max (v2)
  std::string pids_limit;    // pids.max
  std::string memory_dir, pids_dir;
  std::string Describe() const { return memory_dir + " and " + pids_dir; }
};

// The cgroup files of a process this test started (inside a sandbox) that runs in a command's
// cgroup (".../temper-<this pid>-.../cmd-<n>"); nullopt when there is none.
std::optional<HostCgroupFiles> FindCommandCgroup() {
  const std::string tree_mark = fmt::format("/temper-{}-", ::getpid());
  const std::map<std::string, std::string> mounts = CgroupMountPoints();
  DIR* proc = ::opendir("/proc");
  if (!proc) return std::nullopt;
  std::optional<HostCgroupFiles> found;
  while (dirent* e = ::readdir(proc)) {
    if (!std::isdigit(static_cast<unsigned char>(e->d_name[0]))) continue;
    std::ifstream in(std::string("/proc/") + e->d_name + "/cgroup");
    HostCgroupFiles files;
    for (std::string line; std::getline(in, line);) {
      const size_t a = line.find(':'), b = line.find(':', a + 1);
      if (a == std::string::npos || b == std::string::npos) continue;
      const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
      if (path.find(tree_mark) == std::string::npos || path.find("/cmd-") == std::string::npos) continue;
      auto at = [&](const std::string& controller) { return mounts.at(controller) + path; };
      if (controllers.empty() && mounts.count("")) {
        files.memory_dir = files.pids_dir = at("");
        files.memory_limit = files.memory_dir + "/memory.max";
        files.pids_limit = files.pids_dir + "/pids.max";
      } else if (controllers.find("memory") != std::string::npos) {
        files.memory_dir = at("memory");
        files.memory_limit = files.memory_dir + "/memory.limit_in_bytes";
      } else if (controllers.find("pids") != std::string::npos) {
        files.pids_dir = at("pids");
        files.pids_limit = files.pids_dir + "/pids.max";
      }
    }
    if (!files.memory_limit.empty() && !files.pids_limit.empty()) {
      found = files;
      break;
    }
  }
  ::closedir(proc);
  return found;
}

// The cgroup files of this process's one target (".../temper-<this pid>-..."), found by walking
// the hierarchies down from their mount points; nullopt when there is none.
std::optional<HostCgroupFiles> FindTargetCgroup() {
  const std::string tree_prefix = fmt::format("temper-{}-", ::getpid());
  const std::map<std::string, std::string> mounts = CgroupMountPoints();
  auto find_under = [&](const std::string& mount) -> std::string {
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(mount, fs::directory_options::skip_permission_denied, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (it.depth() > 4) it.disable_recursion_pending();
      if (it->is_directory() && it->path().filename().string().starts_with(tree_prefix)) return it->path().string();
    }
    return "";
  };
  HostCgroupFiles files;
  if (mounts.count("memory") && mounts.count("pids")) {
    files.memory_dir = find_under(mounts.at("memory"));
    files.pids_dir = find_under(mounts.at("pids"));
    files.memory_limit = files.memory_dir + "/memory.limit_in_bytes";
  } else if (mounts.count("")) {
    files.memory_dir = files.pids_dir = find_under(mounts.at(""));
    files.memory_limit = files.memory_dir + "/memory.max";
  }
  if (files.memory_dir.empty() || files.pids_dir.empty()) return std::nullopt;
  files.pids_limit = files.pids_dir + "/pids.max";
  return files;
}

// What the kernel reads back for a memory limit of `bytes`: v1 and v2 both print the number.
std::string LimitText(std::uint64_t bytes) { return std::to_string(bytes); }

// Runs `command` in `target`, which is to touch /escape-tried once it has tried its escape and then
// wait while that file exists. Meanwhile the host-side cgroup files are read; then the command is
// let go on. Returns the result and the host's view of the caps while it waited.
struct HeldRun {
  Result<temper::ProcessResult> result = Status::Internal("not run");
  std::string memory_limit, pids_limit, where;
};

HeldRun RunHeld(RootfsTarget& target, const std::string& command) {
  const std::string marker = target.root() + "/escape-tried";
  std::error_code ec;
  fs::remove(marker, ec);
  temper::SandboxLimits limits;
  limits.timeout = 120s;
  auto running = std::async(std::launch::async, [&] { return target.Run(command, limits); });
  HeldRun held;
  // The command holds until the marker goes: wait for it to appear (or for the command to end).
  while (!fs::exists(marker) && running.wait_for(50ms) != std::future_status::ready) {
  }
  if (fs::exists(marker)) {
    if (std::optional<HostCgroupFiles> files = FindCommandCgroup()) {
      held.memory_limit = ReadFile(files->memory_limit);
      held.pids_limit = ReadFile(files->pids_limit);
      held.where = files->Describe();
    }
    fs::remove(marker, ec);
  }
  held.result = running.get();
  return held;
}

// The command waits here until the host has read its cgroup files.
constexpr const char* kHold = "touch /escape-tried; while [ -e /escape-tried ]; do sleep 0.1; done";

// The attacker's reproduction: the memory hierarchy mounted on /mnt, the pids one on a directory
// of its own. With swap accounting the kernel keeps memory.memsw.limit_in_bytes at or above
// memory.limit_in_bytes, so that one is raised first.
constexpr const char* kRaiseCaps =
    "unshare -UrmC sh -c \"mount -t cgroup -o memory none /mnt; cd /mnt; "
    "echo -1 > memory.memsw.limit_in_bytes; echo -1 > memory.limit_in_bytes; "
    "mkdir -p /tmp/pids; mount -t cgroup -o pids none /tmp/pids; cd /tmp/pids; echo max > pids.max\"";

void CheckHostKeptCaps(const HeldRun& held) {
  INFO("host-side cgroup " << held.where);
  CHECK(held.memory_limit == LimitText(SmallCaps().memory_bytes));
  CHECK(held.pids_limit == "16");
}

TEST_CASE("unshare -UrmC then mount cgroup and write the limits: the memory cap still holds") {
  CappedTarget target("escape-memory");
  // 256 MiB held by one tail (there is no newline to let it go), four times the cap.
  HeldRun held = RunHeld(*target, fmt::format("{} 2>&1; {}; head -c 256M /dev/zero | tail > /dev/null && echo survived",
                                              kRaiseCaps, kHold));
  CheckHostKeptCaps(held);
  REQUIRE(held.result.ok());
  INFO(held.result->out << held.result->err);
  CHECK(held.result->out.find("survived") == std::string::npos);
  CHECK(held.result->cap_hit == "the command hit the sandbox's memory cap of 64 MiB");
  // The nested user namespace was refused before anything was mounted.
  CHECK_THAT(held.result->out, Catch::Contains("unshare failed: Operation not permitted"));
}

TEST_CASE("unshare -UrmC then mount cgroup and write the limits: the pids cap still holds") {
  CappedTarget target("escape-pids");
  // 68 processes, more than four times the cap.
  HeldRun held = RunHeld(
      *target,
      fmt::format("{} 2>&1; {}; for i in $(seq 68); do sleep 60 & done; wait; echo survived", kRaiseCaps, kHold));
  CheckHostKeptCaps(held);
  REQUIRE(held.result.ok());
  INFO(held.result->out << held.result->err);
  CHECK(held.result->out.find("survived") == std::string::npos);
  CHECK(held.result->cap_hit == "the command hit the sandbox's pids cap of 16");
}

// Runs each attempt in the sandbox as `ATTEMPT; echo "rc=$?"` and returns what it printed.
std::string Attempt(RootfsTarget& target, const std::string& attempt) {
  temper::SandboxLimits limits;
  limits.timeout = 60s;
  auto r = target.Run(fmt::format("{} 2>&1; echo \"rc=$?\"", attempt), limits);
  REQUIRE(r.ok());
  INFO(attempt << ": " << r->Describe() << "\n" << r->out << r->err);
  REQUIRE(r->cap_hit.empty());
  return r->out;
}

bool RootHas(const std::string& program) {
  return fs::exists(SharedRoot() + "/usr/bin/" + program) || fs::exists(SharedRoot() + "/bin/" + program);
}

TEST_CASE("the sandbox refuses nested namespaces, setns and mounts of kernel file systems, whatever the tool") {
  CappedTarget target("escape-steps");
  REQUIRE(RootHas("unshare"));
  REQUIRE(RootHas("nsenter"));
  REQUIRE(RootHas("mount"));
  for (const char* attempt : {
           "unshare -U true",
           "unshare -Ur true",
           "unshare -m true",
           "unshare -C true",
           "unshare -p -f true",
           "unshare -n true",
           "unshare -T true",
           "nsenter -t 1 -m true",
           "nsenter -t 1 -U true",
           "mount -t proc proc /mnt",
           "mount -t sysfs sysfs /mnt",
           "mount -t cgroup2 none /mnt",
           "mount -t cgroup -o memory none /mnt",
           "mount -t bpf bpf /mnt",
           "mount -t tmpfs none /mnt",
       }) {
    const std::string out = Attempt(*target, attempt);
    INFO(attempt << " printed: " << out);
    CHECK(out.find("rc=0") == std::string::npos);
  }
  // Nothing was left mounted on /mnt either.
  CHECK(Attempt(*target, "grep -c ' /mnt ' /proc/self/mountinfo").find("0\nrc=1") != std::string::npos);
}

#if defined(__x86_64__)
// x86_64's numbers (arch/x86/entry/syscalls/syscall_64.tbl): the perl below calls them directly.
constexpr int kSysUnshare = 272, kSysClone = 56, kSysClone3 = 435, kSysSetns = 308, kSysMount = 165, kSysFsopen = 430,
              kSysOpenTree = 428, kSysBpf = 321, kSysGetpid = 39;
#endif

TEST_CASE("the system calls themselves, from perl: unshare, clone, clone3, setns, mount, fsopen, bpf, x32") {
#if !defined(__x86_64__)
  TEMPER_SKIP("the system call numbers in this case are x86_64's");
#else
  if (!RootHas("perl")) TEMPER_SKIP("the shared root has no perl to call system calls with");
  CappedTarget target("escape-syscalls");
  // `perl -e` printing "errno=N" for a call that returns -1, "ok" otherwise (a clone child exits).
  auto call = [&](const std::string& perl) { return Attempt(*target, "perl -e '" + perl + "'"); };
  auto errno_of = [&](const std::string& syscall_expr, const std::string& before = "") {
    return call(fmt::format(
        "{} my $r = {}; if ($r == 0) {{ exit 0 }} print $r == -1 ? \"errno=\" . ($!+0) . \"\\n\" : \"ok\\n\";", before,
        syscall_expr));
  };
  constexpr int kEperm = 1, kEnosys = 38;
  const std::string eperm = fmt::format("errno={}\n", kEperm);
  CHECK(errno_of(fmt::format("syscall({}, 0x10000000)", kSysUnshare)) == eperm + "rc=0\n");  // CLONE_NEWUSER
  CHECK(errno_of(fmt::format("syscall({}, 0x02000000)", kSysUnshare)) == eperm + "rc=0\n");  // CLONE_NEWCGROUP
  // clone(CLONE_NEWUSER | SIGCHLD) with no stack: a fork into a new user namespace.
  CHECK(errno_of(fmt::format("syscall({}, 0x10000000 | 17, 0, 0, 0, 0)", kSysClone)) == eperm + "rc=0\n");
  // clone3 says it does not exist, so that C libraries fall back to clone, whose flags are seen.
  CHECK(errno_of(fmt::format("syscall({}, 0, 0)", kSysClone3)) == fmt::format("errno={}\nrc=0\n", kEnosys));
  CHECK(errno_of(fmt::format("syscall({}, fileno(F), 0)", kSysSetns), "open(F, \"<\", \"/proc/1/ns/mnt\") or die;") ==
        eperm + "rc=0\n");
  // perl hands the kernel a string's buffer only when it is a variable's.
  const std::string names =
      "my ($none, $mnt, $cgroup, $memory, $root) = (\"none\", \"/mnt\", \"cgroup\", \"memory\", \"/\");";
  CHECK(errno_of(fmt::format("syscall({}, $none, $mnt, $cgroup, 0, $memory)", kSysMount), names) == eperm + "rc=0\n");
  CHECK(errno_of(fmt::format("syscall({}, $cgroup, 0)", kSysFsopen), names) == eperm + "rc=0\n");
  CHECK(errno_of(fmt::format("syscall({}, -100, $root, 0)", kSysOpenTree), names) == eperm + "rc=0\n");
  CHECK(errno_of(fmt::format("syscall({}, 0, 0, 0)", kSysBpf)) == eperm + "rc=0\n");
  // A plain fork still works: clone without namespace flags.
  CHECK(call("my $p = fork(); exit 0 if $p == 0; waitpid($p, 0); print \"forked\\n\";") == "forked\nrc=0\n");
  // The x32 numbering (bit 30 set) is another door to the same calls: the filter kills the caller.
  CHECK(Attempt(*target, fmt::format("ulimit -c 0; perl -e 'syscall({} | 0x40000000);'", kSysGetpid)) ==
        fmt::format("Bad system call\nrc={}\n", 128 + SIGSYS));
#endif
}

// Runs `command` on each of `forks` at once; each touches /ready in its own tree once its
// processes run, then waits while /hold exists there. Returns the results once all are let go.
std::vector<Result<temper::ProcessResult>> RunAtOnce(std::vector<std::unique_ptr<stig::Target>>& forks,
                                                     const std::string& command,
                                                     const std::function<void()>& while_all_held) {
  std::vector<std::string> roots;
  for (auto& f : forks) {
    auto* rootfs = dynamic_cast<RootfsTarget*>(f.get());
    REQUIRE(rootfs);
    roots.push_back(rootfs->root());
    std::ofstream(roots.back() + "/hold") << "\n";
  }
  std::vector<std::future<Result<temper::ProcessResult>>> running;
  for (auto& f : forks) {
    running.push_back(std::async(std::launch::async, [&f, &command] {
      temper::SandboxLimits limits;
      limits.timeout = 120s;
      return f->Run(command, limits);
    }));
  }
  // Until each is ready or has ended.
  for (size_t i = 0; i < forks.size(); ++i) {
    while (!fs::exists(roots[i] + "/ready") && running[i].wait_for(50ms) != std::future_status::ready) {
    }
  }
  while_all_held();
  std::error_code ec;
  for (const std::string& root : roots) fs::remove(root + "/hold", ec);
  std::vector<Result<temper::ProcessResult>> out;
  for (auto& r : running) out.push_back(r.get());
  return out;
}

TEST_CASE("attempts running at once on forks of one target share its caps instead of multiplying them") {
  CappedTarget target("parallel-caps");
  constexpr int kAttempts = 4;
  std::vector<std::unique_ptr<stig::Target>> forks;
  for (int i = 0; i < kAttempts; ++i) {
    auto fork = target->Fork();
    REQUIRE(fork.ok());
    forks.push_back(std::move(*fork));
  }
  // Six sleeping processes each, with the shell and bubblewrap's two: 9 per attempt, 36 together,
  // more than twice the cap of 16 yet well within it for each attempt alone.
  std::string tree_pids_max, tree_memory_max, tree_pids_current;
  auto results = RunAtOnce(forks,
                           "for i in 1 2 3 4 5 6; do sleep 60 & done; touch /ready; "
                           "while [ -e /hold ]; do sleep 0.1; done; echo done",
                           [&] {
                             // The target's cgroup, above its commands' (all of them may have been stopped by now).
                             std::optional<HostCgroupFiles> tree = FindTargetCgroup();
                             if (!tree) return;
                             tree_pids_max = ReadFile(tree->pids_limit);
                             tree_pids_current = ReadFile(tree->pids_dir + "/pids.current");
                             tree_memory_max = ReadFile(tree->memory_limit);
                           });
  int capped = 0, ended_well = 0;
  std::string outcomes;
  for (auto& r : results) {
    if (!r.ok()) FAIL(r.status().ToString());
    outcomes += r->Describe() + "\n" + r->out + r->err + "\n";
    INFO(r->Describe() << "\n" << r->out << r->err);
    if (!r->cap_hit.empty()) {
      ++capped;
      CHECK(r->cap_hit == "the command hit the sandbox's pids cap of 16");
    } else if (r->Succeeded()) {
      ++ended_well;
    }
  }
  INFO("each attempt:\n" << outcomes);
  INFO("the target's cgroup: pids.max " << tree_pids_max << ", pids.current " << tree_pids_current << ", memory limit "
                                        << tree_memory_max);
  CHECK(tree_pids_max == "16");
  CHECK(tree_memory_max == LimitText(SmallCaps().memory_bytes));
  CHECK(!tree_pids_current.empty());
  if (!tree_pids_current.empty()) CHECK(std::stoi(tree_pids_current) <= 16);
  // Not all of them fit: some attempt was stopped by the shared cap, and it was named.
  CHECK(capped >= 1);
  CHECK(capped + ended_well == kAttempts);
  for (auto& f : forks) f.reset();
}

}  // namespace
}  // namespace temper
