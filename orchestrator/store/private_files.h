// PrivateFiles: temperd's state is root's alone, however temperd was started.
//
// The state store holds every attempt's commands and diffs, the journal the same events, the
// results directory OpenSCAP's reports of each target: all of it tells a local user how a host is
// configured and what was changed. Under systemd the unit's StateDirectoryMode keeps others out;
// started by hand (or by an older temperd) the state directory was 0755 and its files 0644. So
// temperd makes its state directory 0700 and its files 0600 where it creates them, and at start
// takes away the group and other bits of what an earlier start left (MakeTreePrivate).
//
// Why explicit modes and no `umask 077` in temperd: the umask is inherited by every command temperd
// starts in a target's sandbox and applies to the directories it makes in targets' layers, so it
// would change the modes of what temper writes on the hosts it hardens (a model's
// `echo ... > /etc/issue` would leave a 0600 file there).
// Thread safety: functions of the file system.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

#include "common/status.h"

namespace temper {

inline constexpr mode_t kPrivateDirMode = 0700;
inline constexpr mode_t kPrivateFileMode = 0600;

// Takes the group and other bits off `path` (a directory or a regular file; a link is not
// followed, other kinds are left alone). Returns whether the mode changed; false when `path` does
// not exist. IOError naming the path when it cannot be read or changed.
Result<bool> MakePrivate(const std::string& path);

// MakePrivate on `dir` and everything under it, on its file system only (a mount under it, such as
// a target's overlay, is not entered) and without following links. Only for trees temperd alone
// writes (its journal, its results): a target's root under it would lose its modes. Appends each
// path it changed to `changed`. IOError naming the first path that cannot be read or changed.
Status MakeTreePrivate(const std::string& dir, std::vector<std::string>& changed);

}  // namespace temper
