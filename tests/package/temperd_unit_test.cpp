// temperd's systemd unit (deploy/temperd.service.in) judged by systemd's own tools: the unit as
// the package installs it passes `systemd-analyze verify` (its man page found in the package), its
// `systemd-analyze security` exposure stays at or below what the hardening reached (8.2 EXPOSED
// before it), and it keeps out the settings that would break temperd's work under systemd, which
// would lower the exposure too, so the number alone would reward them.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "orchestrator/daemon_process.h"
#include "package/built_deb.h"
#include "scratch_space.h"
#include "skip.h"

namespace temper::testing {
namespace {

// The exposure the hardened unit reaches; a change that loosens it fails here. Lower it when the
// unit gets tighter.
constexpr double kMaxExposure = 5.2;

const std::string kSystemdAnalyze = "/usr/bin/systemd-analyze";

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The unit as the build writes it, with ExecStart naming `temperd` (the template's only
// substitution), at `dir`/temperd.service: systemd-analyze names units by their file name.
std::string WriteUnit(const std::string& dir, const std::string& temperd) {
  std::string unit = Slurp(std::string(TEMPER_SOURCE_DIR) + "/deploy/temperd.service.in");
  REQUIRE(unit.find("@TEMPERD_PATH@") != std::string::npos);
  unit = std::regex_replace(unit, std::regex("@TEMPERD_PATH@"), temperd);
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/temperd.service";
  std::ofstream(path) << unit;
  return path;
}

TEST_CASE("the packaged temperd unit passes systemd-analyze verify", "[package]") {
  if (!std::filesystem::exists(kSystemdAnalyze)) TEMPER_SKIP("systemd-analyze is missing (package systemd)");
  const BuiltDeb built = BuildDeb();
  const std::string packaged = Slurp(built.tree + "/lib/systemd/system/temperd.service");
  REQUIRE_THAT(packaged, Catch::Contains("\nExecStart=/usr/sbin/temperd --config /etc/temper/temperd.yaml\n"));
  // verify checks that ExecStart's program exists and is executable, and that Documentation='s man
  // page opens: point both into the unpacked package rather than at an installed temperd.
  ScratchPath dir("unit-verify");
  const std::string unit = dir.path() + "/temperd.service";
  std::filesystem::create_directories(dir.path());
  std::ofstream(unit) << std::regex_replace(packaged, std::regex("\nExecStart=/usr/sbin/temperd "),
                                            "\nExecStart=" + built.tree + "/usr/sbin/temperd ");
  ProcessResult verify = RunProcess({"/usr/bin/env", "MANPATH=" + built.tree + "/usr/share/man", kSystemdAnalyze,
                                     "verify", "--man=yes", unit});
  INFO(verify.out << verify.err);
  CHECK(verify.exit_code == 0);
  // Warnings (an unknown key, a bad value that systemd ignores) go to stderr without failing.
  CHECK(verify.err.empty());

  SECTION("and a unit whose program is missing does not") {  // the check above can fail
    const std::string broken = WriteUnit(dir.path() + "/broken", dir.path() + "/no-such-temperd");
    ProcessResult bad = RunProcess({kSystemdAnalyze, "verify", "--man=no", broken});
    CHECK(bad.exit_code != 0);
    CHECK_THAT(bad.err, Catch::Contains("is not executable"));
  }
}

TEST_CASE("systemd-analyze security rates the temperd unit at most 5.2", "[package]") {
  if (!std::filesystem::exists(kSystemdAnalyze)) TEMPER_SKIP("systemd-analyze is missing (package systemd)");
  ScratchPath dir("unit-security");
  const std::string unit = WriteUnit(dir.path(), "/usr/sbin/temperd");
  ProcessResult security = RunProcess({kSystemdAnalyze, "security", "--offline=yes", "--no-pager", unit});
  INFO(security.out << security.err);
  REQUIRE(security.exit_code == 0);
  std::smatch m;
  REQUIRE(std::regex_search(security.out, m, std::regex(R"(Overall exposure level for temperd\.service: ([0-9]+\.[0-9]))")));
  const double exposure = std::stod(m[1].str());
  std::printf("temperd.service: systemd-analyze security exposure %.1f (8.2 before the hardening)\n", exposure);
  CHECK(exposure <= kMaxExposure);
  // The settings that carry most of it, each checked by name so a regression says which: its line
  // in the report starts with a check mark.
  for (const char* held : {"NoNewPrivileges=", "ProtectSystem=", "CapabilityBoundingSet=~CAP_SYS_PTRACE",
                           "CapabilityBoundingSet=~CAP_NET_ADMIN", "SystemCallArchitectures=",
                           "RestrictAddressFamilies=~AF_PACKET", "SystemCallFilter=~@debug", "ProtectProc="}) {
    INFO(held);
    std::istringstream report(security.out);
    std::string line;
    bool found = false;
    while (std::getline(report, line)) {
      if (line.find(std::string(" ") + held + " ") == std::string::npos) continue;
      found = true;
      CHECK(line.rfind("✓", 0) == 0);
    }
    CHECK(found);
  }
}

// Each of these would lower the exposure and break what temperd does under systemd (the unit's
// header comment says how; the first three were tried on Debian 12 with bubblewrap itself), or, for
// ExecReload, offer a reload that temperd does not do.
TEST_CASE("the temperd unit leaves out the settings that break its sandbox, devices or reload", "[package]") {
  const std::string unit = Slurp(std::string(TEMPER_SOURCE_DIR) + "/deploy/temperd.service.in");
  REQUIRE_THAT(unit, Catch::Contains("[Service]"));
  const std::map<std::string, std::string> excluded = {
      {"ProtectKernelTunables", "covers /proc/sys: bubblewrap cannot mount the sandbox's /proc"},
      {"ProtectKernelLogs", "covers /proc/kmsg: bubblewrap cannot mount the sandbox's /proc"},
      {"ProcSubset", "hides /proc/sys/kernel/overflowuid, which bubblewrap reads"},
      {"ProtectHostname", "filters sethostname(), which bubblewrap --hostname calls in the sandbox"},
      {"RestrictSUIDSGID", "dpkg must unpack setuid programs (sudo) into targets"},
      {"MemoryDenyWriteExecute", "inherited by the sandboxes, where JIT compilers run"},
      {"RestrictNamespaces", "bubblewrap makes user, mount, pid, net, ipc, uts and cgroup namespaces"},
      {"ProtectControlGroups", "temperd makes each sandboxed command's cgroup"},
      {"PrivateDevices", "loop devices for the targets' layer images, the NVIDIA devices"},
      {"DeviceAllow", "an allow-list shuts out the loop and NVIDIA devices"},
      {"ProtectClock", "implies DeviceAllow=char-rtc on systemd 252"},
      {"PrivateUsers", "temperd needs root's capabilities over the host's files and mounts"},
      {"UMask", "inherited by the sandboxes: files written into targets would change mode"},
      {"ExecReload", "temperd re-reads nothing on SIGHUP"},
  };
  std::istringstream lines(unit);
  std::string line;
  while (std::getline(lines, line)) {
    const std::size_t eq = line.find('=');
    if (line.empty() || line[0] == '#' || eq == std::string::npos) continue;
    const std::string key = line.substr(0, eq);
    auto it = excluded.find(key);
    INFO(line << ": " << (it == excluded.end() ? "" : it->second));
    CHECK(it == excluded.end());
  }
}

}  // namespace
}  // namespace temper::testing
