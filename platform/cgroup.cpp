#include "platform/cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <sstream>
#include <thread>

#include <fmt/format.h>

namespace temper {
namespace {

constexpr const char* kSelfLeaf = "temper-self";
constexpr const char* kTreePrefix = "temper-";
// How long Remove waits for killed processes to leave before it gives up on a cgroup.
constexpr auto kDrainTimeout = std::chrono::seconds(10);
// cgroup v1 cpu.shares for a v2 cpu.weight of 100 (both are the kernel's defaults).
constexpr std::uint64_t kV1SharesPerWeight100 = 1024;

Result<std::string> ReadText(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return Status::FromErrno(errno, "reading " + path);
  std::string out;
  char buf[4096];
  while (true) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno(errno, "reading " + path);
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

Status WriteText(const std::string& path, const std::string& text) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd.valid()) return Status::FromErrno(errno, fmt::format("opening {} to write '{}'", path, text));
  if (::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    return Status::FromErrno(errno, fmt::format("writing '{}' to {}", text, path));
  }
  return Status::OK();
}

bool Exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

std::vector<std::string> Words(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::string word;
  std::istringstream in(text);
  while (std::getline(in, word, sep)) {
    while (!word.empty() && (word.back() == '\n' || word.back() == ' ')) word.pop_back();
    if (!word.empty()) out.push_back(word);
  }
  return out;
}

bool Has(const std::vector<std::string>& words, const std::string& w) {
  return std::find(words.begin(), words.end(), w) != words.end();
}

// mountinfo escapes blanks and backslashes in paths as \ooo.
std::string Unescape(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      out += static_cast<char>(((s[i + 1] - '0') << 6) | ((s[i + 2] - '0') << 3) | (s[i + 3] - '0'));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

// The cgroup file systems mounted in this mount namespace: "" (cgroup2) or a v1 controller name,
// to its mount point.
Result<std::map<std::string, std::string>> CgroupMounts() {
  TEMPER_ASSIGN_OR_RETURN(std::string info, ReadText("/proc/self/mountinfo"));
  std::map<std::string, std::string> out;
  for (const std::string& line : Words(info, '\n')) {
    std::istringstream f(line);
    std::string id, parent, dev, root, point, options, field;
    f >> id >> parent >> dev >> root >> point >> options;
    while (f >> field && field != "-") {
    }
    std::string fstype, source, super;
    f >> fstype >> source >> super;
    if (fstype == "cgroup2") {
      out.emplace("", Unescape(point));
    } else if (fstype == "cgroup") {
      for (const std::string& c : Words(super, ',')) out.emplace(c, Unescape(point));
    }
  }
  return out;
}

// This process's cgroup per hierarchy: "" for v2, else each controller of a v1 hierarchy.
Result<std::map<std::string, std::string>> OwnCgroups() {
  TEMPER_ASSIGN_OR_RETURN(std::string text, ReadText("/proc/self/cgroup"));
  std::map<std::string, std::string> out;
  for (const std::string& line : Words(text, '\n')) {
    std::size_t a = line.find(':');
    std::size_t b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::string controllers = line.substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    if (controllers.empty()) out.emplace("", path);
    for (const std::string& c : Words(controllers, ',')) out.emplace(c, path);
  }
  return out;
}

// Field 22 of /proc/<pid>/stat: when the process started, in clock ticks since boot; with the pid
// it names one process for the whole uptime (a pid alone is reused). nullopt when it is gone.
std::optional<std::uint64_t> StartTime(long pid) {
  Result<std::string> stat = ReadText(fmt::format("/proc/{}/stat", pid));
  if (!stat.ok()) return std::nullopt;
  std::size_t close = stat->rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream f(stat->substr(close + 2));
  std::string field;
  for (int i = 3; i < 22 && f >> field; ++i) {
  }
  std::uint64_t start = 0;
  if (!(f >> start)) return std::nullopt;
  return start;
}

// Whether `pid` is this process or was started by it (directly or not).
bool IsOursOrDescendant(long pid) {
  const long self = static_cast<long>(::getpid());
  for (int depth = 0; depth < 64 && pid > 1; ++depth) {
    if (pid == self) return true;
    Result<std::string> stat = ReadText(fmt::format("/proc/{}/stat", pid));
    if (!stat.ok()) return false;
    std::size_t close = stat->rfind(')');
    long parent = 0;
    if (close == std::string::npos || std::sscanf(stat->c_str() + close + 1, " %*c %ld", &parent) != 1) return false;
    pid = parent;
  }
  return false;
}

std::vector<std::string> Subdirectories(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    if (e->d_type == DT_DIR && std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
      out.emplace_back(e->d_name);
    }
  }
  ::closedir(d);
  return out;
}

std::vector<long> Members(const std::string& dir) {
  std::vector<long> out;
  Result<std::string> procs = ReadText(dir + "/cgroup.procs");
  if (!procs.ok()) return out;
  for (const std::string& w : Words(*procs, '\n')) out.push_back(std::stol(w));
  return out;
}

// The value of `key` in a flat-keyed cgroup file ("max 3\n" in pids.events), 0 when absent.
std::uint64_t Counter(const std::string& file, const std::string& key) {
  Result<std::string> text = ReadText(file);
  if (!text.ok()) return 0;
  for (const std::string& line : Words(*text, '\n')) {
    if (line.rfind(key + " ", 0) == 0) return std::stoull(line.substr(key.size() + 1));
  }
  return 0;
}

// Kills every process in `dirs` (the same cgroup in each hierarchy), waits until they are gone
// and removes the directories, deepest first when `dirs` holds a tree.
Status KillAndRemove(const std::vector<std::string>& dirs, int version) {
  auto deadline = std::chrono::steady_clock::now() + kDrainTimeout;
  for (const std::string& dir : dirs) {
    if (!Exists(dir)) continue;
    // Children first (a stale tree holds its commands' cgroups).
    std::vector<std::string> children;
    for (const std::string& sub : Subdirectories(dir)) children.push_back(dir + "/" + sub);
    if (!children.empty()) TEMPER_RETURN_IF_ERROR(KillAndRemove(children, version));
    // cgroup.kill (v2, Linux 5.14) kills atomically, even a process forking meanwhile; otherwise
    // kill what is listed until nothing is (a killed process forks no more).
    bool atomic_kill = version == 2 && Exists(dir + "/cgroup.kill") && WriteText(dir + "/cgroup.kill", "1").ok();
    while (true) {
      std::vector<long> left = Members(dir);
      if (left.empty() && ::rmdir(dir.c_str()) == 0) break;
      if (left.empty() && errno == ENOENT) break;
      if (std::chrono::steady_clock::now() > deadline) {
        return Status::IOError(fmt::format("cgroup {} still holds {} process(es) {} s after they were killed", dir,
                                           left.size(),
                                           std::chrono::duration_cast<std::chrono::seconds>(kDrainTimeout).count()));
      }
      if (!atomic_kill) {
        for (long pid : left) ::kill(static_cast<pid_t>(pid), SIGKILL);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  return Status::OK();
}

// Removes the trees under `base` whose owner process is gone.
void RemoveStaleTrees(const std::vector<std::string>& bases, int version) {
  if (bases.empty()) return;
  for (const std::string& name : Subdirectories(bases.front())) {
    long pid = 0;
    unsigned long long start = 0;
    unsigned n = 0;
    if (name.rfind(kTreePrefix, 0) != 0 || std::sscanf(name.c_str(), "temper-%ld-%llu-%u", &pid, &start, &n) != 3)
      continue;
    std::optional<std::uint64_t> now = StartTime(pid);
    if (now && *now == start) continue;  // its owner still runs
    std::vector<std::string> dirs;
    for (const std::string& base : bases) dirs.push_back(base + "/" + name);
    (void)KillAndRemove(dirs, version);
  }
}

// Writes `caps` into one cgroup: `dirs` as CommandCgroup::dirs_ (v2: one; v1: memory, pids, then
// cpu when `has_cpu`). IOError naming the file that refused its value.
Status WriteCaps(int version, const std::vector<std::string>& dirs, bool has_cpu, const SandboxCaps& caps) {
  const std::string memory = std::to_string(caps.memory_bytes);
  if (version == 2) {
    const std::string& d = dirs[0];
    TEMPER_RETURN_IF_ERROR(WriteText(d + "/memory.max", memory));
    // No swap beyond the cap.
    if (Exists(d + "/memory.swap.max")) TEMPER_RETURN_IF_ERROR(WriteText(d + "/memory.swap.max", "0"));
    TEMPER_RETURN_IF_ERROR(WriteText(d + "/pids.max", std::to_string(caps.pids)));
    if (has_cpu) TEMPER_RETURN_IF_ERROR(WriteText(d + "/cpu.weight", std::to_string(caps.cpu_weight)));
    return Status::OK();
  }
  TEMPER_RETURN_IF_ERROR(WriteText(dirs[0] + "/memory.limit_in_bytes", memory));
  // With swap accounting on, memory plus swap gets the same cap (set after the memory limit: the
  // kernel keeps memsw at or above it).
  if (Exists(dirs[0] + "/memory.memsw.limit_in_bytes")) {
    TEMPER_RETURN_IF_ERROR(WriteText(dirs[0] + "/memory.memsw.limit_in_bytes", memory));
  }
  TEMPER_RETURN_IF_ERROR(WriteText(dirs[1] + "/pids.max", std::to_string(caps.pids)));
  if (has_cpu) {
    std::uint64_t shares = std::max<std::uint64_t>(2, caps.cpu_weight * kV1SharesPerWeight100 / 100);
    TEMPER_RETURN_IF_ERROR(WriteText(dirs[2] + "/cpu.shares", std::to_string(shares)));
  }
  return Status::OK();
}

struct Base {
  int version = 0;
  std::vector<std::string> dirs;  // v2: one; v1: memory, pids[, cpu]
  bool has_cpu = false;
};

// The v2 directory under which this process may make capped cgroups, or why there is none.
Result<Base> V2Base(const std::map<std::string, std::string>& mounts, const std::map<std::string, std::string>& own) {
  auto mount = mounts.find("");
  auto path = own.find("");
  if (mount == mounts.end() || path == own.end())
    return Status::FailedPrecondition("no cgroup2 file system is mounted");
  std::string dir = mount->second + (path->second == "/" ? "" : path->second);
  TEMPER_ASSIGN_OR_RETURN(std::string available, ReadText(dir + "/cgroup.controllers"));
  std::vector<std::string> controllers = Words(available, ' ');
  if (!Has(controllers, "memory") || !Has(controllers, "pids")) {
    return Status::FailedPrecondition(
        fmt::format("cgroup v2 at {} offers no memory and pids controllers (it offers: {})", dir,
                    available.empty() || available == "\n" ? "none" : available));
  }
  const bool cpu = Has(controllers, "cpu");
  const std::string wanted = cpu ? "+memory +pids +cpu" : "+memory +pids";
  // Already moved into our leaf by an earlier Open: the parent is the base.
  std::string parent = dir.substr(0, dir.rfind('/'));
  if (dir.ends_with(std::string("/") + kSelfLeaf)) return Base{2, {parent}, cpu};
  // The root cgroup may hold processes and hand out controllers at once.
  if (path->second != "/") {
    // This process and what it started (an evaluation running for another target) move into the
    // leaf; anybody else's process means the cgroup is not ours to rearrange.
    TEMPER_ASSIGN_OR_RETURN(std::string procs, ReadText(dir + "/cgroup.procs"));
    std::vector<long> ours;
    for (const std::string& pid : Words(procs, '\n')) {
      long p = std::stol(pid);
      if (!IsOursOrDescendant(p)) {
        return Status::FailedPrecondition(fmt::format(
            "cgroup v2 at {} holds processes that are not this one's (pid {}), so its controllers cannot be handed to "
            "sandboxes; run temperd in a cgroup of its own (systemd: Delegate=yes)",
            dir, p));
      }
      ours.push_back(p);
    }
    std::string leaf = dir + "/" + kSelfLeaf;
    if (::mkdir(leaf.c_str(), 0755) != 0 && errno != EEXIST) return Status::FromErrno(errno, "creating " + leaf);
    for (long p : ours) {
      Status moved = WriteText(leaf + "/cgroup.procs", std::to_string(p));
      if (!moved.ok() && StartTime(p)) return moved;  // one that exited meanwhile is no matter
    }
  }
  TEMPER_RETURN_IF_ERROR(WriteText(dir + "/cgroup.subtree_control", wanted));
  return Base{2, {dir}, cpu};
}

Result<Base> V1Base(const std::map<std::string, std::string>& mounts, const std::map<std::string, std::string>& own) {
  Base b{1, {}, false};
  for (const char* c : {"memory", "pids", "cpu"}) {
    auto mount = mounts.find(c);
    auto path = own.find(c);
    if (mount == mounts.end() || path == own.end()) {
      if (std::string(c) == "cpu") break;
      return Status::FailedPrecondition(fmt::format("no cgroup v1 {} hierarchy is mounted", c));
    }
    b.dirs.push_back(mount->second + (path->second == "/" ? "" : path->second));
    b.has_cpu = std::string(c) == "cpu";
  }
  return b;
}

}  // namespace

CommandCgroup::~CommandCgroup() { (void)Remove(); }

std::optional<CapKind> CommandCgroup::CapHit() const {
  const std::string& memory = dirs_[0];
  const std::string& pids = version_ == 2 ? dirs_[0] : dirs_[1];
  if (Counter(pids + "/pids.events", "max") > 0) return CapKind::kPids;
  if (!tree_pids_events_.empty() && Counter(tree_pids_events_, "max") > tree_pids_refused_before_) {
    return CapKind::kPids;
  }
  if (Counter(memory + (version_ == 2 ? "/memory.events" : "/memory.oom_control"), "oom_kill") > 0) {
    return CapKind::kMemory;
  }
  return std::nullopt;
}

Status CommandCgroup::Remove() {
  if (removed_) return Status::OK();
  join_fds_.clear();
  join_files_.clear();
  Status s = KillAndRemove(dirs_, version_);
  removed_ = s.ok();
  return s;
}

namespace {

// Where this process makes its trees: v2 when it can, v1 otherwise.
Result<Base> FindBase() {
  TEMPER_ASSIGN_OR_RETURN(auto mounts, CgroupMounts());
  TEMPER_ASSIGN_OR_RETURN(auto own, OwnCgroups());
  Result<Base> base = V2Base(mounts, own);
  if (base.ok()) return base;
  Result<Base> v1 = V1Base(mounts, own);
  if (!v1.ok()) {
    return Status::FailedPrecondition(fmt::format("no cgroup controllers to cap sandboxed commands with: {}; and {}",
                                                  base.status().message(), v1.status().message()));
  }
  return v1;
}

}  // namespace

void CgroupTree::RemoveStale() {
  Result<Base> base = FindBase();
  if (base.ok()) RemoveStaleTrees(base->dirs, base->version);
}

Result<std::unique_ptr<CgroupTree>> CgroupTree::Open(const SandboxCaps& caps) {
  TEMPER_ASSIGN_OR_RETURN(Base base, FindBase());
  RemoveStaleTrees(base.dirs, base.version);
  std::optional<std::uint64_t> start = StartTime(::getpid());
  if (!start) return Status::IOError("reading this process's start time from /proc/self/stat");
  // The first free <n> in the first hierarchy names the tree in all of them.
  for (unsigned n = 0;; ++n) {
    std::string name = fmt::format("temper-{}-{}-{}", ::getpid(), *start, n);
    std::string first = base.dirs.front() + "/" + name;
    if (::mkdir(first.c_str(), 0755) != 0) {
      if (errno == EEXIST) continue;
      return Status::FromErrno(errno, "creating the cgroup " + first);
    }
    std::vector<std::string> dirs{first};
    auto tree = std::unique_ptr<CgroupTree>(new CgroupTree(base.version, {}, base.has_cpu));
    for (std::size_t i = 1; i < base.dirs.size(); ++i) {
      std::string d = base.dirs[i] + "/" + name;
      if (::mkdir(d.c_str(), 0755) != 0 && errno != EEXIST) {
        Status s = Status::FromErrno(errno, "creating the cgroup " + d);
        (void)KillAndRemove(dirs, base.version);
        return s;
      }
      dirs.push_back(d);
    }
    tree->dirs_ = std::move(dirs);
    if (base.version == 2) {
      TEMPER_RETURN_IF_ERROR(
          WriteText(first + "/cgroup.subtree_control", base.has_cpu ? "+memory +pids +cpu" : "+memory +pids"));
    }
    // The caps hold for all the tree's commands together (sandbox_caps.h).
    TEMPER_RETURN_IF_ERROR(WriteCaps(base.version, tree->dirs_, base.has_cpu, caps));
    return tree;
  }
}

CgroupTree::~CgroupTree() { (void)KillAndRemove(dirs_, version_); }

std::string CgroupTree::Describe() const {
  return fmt::format("cgroup v{} ({}) at {}", version_, has_cpu_ ? "memory, pids, cpu" : "memory, pids",
                     fmt::join(dirs_, ", "));
}

Result<std::unique_ptr<CommandCgroup>> CgroupTree::NewCommand(const SandboxCaps& caps) {
  const std::string name = fmt::format("cmd-{}", next_++);
  std::vector<std::string> dirs;
  for (const std::string& tree : dirs_) dirs.push_back(tree + "/" + name);
  auto cmd = std::unique_ptr<CommandCgroup>(new CommandCgroup(version_, {}));
  for (const std::string& d : dirs) {
    if (::mkdir(d.c_str(), 0755) != 0) return Status::FromErrno(errno, "creating the cgroup " + d);
    cmd->dirs_.push_back(d);  // from here on, removed with the command
  }
  TEMPER_RETURN_IF_ERROR(WriteCaps(version_, dirs, has_cpu_, caps));
  if (version_ == 2) {
    // An OOM kill takes the whole command, not one of its processes.
    TEMPER_RETURN_IF_ERROR(WriteText(dirs[0] + "/memory.oom.group", "1"));
    // A fork refused by the tree's pids cap is counted in the tree's pids.events only (v2 counts
    // where the cap is, v1 where the fork was): CapHit compares it with its value from now.
    cmd->tree_pids_events_ = dirs_[0] + "/pids.events";
    cmd->tree_pids_refused_before_ = Counter(cmd->tree_pids_events_, "max");
  }
  for (const std::string& d : dirs) {
    UniqueFd fd(::open((d + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC));
    if (!fd.valid()) return Status::FromErrno(errno, "opening " + d + "/cgroup.procs");
    cmd->join_fds_.push_back(fd.get());
    cmd->join_files_.push_back(std::move(fd));
  }
  return cmd;
}

}  // namespace temper
