#include "scratch_space.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "leftovers.h"

namespace temper::testing {
namespace {

constexpr mode_t kReachable = 0711;  // others may pass through to what a test opens up, not list

// <root>/<pid>, mode 0711, made fresh: a directory already there belongs to a dead process that had
// this pid. `root` is made when missing and must be a directory of this user (not a link: /tmp is
// everyone's). The last process to end removes the root (EndProcessDirs), maybe between the two
// mkdirs here: then both are made again.
std::string MakeProcessDir(const std::string& root) {
  const std::string dir = fmt::format("{}/{}", root, ::getpid());
  if (Status stale = RemoveWithMounts(dir); !stale.ok()) {
    throw std::runtime_error("removing a dead process's test directory: " + stale.ToString());
  }
  for (int attempt = 0; attempt < 10; ++attempt) {
    if (::mkdir(root.c_str(), kReachable) != 0 && errno != EEXIST) {
      throw std::runtime_error(fmt::format("making {}: {}", root, std::strerror(errno)));
    }
    struct stat st {};
    if (::lstat(root.c_str(), &st) != 0) continue;
    if (!S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) {
      throw std::runtime_error(
          fmt::format("{} is not a directory of uid {}: tests will not write there", root, ::geteuid()));
    }
    if (::chmod(root.c_str(), kReachable) != 0 && errno != ENOENT) {
      throw std::runtime_error(fmt::format("making {} mode 0711: {}", root, std::strerror(errno)));
    }
    if (::mkdir(dir.c_str(), kReachable) == 0 && ::chmod(dir.c_str(), kReachable) == 0) return dir;  // beyond the umask
    if (errno != ENOENT) throw std::runtime_error(fmt::format("making {}: {}", dir, std::strerror(errno)));
  }
  throw std::runtime_error(fmt::format("making {}: its root kept disappearing", dir));
}

}  // namespace

// A binary shipped to another machine (bench/gpu_bundle.sh) finds no build tree there: its big trees
// go beside the temporary root instead.
std::string TestScratchRoot() {
  std::error_code ec;
  return std::filesystem::is_directory(TEMPER_BINARY_DIR, ec) ? std::string(TEMPER_BINARY_DIR) + "/test-scratch"
                                                              : std::string(TEMPER_TEST_TMP_ROOT) + "-scratch";
}
std::string TestTempRoot() { return TEMPER_TEST_TMP_ROOT; }

const std::string& TestScratchDir() {
  static const std::string dir = MakeProcessDir(TestScratchRoot());
  return dir;
}

const std::string& TestTempDir() {
  static const std::string dir = MakeProcessDir(TestTempRoot());
  return dir;
}

ScratchPath::ScratchPath(const std::string& name) : path_(TestScratchDir() + "/" + name) {
  (void)RemoveWithMounts(path_);
}

ScratchPath::~ScratchPath() { (void)RemoveWithMounts(path_); }

Leftovers EndProcessDirs() {
  Leftovers left;
  for (const auto& [dir, root] :
       {std::pair{TestScratchDir(), TestScratchRoot()}, std::pair{TestTempDir(), TestTempRoot()}}) {
    Leftovers in = FindLeftovers(dir);
    left.mounts.insert(left.mounts.end(), in.mounts.begin(), in.mounts.end());
    left.entries.insert(left.entries.end(), in.entries.begin(), in.entries.end());
    if (Status removed = RemoveWithMounts(dir); !removed.ok()) left.entries.push_back(removed.ToString());
    ::rmdir(root.c_str());  // the last process to end takes the root with it; others find it in use
  }
  return left;
}

}  // namespace temper::testing
