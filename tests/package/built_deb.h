// The Debian package as cmake/packaging.cmake makes it from this build tree, for the cases that
// judge it with Debian's own tools (lintian, systemd-analyze, the hardening check): cpack into a
// scratch directory, then `dpkg-deb -x` of the result beside it, so a case reads the files exactly
// as dpkg would install them. Each case builds its own (ctest runs each in a process of its own):
// cpack with stripping takes seconds.
// Thread safety: call from the case's thread (it uses Catch's REQUIRE).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "scratch_space.h"

namespace temper::testing {

struct BuiltDeb {
  std::unique_ptr<ScratchPath> work;  // owns both; removed with this object
  std::string deb;                    // .../temper_<version>_amd64.deb
  std::string tree;                   // its files, unpacked: tree + "/usr/sbin/temperd", ...
};

// Builds and unpacks the package, or fails the calling case with cpack's or dpkg-deb's output.
BuiltDeb BuildDeb();

// "temper_0.1.0-1_amd64.deb": the name CPack gives the package (DEB-DEFAULT), the version being
// deploy/debian/changelog's.
std::string DebFileName();

// The regular files of `tree` (recursively) that start with the ELF magic, as paths relative to it
// ("usr/sbin/temperd"), sorted.
std::vector<std::string> ElfFilesUnder(const std::string& tree);

}  // namespace temper::testing
