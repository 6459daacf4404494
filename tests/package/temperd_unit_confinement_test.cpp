// temperd's sandbox under the confinement its systemd unit gives it, rebuilt without systemd from
// deploy/temperd.service.in itself: a child process takes the unit's CapabilityBoundingSet= (as
// its bounding, permitted and effective sets) and NoNewPrivileges=, and the mount settings the unit
// has among those that change what bubblewrap sees: ProtectSystem=strict (every mount read-only
// but /dev, /proc, /sys and a directory standing for /var/lib/temper), PrivateTmp=,
// ProtectProc=invisible, and, should they appear, ProtectKernelLogs= (/proc/kmsg covered),
// ProtectKernelTunables= (/proc/sys bound read-only) and ProcSubset=pid. There it runs a command
// with RunInSandbox (platform/sandbox.h), as temperd runs every command on a rootfs target: its cgroup,
// its user namespace, bubblewrap. So a unit change that breaks the sandbox fails here, not on a
// user's host; the control case adds ProtectKernelLogs=yes to the unit and sees the sandbox fail.
// Not rebuilt: the seccomp settings (SystemCallFilter=, RestrictAddressFamilies=, ...), which
// need libseccomp. Needs root and /usr/bin/bwrap.
#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "platform/cgroup.h"
#include "platform/sandbox.h"
#include "scratch_space.h"
#include "skip.h"

namespace temper::testing {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The unit's [Service] settings, key to value (the last one wins, as in systemd; the unit sets
// each once).
std::map<std::string, std::string> ServiceSettings(const std::string& unit) {
  std::map<std::string, std::string> settings;
  std::istringstream lines(unit);
  std::string line, section;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line[0] == '[') {
      section = line;
      continue;
    }
    const std::size_t eq = line.find('=');
    if (section == "[Service]" && eq != std::string::npos) settings[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return settings;
}

// CAP_* names as the unit writes them, to their numbers.
const std::map<std::string, int>& CapabilityNumbers() {
#define TEMPER_CAP(name) \
  { #name, name }
  static const std::map<std::string, int> numbers = {TEMPER_CAP(CAP_CHOWN),
                                                     TEMPER_CAP(CAP_DAC_OVERRIDE),
                                                     TEMPER_CAP(CAP_DAC_READ_SEARCH),
                                                     TEMPER_CAP(CAP_FOWNER),
                                                     TEMPER_CAP(CAP_FSETID),
                                                     TEMPER_CAP(CAP_KILL),
                                                     TEMPER_CAP(CAP_SETGID),
                                                     TEMPER_CAP(CAP_SETUID),
                                                     TEMPER_CAP(CAP_SETPCAP),
                                                     TEMPER_CAP(CAP_LINUX_IMMUTABLE),
                                                     TEMPER_CAP(CAP_NET_BIND_SERVICE),
                                                     TEMPER_CAP(CAP_NET_BROADCAST),
                                                     TEMPER_CAP(CAP_NET_ADMIN),
                                                     TEMPER_CAP(CAP_NET_RAW),
                                                     TEMPER_CAP(CAP_IPC_LOCK),
                                                     TEMPER_CAP(CAP_IPC_OWNER),
                                                     TEMPER_CAP(CAP_SYS_MODULE),
                                                     TEMPER_CAP(CAP_SYS_RAWIO),
                                                     TEMPER_CAP(CAP_SYS_CHROOT),
                                                     TEMPER_CAP(CAP_SYS_PTRACE),
                                                     TEMPER_CAP(CAP_SYS_PACCT),
                                                     TEMPER_CAP(CAP_SYS_ADMIN),
                                                     TEMPER_CAP(CAP_SYS_BOOT),
                                                     TEMPER_CAP(CAP_SYS_NICE),
                                                     TEMPER_CAP(CAP_SYS_RESOURCE),
                                                     TEMPER_CAP(CAP_SYS_TIME),
                                                     TEMPER_CAP(CAP_SYS_TTY_CONFIG),
                                                     TEMPER_CAP(CAP_MKNOD),
                                                     TEMPER_CAP(CAP_LEASE),
                                                     TEMPER_CAP(CAP_AUDIT_WRITE),
                                                     TEMPER_CAP(CAP_AUDIT_CONTROL),
                                                     TEMPER_CAP(CAP_SETFCAP),
                                                     TEMPER_CAP(CAP_MAC_OVERRIDE),
                                                     TEMPER_CAP(CAP_MAC_ADMIN),
                                                     TEMPER_CAP(CAP_SYSLOG),
                                                     TEMPER_CAP(CAP_WAKE_ALARM),
                                                     TEMPER_CAP(CAP_BLOCK_SUSPEND),
                                                     TEMPER_CAP(CAP_AUDIT_READ),
                                                     TEMPER_CAP(CAP_PERFMON),
                                                     TEMPER_CAP(CAP_BPF),
                                                     TEMPER_CAP(CAP_CHECKPOINT_RESTORE)};
#undef TEMPER_CAP
  return numbers;
}

// What the child reports: the sandboxed command's outcome, or the step of the confinement that
// failed.
struct Outcome {
  bool ran = false;  // RunInSandbox returned and the command succeeded
  std::string report;
};

// In a child process: confine it as the unit says (see the top), then run `command` with
// RunInSandbox over the host's root (read-only by then), `state_dir` standing for /var/lib/temper.
Outcome RunConfined(const std::map<std::string, std::string>& unit, const std::string& state_dir,
                    const std::string& command) {
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(pipe_fds[0]);
    FILE* report = ::fdopen(pipe_fds[1], "w");
    auto fail = [&](const std::string& what) {
      std::fprintf(report, "%s: %s", what.c_str(), std::strerror(errno));
      std::fflush(report);
      ::_exit(1);
    };
    auto setting = [&](const std::string& key) {
      auto it = unit.find(key);
      return it == unit.end() ? std::string() : it->second;
    };
    if (::unshare(CLONE_NEWNS) != 0) fail("unshare(CLONE_NEWNS)");
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) fail("making mounts private");
    if (setting("ProtectSystem") == "strict") {
      // Read-only, keeping each mount's nosuid/nodev/noexec, deepest first so none is skipped.
      std::vector<std::pair<std::string, unsigned long>> mounts;
      std::istringstream info(Slurp("/proc/self/mountinfo"));
      for (std::string line; std::getline(info, line);) {
        std::istringstream f(line);
        std::string id, parent, dev, root, point, options;
        f >> id >> parent >> dev >> root >> point >> options;
        if (point == "/dev" || point.starts_with("/dev/") || point == "/proc" || point.starts_with("/proc/") ||
            point == "/sys" || point.starts_with("/sys/")) {
          continue;
        }
        unsigned long flags = MS_REMOUNT | MS_BIND | MS_RDONLY;
        for (const auto& [name, bit] :
             {std::pair<const char*, unsigned long>{"nosuid", MS_NOSUID}, {"nodev", MS_NODEV}, {"noexec", MS_NOEXEC}}) {
          if (("," + options + ",").find(std::string(",") + name + ",") != std::string::npos) flags |= bit;
        }
        mounts.emplace_back(point, flags);
      }
      std::sort(mounts.begin(), mounts.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
      for (const auto& [point, flags] : mounts) {
        // A mount point hidden under a later mount cannot be reached; systemd skips those too.
        if (::mount(nullptr, point.c_str(), nullptr, flags, nullptr) != 0 && errno != ENOENT && errno != EACCES) {
          fail("remounting " + point + " read-only");
        }
      }
      // StateDirectory= stays writable.
      if (::mount(state_dir.c_str(), state_dir.c_str(), nullptr, MS_BIND, nullptr) != 0 ||
          ::mount(nullptr, state_dir.c_str(), nullptr, MS_REMOUNT | MS_BIND, nullptr) != 0) {
        fail("binding " + state_dir + " writable");
      }
    }
    if (setting("PrivateTmp") == "yes" && ::mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0) {
      fail("PrivateTmp: a tmpfs on /tmp");
    }
    std::string proc_options;
    if (setting("ProtectProc") == "invisible") proc_options = "hidepid=invisible";
    if (setting("ProcSubset") == "pid") proc_options += std::string(proc_options.empty() ? "" : ",") + "subset=pid";
    if (!proc_options.empty() &&
        ::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, proc_options.c_str()) != 0) {
      fail("mounting /proc with " + proc_options);
    }
    if (setting("ProtectKernelLogs") == "yes" && ::mount("/dev/null", "/proc/kmsg", nullptr, MS_BIND, nullptr) != 0) {
      fail("ProtectKernelLogs: covering /proc/kmsg");
    }
    if (setting("ProtectKernelTunables") == "yes" &&
        (::mount("/proc/sys", "/proc/sys", nullptr, MS_BIND | MS_REC, nullptr) != 0 ||
         ::mount(nullptr, "/proc/sys", nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) != 0)) {
      fail("ProtectKernelTunables: /proc/sys read-only");
    }
    // The capabilities: what is not listed leaves the bounding set, and this process keeps only
    // the listed ones, as temperd does once systemd has executed it.
    std::set<int> kept;
    std::istringstream names(setting("CapabilityBoundingSet"));
    for (std::string name; names >> name;) {
      auto it = CapabilityNumbers().find(name);
      if (it == CapabilityNumbers().end()) {
        errno = EINVAL;
        fail("unknown capability " + name + " in the unit");
      }
      kept.insert(it->second);
    }
    if (!kept.empty()) {
      int last = 40;
      std::ifstream("/proc/sys/kernel/cap_last_cap") >> last;
      std::uint64_t mask = 0;
      for (int cap = 0; cap <= last; ++cap) {
        if (kept.count(cap) != 0) {
          mask |= std::uint64_t{1} << cap;
        } else if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) {
          fail("dropping capability " + std::to_string(cap) + " from the bounding set");
        }
      }
      // Of those, what this process holds (a container may hold fewer than all).
      __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
      __user_cap_data_struct data[2] = {};
      if (::syscall(SYS_capget, &header, data) != 0) fail("capget");
      for (int i = 0; i < 2; ++i) {
        data[i].permitted &= static_cast<std::uint32_t>(mask >> (32 * i));
        data[i].effective = data[i].permitted;
        data[i].inheritable = 0;
      }
      if (::syscall(SYS_capset, &header, data) != 0) fail("capset");
    }
    if (setting("NoNewPrivileges") == "yes" && ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
      fail("prctl(PR_SET_NO_NEW_PRIVS)");
    }

    auto cgroups = temper::CgroupTree::Open();
    if (!cgroups.ok()) {
      std::fprintf(report, "opening the cgroup tree: %s", cgroups.status().ToString().c_str());
      std::fflush(report);
      ::_exit(1);
    }
    temper::SandboxLimits limits;
    limits.timeout = std::chrono::seconds(30);
    auto r = temper::RunInSandbox("/", command, limits, **cgroups, temper::SandboxCaps{});
    if (!r.ok()) {
      std::fprintf(report, "RunInSandbox: %s", r.status().ToString().c_str());
    } else {
      std::fprintf(report, "%s\nout: %s\nerr: %s", r->Describe().c_str(), r->out.c_str(), r->err.c_str());
    }
    std::fflush(report);
    cgroups->reset();
    ::_exit(r.ok() && r->Succeeded() ? 0 : 1);
  }
  ::close(pipe_fds[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(pipe_fds[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<std::size_t>(n));
  ::close(pipe_fds[0]);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return {WIFEXITED(status) && WEXITSTATUS(status) == 0, text};
}

const char* SkipReason() {
  if (::geteuid() != 0) return "confining a process like systemd does needs root";
  if (!std::filesystem::exists("/usr/bin/bwrap")) return "bubblewrap is missing (/usr/bin/bwrap)";
  return nullptr;
}

TEST_CASE("temperd's sandbox runs a command under the confinement of its unit", "[package]") {
  if (const char* why = SkipReason()) TEMPER_SKIP(why);
  const auto unit = ServiceSettings(Slurp(std::string(TEMPER_SOURCE_DIR) + "/deploy/temperd.service.in"));
  // What makes this case worth running: the unit confines temperd in these ways.
  REQUIRE(unit.count("CapabilityBoundingSet") == 1);
  REQUIRE(unit.at("ProtectSystem") == "strict");
  REQUIRE(unit.at("NoNewPrivileges") == "yes");
  ScratchPath state("confined-state");
  std::filesystem::create_directories(state.path());
  Outcome o =
      RunConfined(unit, state.path(), "echo confined; id -u; touch /proc/sys/kernel/hostname 2>/dev/null || echo ro");
  INFO(o.report);
  CHECK(o.ran);
  CHECK_THAT(o.report, Catch::Contains("out: confined\n0\nro\n"));
}

TEST_CASE("temperd's sandbox fails under its unit with ProtectKernelLogs=yes added (the control)", "[package]") {
  if (const char* why = SkipReason()) TEMPER_SKIP(why);
  auto unit = ServiceSettings(Slurp(std::string(TEMPER_SOURCE_DIR) + "/deploy/temperd.service.in"));
  unit["ProtectKernelLogs"] = "yes";
  ScratchPath state("confined-state");
  std::filesystem::create_directories(state.path());
  Outcome o = RunConfined(unit, state.path(), "echo confined");
  INFO(o.report);
  CHECK_FALSE(o.ran);
  // bubblewrap, in the sandbox's user namespace, may not mount a /proc that has a file covered.
  CHECK_THAT(o.report, Catch::Contains("Can't mount proc"));
}

}  // namespace
}  // namespace temper::testing
