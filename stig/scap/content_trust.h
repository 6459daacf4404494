// ContentTrust: which datastream files temperd accepts when a client names one.
//
// A datastream decides what temperd (root) evaluates, so it must come from where the operator put
// trusted content, never from where a client wrote it: `temper submit -d /home/me/ds.xml` would
// otherwise load a file any member of the temper group controls. A name resolves like this:
//   - a bare file name ("ssg-ubuntu2004-ds.xml") is looked up in the content directories in order;
//   - an absolute path is taken as given; anything else (a relative path) is refused;
//   - the path, as written, must lie inside a content directory before anything on the file system
//     is looked at for it (temperd is root: existence or symlink targets elsewhere must not leak
//     to a client through the error);
//   - the result, with every symlink resolved (realpath), must be a regular file inside one of the
//     content directories (also resolved), and no file or directory on its path may be writable by
//     anyone but root: not owned by another user, not group- or world-writable (whatever the
//     group: its members need not be root), no POSIX ACL entry granting write to a user or group
//     other than root; a root-owned sticky directory (/tmp) counts as safe for an entry root
//     owns, since only root may then rename or remove it.
// The daemon resolves at submit and again whenever it loads the content (the file may have changed
// between the two). What a datastream may ask of OpenSCAP is the other half (content_policy.h).
// Thread safety: reentrant; reads the file system only.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace temper::stig {

// The resolved path (symlinks followed) of the datastream `name`, checked as above against
// `content_dirs` (absolute paths; ones that do not exist are skipped). Errors, each naming the
// path and the configured directories: InvalidArgument for an empty name, a relative path, or a
// file that is not a regular file; NotFound for a name in no directory (with close file names) or
// a path inside a directory that does not exist; PermissionDenied for a path outside every content
// directory, and for a file or directory on its path that someone other than root can write.
Result<std::string> ResolveTrustedDatastream(std::string_view name, const std::vector<std::string>& content_dirs);

}  // namespace temper::stig
