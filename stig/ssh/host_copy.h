// HostCopy: an SSH host's root file system copied into a local directory, for a twin (a rootfs
// target that stands in for the host, so batches experiment on the copy, never on the host).
//
// The host runs GNU tar as root (sudo -n when the login is not root) over its "/" with
// --one-file-system: what lies on other file systems (/proc, /sys, /dev, /run, network and virtual
// file systems, separate disks) is left out, and every mount point below "/" is excluded by name
// too, so a bind mount of the root's own file system is not copied twice; so are temper's host_dir
// (the undo journal) and the configured exclude list. The archive (pax, with owners as numbers,
// modes, xattrs, ACLs and so file capabilities, sparse files as holes) streams over the SSH
// channel into this process, which counts its bytes against max_bytes, drops device nodes and
// FIFOs (tar_stream_filter.h) and hands it to tar --extract.
//
// The archive is hostile input: the host's tar may be anything. Extraction therefore runs in a
// bubblewrap sandbox (as root of a user namespace mapping ids 1:1, without CAP_MKNOD, under the
// rootfs sandbox's seccomp filter, with no network) whose only writable path is the destination,
// bound at /copy over an empty tmpfs root with the host's /usr read-only: a member "../x", an
// absolute name or a symlink planted to point outside resolves inside that sandbox, never to a file
// of this machine. Mount points left out are recreated empty there too (/proc, /sys, /dev, /run,
// /tmp ...), so the copy boots as a rootfs target.
//
// Failure leaves nothing: the destination is removed on every error. Over max_bytes (the host's
// `du -x` estimate beforehand, or the bytes actually streamed) both ends are killed and the error
// is ResourceExhausted naming the limit and the host.
// Thread safety: one call at a time per connection (it drives `ssh` for its whole duration).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/log.h"
#include "common/status.h"
#include "stig/ssh/ssh_connection.h"

namespace temper::stig {

struct HostCopyOptions {
  // The local directory the host's "/" becomes: absolute, not existing yet, its parent existing.
  std::string destination;
  // The most archive bytes accepted from the host.
  std::uint64_t max_bytes = std::uint64_t{8} << 30;
  // Absolute paths on the host left out (with everything below them), besides the mount points.
  std::vector<std::string> exclude;
  // temper's directory on the host (ssh_target.h's host_dir): never copied.
  std::string host_dir = "/var/lib/temper";
  // The whole copy, host and local side.
  std::chrono::seconds timeout{3600};
  // Asked while the archive streams: true ends the copy (Aborted) and removes what was copied.
  std::function<bool()> stop_requested;
};

struct HostCopyRecord {
  std::string host;   // user@name:port
  std::string login;  // the user logged in as
  std::chrono::system_clock::time_point copied_at;
  std::uint64_t bytes = 0;            // archive bytes streamed from the host
  std::uint64_t files = 0;            // members copied: files, directories, links
  std::vector<std::string> excluded;  // paths on the host left out, sorted
  // Device nodes and FIFOs in the archive, not created (mknod is refused in the sandbox).
  std::uint64_t skipped_special_files = 0;
  double seconds = 0;
  // From the copy's /var/lib/dpkg/status (name -> version); empty on a host without dpkg.
  std::map<std::string, std::string> packages;
  // The copy's /etc/os-release (else /usr/lib/os-release) as text; empty when it has neither.
  std::string os_release;
};

// Copies the host behind `ssh` into options.destination. Errors (the destination removed):
// InvalidArgument for bad options (named); AlreadyExists when the destination exists;
// ResourceExhausted over max_bytes; FailedPrecondition when the host has no GNU tar;
// Internal when the host's tar or the extraction fails (their messages); InvalidArgument when the
// stream is not a well-formed archive; Aborted when stopped; DeadlineExceeded past the timeout;
// the connection's errors.
Result<HostCopyRecord> CopyHostRoot(SshConnection& ssh, const HostCopyOptions& options, const Logger& log);

// The mount points below "/" in a /proc/self/mounts text (octal escapes decoded), sorted. Pure.
std::vector<std::string> MountPointsBelowRoot(std::string_view proc_mounts);

}  // namespace temper::stig
