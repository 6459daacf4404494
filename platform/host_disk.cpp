#include "platform/host_disk.h"

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>

#include <fmt/format.h>

#include "platform/sandbox_caps.h"

namespace temper {

std::uint64_t HostReserveBytes(std::uint64_t total) {
  return std::max(kHostReserveFloorBytes, total / 100 * kHostReservePercent);
}

std::string HostDiskSpace::Describe() const {
  return fmt::format("the file system holding {} ({} free of {}, {} kept free for temperd's state store)", path,
                     FormatBytes(free), FormatBytes(total), FormatBytes(reserve));
}

Result<HostDiskSpace> HostDiskSpaceOf(const std::string& path, std::uint64_t reserve_bytes) {
  struct statvfs v {};
  if (::statvfs(path.c_str(), &v) != 0) return Status::FromErrno(errno, "measuring the free space at " + path);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Status::FromErrno(errno, "stat " + path);
  HostDiskSpace space;
  space.path = path;
  space.free = static_cast<std::uint64_t>(v.f_bavail) * v.f_frsize;
  space.total = static_cast<std::uint64_t>(v.f_blocks) * v.f_frsize;
  space.reserve = reserve_bytes != 0 ? reserve_bytes : HostReserveBytes(space.total);
  space.device = st.st_dev;
  return space;
}

Status CheckRoomFor(const HostDiskSpace& space, std::string_view what, std::uint64_t bytes, std::uint64_t promised,
                    std::string_view promised_to) {
  const std::uint64_t available = space.available();
  if (promised <= available && bytes <= available - promised) return Status::OK();
  std::string others;
  if (promised > 0) others = fmt::format(", {} of it already promised to {}", FormatBytes(promised), promised_to);
  return Status::ResourceExhausted(fmt::format("{} needs {} more on {}{}: free space there or ask for less", what,
                                               FormatBytes(bytes), space.Describe(), others));
}

std::uint64_t AllocatedBytes(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<std::uint64_t>(st.st_blocks) * 512;
}

}  // namespace temper
