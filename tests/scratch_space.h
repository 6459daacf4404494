// Where tests write, so that nothing a test process writes or mounts outlives it unseen.
//
// Per build tree there are two roots, and in each one directory per test process, named by its pid:
//   - TestScratchDir(): <build>/test-scratch/<pid>, for big trees (rootfs targets, package caches,
//     SSH hosts' overlays); where the build tree is not on this machine (a binary shipped to a lent
//     GPU), /tmp/temper-<8 hex>-scratch/<pid>;
//   - TestTempDir(): /tmp/temper-<8 hex of the build tree's path>/<pid>, for temporaries with short
//     paths (a unix socket's path must fit in 107 bytes, wherever the checkout lies) that other
//     users may reach: both levels are mode 0711, so a directory a test opens up is reachable.
// The test main points TMPDIR at TestTempDir() before any case runs, so std::filesystem's
// temp_directory_path(), mkdtemp under it, and the programs the tests start put their temporaries
// there too; it checks at exit that the process left nothing in either directory (leftovers.h). A
// directory found at first use belongs to a dead process that had the same pid: it is removed first.
//
// A directory that cannot be made (or a root that is not a directory of this user's) fails the
// calling case with the path and the reason. Thread-safe; each is made once per process.
#pragma once

#include <string>

#include "leftovers.h"

namespace temper::testing {

const std::string& TestScratchDir();
const std::string& TestTempDir();

// The roots the per-process directories lie in, as the sweep of dead processes' leftovers reads
// them (leftovers.h).
std::string TestScratchRoot();
std::string TestTempRoot();

// TestScratchDir()/`name`, removed with everything under it (mounts detached first) when the object
// dies, and first too, should a failed earlier run of the case (a SECTION) have left it. Nothing is
// made: the user makes the path as a file or a directory.
class ScratchPath {
 public:
  explicit ScratchPath(const std::string& name);
  ~ScratchPath();
  ScratchPath(const ScratchPath&) = delete;
  ScratchPath& operator=(const ScratchPath&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The test main's last step: what this process left in its two directories, which are then removed
// (and each root with them when no other process uses it).
Leftovers EndProcessDirs();

}  // namespace temper::testing
