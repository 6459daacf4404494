// The Debian package, built by CPack from this build tree and installed the way an operator would:
// into a fresh Debian 12 root made by mmdebstrap, with apt taking its dependencies from the mirror;
// temperd --check-config and temper --help run there; then dpkg --purge must leave none of its
// files, its configuration or temperd's state behind. Needs root, mmdebstrap and the mirror.
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "orchestrator/daemon_process.h"
#include "package/built_deb.h"
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

// Seconds a step of deb_lifecycle_hook.sh took.
double StepSeconds(const std::string& results, const std::string& step) {
  double start = 0, end = 0;
  std::istringstream(Slurp(results + "/" + step + ".time")) >> start >> end;
  return end - start;
}

TEST_CASE("the Debian package installs into a fresh Debian 12 root, runs, and purges without a trace", "[package]") {
  if (::geteuid() != 0) TEMPER_SKIP("mmdebstrap --mode=root needs root");
  if (!std::filesystem::exists("/usr/bin/mmdebstrap")) TEMPER_SKIP("mmdebstrap is missing (deploy/setup.sh)");
  ScratchPath work("deb-package");
  std::filesystem::create_directories(work.path() + "/results");

  ProcessResult pack = RunProcess({TEMPER_CPACK_COMMAND, "-G", "DEB", "--config",
                                   std::string(TEMPER_BINARY_DIR) + "/CPackConfig.cmake", "-B", work.path() + "/pkg"});
  INFO(pack.out << pack.err);
  REQUIRE(pack.exit_code == 0);
  const std::string deb = work.path() + "/pkg/" + DebFileName();
  REQUIRE(std::filesystem::exists(deb));

  {  // What dpkg sees before anything is installed
    ProcessResult contents = RunProcess({"/usr/bin/dpkg-deb", "--contents", deb});
    REQUIRE(contents.exit_code == 0);
    for (const char* path :
         {"./usr/sbin/temperd", "./usr/bin/temper", "./usr/bin/temper-lm", "./usr/libexec/temper/temper-stig-eval",
          "./etc/temper/temperd.yaml", "./etc/temper/models.yaml", "./lib/systemd/system/temperd.service",
          "./usr/share/doc/temper/copyright", "./usr/share/doc/temper/changelog.Debian.gz",
          "./usr/share/man/man8/temperd.8.gz", "./usr/share/man/man1/temper.1.gz", "./usr/share/man/man1/temper-lm.1.gz",
          "./usr/share/lintian/overrides/temper"}) {
      CHECK_THAT(contents.out, Catch::Contains(std::string(" ") + path + "\n"));
    }
    ProcessResult depends = RunProcess({"/usr/bin/dpkg-deb", "--field", deb, "Depends"});
    for (const char* dep : {"bubblewrap", "ssg-debderived", "adduser", "libopenscap25", "libgrpc++1.51"}) {
      CHECK_THAT(depends.out, Catch::Contains(dep));
    }
    CHECK_THAT(depends.out, !Catch::Contains("cuda") && !Catch::Contains("cublas"));
    ProcessResult conffiles = RunProcess({"/usr/bin/dpkg-deb", "--info", deb, "conffiles"});
    CHECK(conffiles.out == "/etc/temper/temperd.yaml\n/etc/temper/models.yaml\n");
    ProcessResult unit =
        RunProcess({"/bin/sh", "-c",
                    "/usr/bin/dpkg-deb --fsys-tarfile '" + deb + "' | tar -xO ./lib/systemd/system/temperd.service"});
    CHECK_THAT(unit.out, Catch::Contains("ExecStart=/usr/sbin/temperd --config /etc/temper/temperd.yaml"));
  }

  // The hook installs, runs, purges and records; mmdebstrap sets up the root's /proc, /dev and DNS.
  // apt downloads as root: the scratch directory is closed to the _apt user it would drop to.
  const std::string results = work.path() + "/results";
  ProcessResult root =
      RunProcess({"/usr/bin/env", "TEMPER_DEB=" + deb, "TEMPER_RESULTS=" + results, "/usr/bin/mmdebstrap",
                  "--mode=root", "--variant=minbase", "--quiet", "--aptopt=APT::Sandbox::User \"root\"",
                  "--customize-hook=" + std::string(TEMPER_SOURCE_DIR) + "/tests/package/deb_lifecycle_hook.sh",
                  "bookworm", work.path() + "/root", "http://deb.debian.org/debian"});
  INFO(root.out << root.err);
  REQUIRE(root.exit_code == 0);
  auto step_ok = [&](const std::string& step) {
    INFO(step << ": " << Slurp(results + "/" + step + ".out"));
    CHECK(Slurp(results + "/" + step + ".rc") == "0\n");
  };
  for (const char* step : {"install", "check-config", "help", "group", "files", "conffiles", "purge"}) step_ok(step);
  CHECK(Slurp(results + "/check-config.out") == "/etc/temper/temperd.yaml: OK\n");
  CHECK_THAT(Slurp(results + "/help.out"), Catch::StartsWith("temper: submit STIG remediation batches"));
  CHECK_THAT(Slurp(results + "/group.out"), Catch::StartsWith("temper:x:"));
  CHECK_THAT(Slurp(results + "/conffiles.out"),
             Catch::Contains("/etc/temper/temperd.yaml") && Catch::Contains("/etc/temper/models.yaml"));
  CHECK(Slurp(results + "/left.txt").empty());
  std::printf("deb package: install %.1f s (apt, with its dependencies from the mirror), purge %.2f s\n",
              StepSeconds(results, "install"), StepSeconds(results, "purge"));
}

}  // namespace
}  // namespace temper::testing
