// Attacks on a twin's copy of an SSH host (issue 50): the host sends the archive its "/" becomes,
// so a compromised host can send any archive it likes. Each case replaces the host's tar with a
// script that emits a crafted archive, copies the host through the real CopyHostRoot, and checks
// that nothing was written outside the destination, whatever the copy's outcome.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>

#include "scratch_space.h"
#include "stig/ssh/host_copy.h"
#include "stig/ssh/ssh_test_support.h"
#include "stig/ssh/tar_test_archive.h"

namespace temper::testing {
namespace {

namespace fs = std::filesystem;

TEST_CASE("a hostile host's archive cannot write outside the twin's directory", "[security][ssh][host_copy]") {
  TEMPER_SKIP_WITHOUT_SSH_HOSTS();
  auto host = StartHost("atk-twin");
  ScopedControlDir control;
  auto ssh = stig::SshConnection::Open(
      TestSshOptions(host->Endpoint("root"), TestRoot().client_key, AcceptedKnownHosts(*host), control.path()),
      QuietSshLog());
  INFO(ssh.status().ToString());
  REQUIRE(ssh.ok());

  ScratchPath outside("twin-outside");
  ScratchPath dest("twin-attacked");
  const std::string escape = fs::path(dest.path()).parent_path().string() + "/escape";
  fs::remove(escape);
  TarTestArchive crafted;
  crafted.Add('5', "./", "", "", 0755)
      .Add('0', "../escape", "escaped\n")
      .Add('5', "./etc/", "", "", 0755)
      // An absolute symlink, then a member through it: extracted naively, x lands at outside/x.
      .Add('2', "./etc/evil", "", outside.path())
      .Add('0', "./etc/evil/x", "through the link\n")
      // The same through a relative link that climbs out of the destination.
      .Add('2', "./etc/climb", "", "../../../../../../../../../.." + outside.path())
      .Add('0', "./etc/climb/y", "through the climb\n")
      // A hard link to this machine's password file.
      .Add('1', "./etc/hl", "", "../../../../../../../../../../etc/passwd");
  {
    std::ofstream(host->tree() + "/crafted.tar", std::ios::binary) << crafted.Finish();
    std::ofstream(host->tree() + "/usr/bin/tar")
        << "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'tar (GNU tar) 1.34'; exit 0; fi\nexec cat /crafted.tar\n";
  }
  REQUIRE(::chmod((host->tree() + "/usr/bin/tar").c_str(), 0755) == 0);

  stig::HostCopyOptions options;
  options.destination = dest.path();
  auto record = stig::CopyHostRoot(**ssh, options, QuietSshLog());
  INFO("the copy: " << (record.ok() ? "succeeded" : record.status().ToString()));

  CHECK_FALSE(fs::exists(fs::symlink_status(outside.path())));
  CHECK_FALSE(fs::exists(fs::symlink_status(escape)));
  if (record.ok()) {
    struct stat copied, real;
    if (::lstat((dest.path() + "/etc/hl").c_str(), &copied) == 0 && ::stat("/etc/passwd", &real) == 0) {
      CHECK_FALSE((copied.st_ino == real.st_ino && copied.st_dev == real.st_dev));
    }
  } else {
    // A failed copy leaves no partial tree either.
    CHECK_FALSE(fs::exists(dest.path()));
  }
}

}  // namespace
}  // namespace temper::testing
