// SmallTmpfs: a tmpfs of a given size mounted on a scratch directory, for cases that need a file
// system that fills up (a host disk smaller than a target's cap, a full state directory) without
// filling the machine's disk. Unmounted (lazily, so a file a daemon still holds open cannot keep it
// mounted) when it dies. Mounting needs root: `mounted()` is false, with the reason in `error()`,
// where it cannot, and the case skips.
#pragma once

#include <sys/mount.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>

#include <fmt/format.h>

namespace temper::testing {

class SmallTmpfs {
 public:
  SmallTmpfs(std::string dir, std::uint64_t bytes) : dir_(std::move(dir)) {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    const std::string options = fmt::format("size={},mode=0755", bytes);
    if (::mount("tmpfs", dir_.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, options.c_str()) == 0) {
      mounted_ = true;
    } else {
      error_ = fmt::format("mounting a tmpfs of {} bytes on {}: {}", bytes, dir_, std::strerror(errno));
    }
  }
  ~SmallTmpfs() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  SmallTmpfs(const SmallTmpfs&) = delete;
  SmallTmpfs& operator=(const SmallTmpfs&) = delete;

  const std::string& path() const { return dir_; }
  bool mounted() const { return mounted_; }
  const std::string& error() const { return error_; }

 private:
  std::string dir_;
  bool mounted_ = false;
  std::string error_;
};

}  // namespace temper::testing
