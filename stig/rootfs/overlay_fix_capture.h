// OverlayFixBundle: the FixBundle (fix_bundle.h) of an overlayfs stack's upper layer — a fix kept
// on a rootfs target, whole, for replaying on another machine of the same image.
//
// The paths are the walk's (overlay_walk.h), the same ones the attempt's ChangeSet lists; each
// changed path is carried with its exact state before (from the lower layers) and after (from the
// merged tree), a regular file's bytes read through target_file.h's layer opens (no link followed,
// a FIFO or device refused by name). Packages are dpkg's status compared below and now. A file a
// package the fix installed or upgraded lists (/var/lib/dpkg/info/<pkg>.list, or <pkg>:<arch>.list)
// is left to the package's install, unless its content differs from the md5 dpkg recorded for it
// (info/<pkg>.md5sums; the status file's Conffiles field for a conffile): then it is carried with
// the package's name and md5 and no before. A package's file that is not a regular file comes with
// the package. dpkg's and apt's own state (IsPackageManagerState) is never carried.
// Thread safety: reads only; the caller must not change the tree while it runs.
#pragma once

#include "common/status.h"
#include "stig/fix_bundle.h"
#include "stig/rootfs/overlay_snapshots.h"

namespace temper::stig {

// The fix in `layers.upper` over `layers.lowers`. Errors: FailedPrecondition naming the path and the
// limit when the fix breaks a bundle's limits (a file over kMaxBundleFileBytes, more than
// kMaxBundleBytes or kMaxBundleFiles in all), or naming the path when it cannot be replayed (a FIFO,
// socket or device, a package's file the fix deleted after installing it); IOError naming the path
// when a layer cannot be read.
Result<FixBundle> OverlayFixBundle(const OverlayLayers& layers);

}  // namespace temper::stig
