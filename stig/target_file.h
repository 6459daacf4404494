// TargetFile: how the host opens a file that lies in a target's tree, so that nothing the target
// holds can block a host thread, be opened as a device, or lead the host outside the tree.
//
// A target's tree is written by whatever ran in its sandbox, so every name in it is hostile: a FIFO
// blocks open(2) until a writer comes (forever: the sandbox that made it is gone), a device node
// does what its driver does on open, and a symlink may point anywhere on the host. So each open here
// first takes an O_PATH handle (which never blocks and opens nothing), checks the file type on that
// handle, and only then opens that same inode for reading or writing through /proc/self/fd. Names
// resolve with openat2: in a target's merged tree with RESOLVE_IN_ROOT (a link resolves as it would
// inside the target, never to a host file), in a layer directory with RESOLVE_NO_SYMLINKS (layers
// are read entry by entry; a link there is content, never followed).
//
// Errors name the path as the target sees it and what it is ("/etc/x is a FIFO in the target,
// not a regular file"). Requires /proc mounted in the caller's namespace.
// Thread safety: free functions, reentrant.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "common/status.h"
#include "platform/unique_fd.h"

namespace temper::stig {

// "a FIFO", "a socket", "a character device", "a block device", "a directory", "a symlink",
// "a regular file": what `mode` (st_mode) makes a file, for messages.
std::string_view FileTypeName(mode_t mode);

// Opens the regular file at `path` (absolute, as the target sees it) in the tree at `root` for
// reading; a symlink on the way resolves inside the tree. The descriptor is O_NONBLOCK.
// Errors: InvalidArgument for a relative path, or when the file is not a regular file (named);
// NotFound when it does not exist; IOError otherwise.
Result<UniqueFd> OpenTargetFileForRead(const std::string& root, const std::string& path);

// Opens the regular file at `path` in the tree at `root` for writing, truncated, or creates it
// with `mode` (less the umask) when nothing is there. A final symlink to a regular file in the tree
// is followed; one that points to nothing is refused rather than followed to create its target.
// Errors: InvalidArgument for a relative path, a file that is not a regular file, or a dangling
// final symlink (each named); NotFound when the parent directory does not exist; IOError otherwise
// (ENOSPC among them: the caller knows what full means for its tree).
Result<UniqueFd> OpenTargetFileForWrite(const std::string& root, const std::string& path, mode_t mode);

// Opens the regular file at `path` (absolute in the tree) of a layer directory or a merged tree at
// `tree`, following no symlink at any step: for host code that reads what a layer holds (change
// sets, diffs) or rewrites one of its files (`access` O_WRONLY | O_TRUNC: a merged commit). Errors
// as OpenTargetFileForRead; a symlink on the way is IOError.
Result<UniqueFd> OpenLayerFile(const std::string& tree, const std::string& path, int access = O_RDONLY);

// The type and metadata of what `path` names in the tree at `root`, links on the way resolved
// inside the tree, the last one not followed (lstat as the target sees it). NotFound when missing.
Result<struct stat> StatInTarget(const std::string& root, const std::string& path);

// Reads up to `max_bytes` from `fd` (from its current offset). IOError naming `what` on a read error.
Result<std::string> ReadUpTo(int fd, std::size_t max_bytes, std::string_view what);

}  // namespace temper::stig
