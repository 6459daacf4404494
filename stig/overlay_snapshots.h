// OverlaySnapshots: snapshot and revert of a root file system in milliseconds, with overlayfs.
//
// The loop snapshots the target before every attempt and reverts after every failed one, so both
// must be cheap and exact. The tree is an overlayfs mount: the base root (read-only, shareable by
// many targets) at the bottom, one frozen layer per snapshot above it, and a writable upper layer
// on top. Snapshot freezes the upper layer (a rename) and mounts a fresh one; Revert(n) drops the
// upper layer and every layer above snapshot n. Neither copies file data: both cost a remount,
// and the dropped layers are renamed into trash/ and deleted by a background thread afterwards
// (deleting freshly written files can take seconds on a busy disk; the caller should not wait).
// The kernel's overlayfs keeps owners, modes, xattrs, links and deletions (whiteouts) exact.
//
// Layout of `dir`: layers/1..N (frozen), upper/, work/, merged/ (the mount point), trash/.
// Requires CAP_SYS_ADMIN (root) to mount. Overlayfs stacks at most 500 lower layers; Snapshot
// returns ResourceExhausted beyond kMaxLayers.
// Thread safety: not thread-safe; one owner drives a target, and an exclusive lock on `dir`/lock
// (held until Close) makes a second Open of the same directory fail instead of pulling the mount
// from under the first owner. The mount stays in the caller's mount namespace until Close().
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"

namespace temper::stig {

// The directories of a mounted stack as overlayfs resolves them: `upper` over `lowers` (topmost
// first: the newest frozen layer, ..., layer 1, the base), seen merged at `merged`.
struct OverlayLayers {
  std::string upper;
  std::vector<std::string> lowers;
  std::string merged;
};

class OverlaySnapshots {
 public:
  static constexpr std::uint32_t kMaxLayers = 400;

  // Opens (creating if needed) the stack in `dir` over `base`, and mounts it. Layers left by an
  // earlier owner are kept: depth() counts them. Errors: NotFound when `base` is not a directory;
  // IOError (with mount's message) when the mount fails.
  static Result<std::unique_ptr<OverlaySnapshots>> Open(const std::string& dir, const std::string& base);
  ~OverlaySnapshots();
  OverlaySnapshots(const OverlaySnapshots&) = delete;
  OverlaySnapshots& operator=(const OverlaySnapshots&) = delete;

  // The merged tree, where commands, reads, writes and evaluations happen.
  const std::string& merged() const { return merged_; }
  // Snapshots taken (frozen layers); Snapshot() returns the new depth as the snapshot id.
  std::uint32_t depth() const { return depth_; }

  // Freezes the current state as snapshot depth()+1. Nothing running may hold files open in
  // merged() (FailedPrecondition "busy" otherwise).
  Result<std::uint32_t> Snapshot();
  // Restores the state at snapshot `id` (0 = the base), dropping later snapshots and all changes
  // since. OutOfRange when id > depth().
  Status Revert(std::uint32_t id);
  // Paths (relative to "/") changed, added or deleted since the last snapshot, sorted.
  Result<std::vector<std::string>> ChangedPaths() const;
  // The stack as mounted now, for reading what changed since the last snapshot (overlay_changes.h).
  OverlayLayers layers() const;
  // Unmounts and waits for the trash deletion under way. Idempotent; also run by the destructor.
  Status Close();

 private:
  OverlaySnapshots(std::string dir, std::string base, std::uint32_t depth);
  Status Mount();
  Status Unmount();
  // Moves `path` into trash/ (a rename, so O(1)).
  Status Discard(const std::string& path);
  // Empties trash/ on the reaper thread unless a reaper is already running. Trash that arrives as
  // a reaper finishes waits for the next call (or the next Open).
  void StartReaper();

  std::string dir_;
  std::string base_;
  std::string merged_;
  std::uint32_t depth_;
  bool mounted_ = false;
  int lock_fd_ = -1;
  std::uint64_t trash_seq_ = 0;
  std::atomic<bool> reaping_{false};
  std::thread reaper_;
};

}  // namespace temper::stig
