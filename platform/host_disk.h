// HostDisk: how much of a host file system temper may still promise away, so that what temper
// writes on the host (a rootfs target's disk image, the package cache) never fills the file system
// that temperd's state store lives on.
//
// A target's disk image is sparse: it takes host blocks only as the sandbox writes. Its size is a
// promise of host space, made when the image is created or grown, and kept only if the host still
// has that much room when the sandbox comes to use it. So the promise is checked against real free
// space (statvfs) at the moment it is made, less a reserve that stays free for the state store, its
// journal and the evaluator's results: max(1 GiB, 5% of the file system), the larger so that a big
// host keeps the room root's own reserve would (ext4's default is 5%), the 1 GiB floor so that a
// small one still has room for a batch's records. A promise that does not fit is refused with an
// error naming the file system, the sizes and the reserve.
// Why not preallocate (fallocate) the image instead: it would make the promise hard, but it takes
// the whole cap off the host at once for every target (8 GiB each by default), used or not; the
// check plus the promised-space accounting of the images one process holds open (overlay_snapshots)
// keep the same guarantee against temper's own writes while costing only what targets use.
// Thread safety: functions of the file system's state; no shared state here.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace temper {

// The reserve floor and share (see the header comment).
inline constexpr std::uint64_t kHostReserveFloorBytes = std::uint64_t{1} << 30;
inline constexpr std::uint64_t kHostReservePercent = 5;

struct HostDiskSpace {
  std::string path;           // the path asked about (on the file system measured)
  std::uint64_t free = 0;     // bytes an unprivileged writer may still take (f_bavail)
  std::uint64_t total = 0;    // the file system's size
  std::uint64_t reserve = 0;  // what must stay free (HostReserveBytes of total)
  dev_t device = 0;           // identifies the file system (st_dev of `path`)

  // What may still be promised: free less the reserve, 0 when free is already under it.
  std::uint64_t available() const { return free > reserve ? free - reserve : 0; }
  // "the file system holding /var/lib/temper (12 GiB free of 40 GiB, 2 GiB kept free for the state store)".
  std::string Describe() const;
};

// max(1 GiB, 5% of `total`).
std::uint64_t HostReserveBytes(std::uint64_t total);

// The space of the file system holding `path` (which must exist). `reserve_bytes` overrides the
// default reserve when not 0. IOError naming the path when statvfs or stat fails.
Result<HostDiskSpace> HostDiskSpaceOf(const std::string& path, std::uint64_t reserve_bytes = 0);

// OK when `bytes` more fit in `space` beside `promised` bytes already promised to others;
// ResourceExhausted "<what> needs N more on <space.Describe()>[, M of it promised to ...]" otherwise.
Status CheckRoomFor(const HostDiskSpace& space, std::string_view what, std::uint64_t bytes, std::uint64_t promised = 0,
                    std::string_view promised_to = "");

// Bytes of host disk a file actually takes (st_blocks), 0 when it does not exist.
std::uint64_t AllocatedBytes(const std::string& path);

}  // namespace temper
