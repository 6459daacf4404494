// Leftovers: what a test process left behind in a directory of its own (scratch_space.h): the
// mounts at or below it and the files in it, found and removed. The test main ends every process
// with it, and the ctest fixtures' sweep and check (tests/CMakeLists.txt) apply it to the
// directories of processes that died before their main could (a crash, ctest's timeout).
//
// Mounts are read from /proc/self/mountinfo, so only what this mount namespace sees counts;
// removal detaches them deepest first (MNT_DETACH: a killed daemon's sandbox may still hold one
// busy) before the files go, so a removal never reaches into a mounted tree. Thread safety: none
// needed (no state).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace temper::testing {

struct Leftovers {
  std::vector<std::string> mounts;   // mount points at or below the directory, deepest first
  std::vector<std::string> entries;  // paths in the directory, sorted (so a directory before what it holds)
  bool empty() const { return mounts.empty() && entries.empty(); }
  // "mount A; B; C" with at most `max_entries` entries named, then how many more.
  std::string ToString(size_t max_entries = 12) const;
};

// What lies at or below `dir` (nothing when it does not exist).
Leftovers FindLeftovers(const std::string& dir);

// Detaches every mount at or below `dir`, deepest first, then removes `dir` and everything in it.
// OK when `dir` does not exist; IOError naming what could not be removed otherwise.
Status RemoveWithMounts(const std::string& dir);

// The directories in `root` that belong to no running process: those named by a pid that is not
// running, and any other name (no process owns it). None when `root` does not exist.
std::vector<std::string> DeadProcessDirs(const std::string& root);

}  // namespace temper::testing
