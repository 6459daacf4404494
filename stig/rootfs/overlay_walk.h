// OverlayWalk: the paths an overlayfs stack's upper layer changed, each with its state before (as
// the lower layers hold it) and after (as the merged tree shows it), read from the layers
// themselves. What the ChangeSet of an attempt (overlay_changes.h) and the replayable bundle of a
// fix (overlay_fix_capture.h) are both made from, so both see the same changes.
//
// The upper layer holds exactly the paths written since the last snapshot: copied-up files and
// directories, new ones, whiteouts (character devices 0:0) for deletions and opaque directories
// (xattr trusted.overlay.opaque=y) that hide everything below them. Each such path's state before
// is found the way overlayfs finds it in the lower layers (topmost layer wins; a whiteout ends the
// search as "deleted"; only directories merge with the layers below, down to an opaque one), and
// its state after is read from the merged mount. Paths copied up without a change that shows
// (type, owner, group, mode, size, content, symlink target; times are not compared) are left out,
// so opening a file for writing and writing the same bytes is no change. A deleted directory is
// listed with everything the lower layers held below it.
//
// Packages come from comparing /var/lib/dpkg/status below and now (dpkg_status.h), services from
// the systemd enablement symlinks under /etc/systemd/system (a unit linked from a *.wants/,
// *.requires/ or *.upholds/ directory is enabled; a unit linked to /dev/null is masked).
//
// Assumes the stack is mounted without redirect_dir (overlay_snapshots.h does so), so a renamed
// directory was copied up whole. Files are read through target_file.h's layer opens: no link is
// followed, and a FIFO or device is refused by name before it is opened.
// Thread safety: reads only; the caller must not change the tree while it runs.
#pragma once

#include <sys/stat.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "stig/change_set.h"
#include "stig/rootfs/overlay_snapshots.h"

namespace temper::stig {

// A path as one tree holds it: the tree (a layer directory or the merged mount), the path in it,
// where that is on the host, and its lstat.
struct FoundPath {
  std::string tree;
  std::string path;
  std::string host_path;
  struct stat st;
};

// One path the upper layer changed.
struct OverlayPathChange {
  std::string path;
  std::optional<FoundPath> before;  // nullopt: nothing there below the upper layer
  std::optional<FoundPath> after;   // nullopt: deleted
  std::optional<FileState> before_state, after_state;
  // Whether the regular-file content, the type or the link changed (always for an added or
  // deleted path); false for a change of owner, group or mode alone.
  bool content_changed = true;
};

// The path's state (its link read for a symlink). IOError naming the host path.
Result<FileState> StateOf(const FoundPath& found);
// Up to `max` bytes of the regular file `found` names, opened without following a link.
Result<std::string> ReadFound(const FoundPath& found, std::size_t max);

class OverlayWalk {
 public:
  // Errors: InvalidArgument when `layers` has no lower layer.
  static Result<std::unique_ptr<OverlayWalk>> Open(const OverlayLayers& layers);
  ~OverlayWalk();
  OverlayWalk(const OverlayWalk&) = delete;
  OverlayWalk& operator=(const OverlayWalk&) = delete;

  // Every changed path, sorted by path. Errors: IOError naming the path when a layer cannot be read.
  Result<std::vector<OverlayPathChange>> ChangedPaths();
  // The packages installed, removed or upgraded (empty unless `changes` holds dpkg's status file).
  Result<PackageChanges> Packages(const std::vector<OverlayPathChange>& changes);
  // The services enabled, disabled, masked or unmasked (empty unless `changes` holds a path under
  // /etc/systemd/system).
  Result<ServiceChanges> Services(const std::vector<OverlayPathChange>& changes);
  // `path` as the merged tree holds it now; nullopt when missing.
  Result<std::optional<FoundPath>> FindAfter(const std::string& path);
  // The sorted entry names of directory `path` in the merged tree; empty when it is not a directory.
  Result<std::vector<std::string>> ListAfter(const std::string& path);

 private:
  class Impl;
  explicit OverlayWalk(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace temper::stig
