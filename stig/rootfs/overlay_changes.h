// OverlayChanges: the ChangeSet of an overlayfs stack's upper layer — what changed since the last
// snapshot — read from the layers themselves.
//
// Which paths changed, their states before and after, the packages and the services are the walk's
// (overlay_walk.h); this adds the diffs of text files, with their password hashes redacted.
//
// Diffs run /usr/bin/diff as a child process (platform/process.h).
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
