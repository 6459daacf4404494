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
// Snapshot ids are stable: each snapshot's layer is layers/<id>, ids only ever grow (the highest
// one handed out is kept in last_layer, so an id is never reused, even after a revert), and the
// stack is the existing layers in id order. So DropLayer can take one snapshot's changes out of
// the middle of the stack without renumbering the ones above: ids that callers stored (a batch's
// start, a fix's layer) keep naming the same changes, and dropping is one rename, so a crash
// leaves the layer either in the stack or in the trash, never half-moved.
//
// Layout of `dir` (mode 0700, root's: the layers hold whatever the sandbox made, setuid-root
// files included, so no other user may reach them): lock; layers.img, a file system image of the
// target's disk cap mounted at disk/ (nosuid, nodev), which holds layers/<id> (frozen), last_layer,
// upper/, work/ and trash/, so that everything the target writes, frozen snapshots included, is
// bounded by the image's size and a renamed layer never leaves its file system; merged/ (the
// overlay, mounted nosuid,nodev); scratch/ while a scratch view is mounted, and trash/ for the
// scratch views' leftovers (both on the host's file system, so an evaluation still works when the
// target's disk is full). A directory in the layout before disk images (layers/ and upper/ right
// in `dir`) is moved into a new image at Open. The image's root reserve belongs to no uid the
// sandbox maps, so a daemon with CAP_SYS_RESOURCE can still snapshot and revert a target the
// sandbox filled; without it (some containers) the trash is reaped first when the disk is full,
// and a snapshot that still finds no room is ResourceExhausted, naming the cap.
// Why an image and not project quotas: quotas need a host file system made and mounted for them
// (ext4's quota feature with prjquota, XFS with pquota), which Debian's default install is not;
// an image works on any file system, and its size is the cap whatever the host's quota setup.
// Requires CAP_SYS_ADMIN (root) to mount, mkfs.ext4, e2fsck/resize2fs to grow, and loop devices.
// Overlayfs stacks at most 500 lower layers; Snapshot returns ResourceExhausted beyond kMaxLayers.
// Forks: Fork() mounts a second writable tree over the frozen layers as they are (its upper layer
// in disk/forks/<n>, its tree at forks/<n>/merged), so attempts can run beside each other, each in
// its own tree; CommitFork makes a fork's upper layer a snapshot on top of the stack with one
// rename, unless a snapshot taken since the fork changed a path the fork changed too. Forks are
// not kept across owners: Open discards what a dead owner's forks left.
// Thread safety: not thread-safe; one owner drives a target, and an exclusive lock on `dir`/lock
// (held until Close) makes a second Open of the same directory fail instead of pulling the mount
// from under the first owner. The mounts stay in the caller's mount namespace until Close(). Forks
// are made, committed and destroyed by the owner's thread; other threads may use a fork's tree
// (merged(), WithScratchView, ChangedPaths) meanwhile, one thread per fork.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/status.h"
#include "platform/sandbox_caps.h"

namespace temper::stig {

// What a later snapshot changed of the paths an earlier one changed (see OverlapsAbove).
struct LayerOverlap {
  std::uint32_t layer = 0;         // the later snapshot
  std::vector<std::string> paths;  // absolute paths in the target, sorted
};

// The directories of a mounted stack as overlayfs resolves them: `upper` over `lowers` (topmost
// first: the newest frozen layer, ..., the oldest, the base), seen merged at `merged`.
struct OverlayLayers {
  std::string upper;
  std::vector<std::string> lowers;
  std::string merged;
};

class OverlayFork;

class OverlaySnapshots {
 public:
  static constexpr std::uint32_t kMaxLayers = 400;

  // Opens (creating if needed) the stack in `dir` over `base`, and mounts it, with a disk image of
  // `disk_bytes` (an existing smaller image grows to it; a larger one keeps its size). Layers left
  // by an earlier owner are kept. Errors: NotFound when `base` is not a directory; IOError (with
  // mkfs's or mount's message) when the image cannot be made or mounted; ResourceExhausted when
  // the layers of an older layout do not fit the image, or when the image to make or grow does not
  // fit the host's free space less the state store's reserve, beside the other images this process
  // holds open (host_disk.h; the message names the sizes and the file system); DataLoss when
  // last_layer is unreadable.
  static Result<std::unique_ptr<OverlaySnapshots>> Open(const std::string& dir, const std::string& base,
                                                        std::uint64_t disk_bytes = SandboxCaps{}.disk_bytes);
  ~OverlaySnapshots();
  OverlaySnapshots(const OverlaySnapshots&) = delete;
  OverlaySnapshots& operator=(const OverlaySnapshots&) = delete;

  // The merged tree, where commands, reads, writes and evaluations happen.
  const std::string& merged() const { return merged_; }
  // The size of the disk image: what all the target's layers together may hold.
  std::uint64_t disk_bytes() const { return disk_bytes_; }
  // Bytes the sandbox may still write (the image's root reserve is not the sandbox's).
  std::uint64_t FreeBytes() const;
  // True when the sandbox cannot write even a few more blocks or files.
  bool DiskFull() const;
  // Frozen layers in the stack.
  std::uint32_t depth() const { return static_cast<std::uint32_t>(layers_.size()); }
  // The ids of the frozen layers, bottom first (ascending).
  const std::vector<std::uint32_t>& layer_ids() const { return layers_; }
  // The id of the top frozen layer; 0 (the base) when there is none.
  std::uint32_t top() const { return layers_.empty() ? 0 : layers_.back(); }

  // Freezes the current state as a new snapshot and returns its id, greater than every id handed
  // out before. Nothing running may hold files open in merged() (FailedPrecondition "busy").
  Result<std::uint32_t> Snapshot();
  // Restores the state at snapshot `id` (0 = the base): drops every layer above `id` and all
  // changes since the last snapshot. An id that DropLayer removed still works: the state is the
  // layers below it. OutOfRange when `id` was never handed out.
  Status Revert(std::uint32_t id);
  // Takes snapshot `id`'s changes out of the stack, keeping the layers above it (with their ids),
  // and drops the changes since the last snapshot. What a layer above wrote over the same paths
  // stays: callers check OverlapsAbove first. NotFound when `id` is not in the stack.
  Status DropLayer(std::uint32_t id);
  // For each layer above `id`, the paths that `id` changed and that layer also holds (it rewrote,
  // deleted or copied them up, or created something inside a directory `id` created): dropping `id`
  // alone would leave those as the later layer has them. Layers with no such path are left out.
  // NotFound when `id` is not in the stack.
  Result<std::vector<LayerOverlap>> OverlapsAbove(std::uint32_t id) const;
  // Absolute paths (in the target) that snapshot `id` changed over the layers below it, sorted:
  // files, links and deletions it holds, and directories it created or whose owner, mode or
  // xattrs it changed. NotFound when `id` is not in the stack.
  Result<std::vector<std::string>> LayerChanges(std::uint32_t id) const;
  // Paths (absolute in the target) changed, added or deleted since the last snapshot, sorted.
  Result<std::vector<std::string>> ChangedPaths() const;
  // Runs `fn` with a throwaway writable view of the current state mounted at the path it is
  // given: reads see exactly merged(), writes land in a scratch layer that goes to the trash
  // afterwards. For programs that must leave no trace although they write (OpenSCAP's package
  // probe rebuilds apt's package cache in the tree it reads when it finds the cache stale).
  // Nothing may change merged() while the view is mounted. Errors: the mount's, else fn's.
  Status WithScratchView(const std::function<Status(const std::string& root)>& fn);
  // The stack as mounted now, for reading what changed since the last snapshot (overlay_changes.h).
  OverlayLayers layers() const;

  // A fork of the latest snapshot: a writable tree of its own over the frozen layers as they are
  // now (changes since the last snapshot are not in it). Revert and DropLayer are refused
  // (FailedPrecondition) when they would remove a layer an open fork reads; layers added since the
  // forks were made may go. The fork must be destroyed before this stack.
  Result<std::unique_ptr<OverlayFork>> Fork();
  // Freezes what `fork` changed as a new snapshot on top of the stack, above the snapshots taken
  // since the fork was made, and returns its id. A regular file that one of those snapshots
  // changed too is merged line by line (line_merge.h: both sides' changes, the fork's after the
  // stack's where both added lines at one place) into the fork's layer first. Aborted, naming the
  // paths, when a path both changed cannot be merged that way (a directory, a deletion, a binary
  // file, the same lines changed two ways): the fork was judged on a tree it would not land on.
  // The caller verifies a merged commit again on the stack. FailedPrecondition when merged() has
  // changes since the last snapshot (they would be lost under the new layer); InvalidArgument for
  // a fork of another stack or one already spent. The fork is spent afterwards, committed or not.
  Result<std::uint32_t> CommitFork(OverlayFork& fork);
  // Forks made and not yet destroyed.
  std::size_t open_forks() const { return forks_.size(); }
  // Unmounts and waits for the trash deletion under way. Idempotent; also run by the destructor.
  Status Close();

  // Fault seam for crash tests: called before each step that changes `dir` ("record-id",
  // "unmount", "freeze-upper", "discard-layer", "reset-upper", "mount", "commit-fork"). An error it returns ends
  // the operation there with that error and no clean-up, as a crash at that point would.
  using StepHook = std::function<Status(std::string_view step)>;
  void set_step_hook(StepHook hook) { step_hook_ = std::move(hook); }

 private:
  friend class OverlayFork;
  // CommitFork's merge of the paths a fork and the snapshots since it both changed: each
  // written merged into the fork's layer; Aborted naming the paths that cannot be merged.
  Status MergeIntoFork(OverlayFork& fork, const std::vector<std::string>& paths) const;
  OverlaySnapshots(std::string dir, std::string base);
  // For each layer above `after`, the paths of `changed` (sorted) it also holds.
  Result<std::vector<LayerOverlap>> OverlapsAfter(const std::vector<std::string>& changed, std::uint32_t after) const;
  // FailedPrecondition naming `what` when an open fork reads a layer of `removed`.
  Status NoForkReads(const std::vector<std::uint32_t>& removed, std::string_view what) const;
  // Takes down and discards what forks of a dead owner left (at Open).
  void DiscardStaleForks();
  Status Step(std::string_view name) const { return step_hook_ ? step_hook_(name) : Status::OK(); }
  // Promises `image` host space for `bytes` (host_disk.h): ResourceExhausted naming the sizes and
  // the file system when its unwritten part, beside what the other images open in this process may
  // still take, does not fit the host's free space less the state store's reserve.
  Status PromiseHostSpace(const std::string& image, std::uint64_t bytes);
  // Makes (or grows, or moves an older layout into) the disk image and mounts it at disk/.
  Status OpenDisk(std::uint64_t bytes);
  Status MountDisk(const std::string& image);
  Status UnmountDisk();
  // Reads the stack (layers/, last_layer) from the mounted disk.
  Status LoadStack();
  Status Mount();
  Status Unmount();
  std::string LayerDir(std::uint32_t id) const;
  // Writes last_layer (atomically: a new file renamed over the old).
  Status RecordLastId(std::uint32_t id);
  // A fresh upper and work directory (the old ones to the trash), then the mount.
  Status ResetUpperAndMount();
  // Moves `path` into the trash of its file system (a rename, so O(1)).
  Status Discard(const std::string& path);
  // Empties the trash directories on the reaper thread unless a reaper is already running. Trash
  // that arrives as a reaper finishes waits for the next call (or the next Open).
  void StartReaper();
  // Empties the trash now (a full disk needs the space before the next command).
  void ReapNow();

  std::string dir_;
  std::string base_;
  std::string disk_;  // dir_/disk, where the image is mounted
  std::string merged_;
  std::vector<std::uint32_t> layers_;  // ascending
  std::uint32_t last_id_ = 0;          // the highest id ever handed out
  std::uint64_t disk_bytes_ = 0;
  bool mounted_ = false;
  bool disk_mounted_ = false;
  int lock_fd_ = -1;
  std::atomic<std::uint64_t> trash_seq_{0};
  std::mutex reaper_mu_;  // forks' threads discard scratch views too
  std::atomic<bool> reaping_{false};
  std::thread reaper_;
  StepHook step_hook_;
  std::set<OverlayFork*> forks_;
  int next_fork_ = 1;
};

// One fork of an OverlaySnapshots stack (OverlaySnapshots::Fork): a writable tree over the frozen
// layers of the moment it was made. Destroying it unmounts its tree and discards its changes,
// unless CommitFork took them.
class OverlayFork {
 public:
  ~OverlayFork();
  OverlayFork(const OverlayFork&) = delete;
  OverlayFork& operator=(const OverlayFork&) = delete;

  int number() const { return number_; }
  // The fork's tree, where its commands, reads, writes and evaluations happen.
  const std::string& merged() const { return merged_; }
  // The top frozen layer when the fork was made (0: the base).
  std::uint32_t forked_from() const { return lowers_.empty() ? 0 : lowers_.back(); }
  // True once CommitFork took its changes or refused them: its tree is gone.
  bool spent() const { return spent_; }
  // Paths the fork changed, added or deleted, sorted.
  Result<std::vector<std::string>> ChangedPaths() const;
  // The fork's stack, for reading what it changed (overlay_changes.h).
  OverlayLayers layers() const;
  // As OverlaySnapshots::WithScratchView, over the fork's tree.
  Status WithScratchView(const std::function<Status(const std::string& root)>& fn);

 private:
  friend class OverlaySnapshots;
  OverlayFork(OverlaySnapshots& stack, int number, std::vector<std::uint32_t> lowers);
  Status Unmount();
  // Unmounts the tree and moves the fork's directories to the trash.
  void Discard();

  OverlaySnapshots* stack_;
  int number_;
  std::vector<std::uint32_t> lowers_;  // ascending, as the stack was
  std::string upper_, work_;           // on the stack's disk: disk/forks/<n>/{upper,work}
  std::string dir_;                    // on the host: forks/<n> (merged/, scratch/)
  std::string merged_;
  bool mounted_ = false;
  bool spent_ = false;
};

}  // namespace temper::stig
