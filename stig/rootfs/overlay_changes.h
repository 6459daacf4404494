// OverlayChanges: the ChangeSet of an overlayfs stack's upper layer — what changed since the last
// snapshot — read from the layers themselves.
//
// The upper layer holds exactly the paths written since the last snapshot: copied-up files and
// directories, new ones, whiteouts (character devices 0:0) for deletions and opaque directories
// (xattr trusted.overlay.opaque=y) that hide everything below them. Each such path's state before
// is found the way overlayfs finds it in the lower layers (topmost layer wins; a whiteout ends the
// search as "deleted"; only directories merge with the layers below, down to an opaque one), and
// its state after is read from the merged mount. Paths copied up without a change that shows
// (type, owner, group, mode, size, content, symlink target; times are not compared) are left out,
// so opening a file for writing and writing the same bytes is no change.
//
// Packages come from comparing /var/lib/dpkg/status below and now (dpkg_status.h), services from
// the systemd enablement symlinks under /etc/systemd/system (a unit linked from a *.wants/,
// *.requires/ or *.upholds/ directory is enabled; a unit linked to /dev/null is masked).
//
// Assumes the stack is mounted without redirect_dir (overlay_snapshots.h does so), so a renamed
// directory was copied up whole. Diffs run /usr/bin/diff as a child process (platform/process.h).
// Thread safety: reads only; the caller must not change the tree while it runs.
#pragma once

#include "common/status.h"
#include "stig/change_set.h"
#include "stig/rootfs/overlay_snapshots.h"

namespace temper::stig {

// The changes in `layers.upper` relative to `layers.lowers`. Errors: IOError naming the path when
// a layer cannot be read, or when diff fails to run.
Result<ChangeSet> OverlayChanges(const OverlayLayers& layers);

}  // namespace temper::stig
