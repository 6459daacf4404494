// RootfsTarget: a Target that is a root file system in a directory, changed only through a
// bubblewrap sandbox and snapshotted with overlayfs.
//
// It stands in for a host during development, tests and the baseline: a Debian 12 root (built by
// rootfs_builder.h) presented as Ubuntu 20.04, so SSG's Ubuntu 20.04 STIG content applies.
// Everything in the tree was written by the sandbox, so the host treats it as hostile: reads and
// writes go through target_file.h (links resolve inside the target, FIFOs, sockets and devices are
// refused by name before anything is opened, no file is created through a link), commands run with
// the target's caps (sandbox_caps.h: pids, memory, CPU in a cgroup per command, the disk as the size
// of the layers' image), and a command that hits a cap ends with the cap named in
// ProcessResult::cap_hit. Fork() gives a RootfsTarget over a fork of the layers (overlay_snapshots.h),
// sharing the package cache, the caps and the disk image with its target.
// Requires root on the host (overlayfs and image mounts, cgroups, the sandbox's id map).
// Thread safety: a target and each of its forks may be driven by a thread of its own, as long as
// forks are made, committed and destroyed on the target's thread.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "common/log.h"
#include "platform/cgroup.h"
#include "platform/sandbox_caps.h"
#include "stig/packages/package_cache.h"
#include "stig/rootfs/overlay_snapshots.h"
#include "stig/rootfs/rootfs_builder.h"
#include "stig/target.h"

namespace temper::stig {

class RootfsTarget : public Target {
 public:
  // Opens the target `name` whose state lives in `dir` (layers, mount point) over the read-only
  // root `base`; many targets may share one base, and one package cache (`packages.dir` empty: the
  // target cannot install packages). Its commands run with `caps`. Errors: InvalidArgument from
  // SandboxCaps::Validate, FailedPrecondition when no cgroup can cap its commands
  // (CgroupTree::Open), else as OverlaySnapshots::Open and PackageCache::Open.
  static Result<std::unique_ptr<RootfsTarget>> Open(std::string name, const std::string& dir, const std::string& base,
                                                    PackageCacheOptions packages = {}, SandboxCaps caps = {});

  // The layout `temper target create` makes in a target directory: `dir`/root holds the built
  // root (rootfs_builder.h) and `dir`/state the snapshot layers. Builds the root first when it is
  // missing or its spec changed (so this may take minutes and needs network access). `dir` is
  // made root-only: the base holds the distribution's setuid programs too.
  static Result<std::unique_ptr<RootfsTarget>> CreateInDir(std::string name, const std::string& dir,
                                                           const RootfsSpec& spec, const Logger& log);

  const std::string& name() const override { return name_; }
  // A fork refuses the snapshot operations (FailedPrecondition): it is committed or dropped whole.
  Result<SnapshotId> Snapshot() override;
  Status Revert(SnapshotId id) override;
  Result<std::vector<SnapshotId>> Snapshots() override;
  // A fork: what it changed since it was made.
  Result<std::vector<std::string>> UnsnapshottedPaths() override;
  Result<std::vector<std::string>> SnapshotChanges(SnapshotId id) override;
  Status DropSnapshot(SnapshotId id) override;
  Result<std::vector<SnapshotOverlap>> OverlapsAbove(SnapshotId id) override;
  // Named <target>/fork-<n>. Errors as OverlaySnapshots::Fork; FailedPrecondition on a fork.
  bool CanFork() const override { return fork_ == nullptr; }
  Result<std::unique_ptr<Target>> Fork() override;
  Result<SnapshotId> CommitFork(Target& fork) override;
  bool is_fork() const { return fork_ != nullptr; }
  // Read from the overlay layers (overlay_changes.h); a fork: what it changed since it was made.
  Result<ChangeSet> ChangesSinceSnapshot() override;
  // Read from the overlay layers (overlay_fix_capture.h), as ChangesSinceSnapshot.
  Result<FixBundle> FixSinceSnapshot() override;
  // Its commands run in a sandbox over the tree: nothing of theirs outlives them but files.
  bool ChangesAreFilesOnly() const override { return true; }
  Result<ProcessResult> Run(const std::string& command, const SandboxLimits& limits) override;
  bool CanInstallPackages() const override { return packages_ != nullptr; }
  Result<ResolvedPackages> PreparePackages(const std::vector<std::string>& packages) override;
  Result<ProcessResult> RunWithPackages(const std::string& command, const SandboxLimits& limits,
                                        const ResolvedPackages& prepared) override;
  Result<std::string> ReadFile(const std::string& path, std::size_t max_bytes) override;
  Status WriteFile(const std::string& path, std::string_view content, mode_t mode) override;
  Result<Evaluation> Evaluate(const Evaluator& evaluator, const EvaluationRequest& request) override;
  // "writable-layer-room": the layer has room for the sandbox's next write and the next snapshot.
  // A change that fills the target's disk fails it, so the loop reverts that change (and with it
  // the space) instead of keeping a target that nothing can be done on.
  Result<std::vector<AccessCheck>> CheckAccess() override;

  // The merged tree on the host (for evaluation and inspection; never write to it directly).
  const std::string& root() const { return fork_ ? fork_->merged() : layers_->merged(); }
  OverlaySnapshots& snapshots() { return *layers_; }
  // The caps its commands run with (disk_bytes: the image's actual size).
  const SandboxCaps& caps() const { return caps_; }

 private:
  RootfsTarget(std::string name, std::shared_ptr<OverlaySnapshots> layers, std::unique_ptr<OverlayFork> fork,
               std::shared_ptr<const PackageCache> packages, SandboxCaps caps, std::shared_ptr<CgroupTree> cgroups)
      : name_(std::move(name)),
        layers_(std::move(layers)),
        fork_(std::move(fork)),
        packages_(std::move(packages)),
        caps_(caps),
        cgroups_(std::move(cgroups)) {}

  // FailedPrecondition on a fork, naming `what` it cannot do.
  Status NotOnFork(std::string_view what) const;
  Result<const PackageCache*> Packages() const;
  Result<ProcessResult> Sandboxed(const std::string& command, const SandboxLimits& limits, const SandboxExtras& extras);
  // The disk cap's part of a command's result: the layer filled up (or the command wrote to a full
  // one: `full_before`), or a write the layer had no room for.
  void NoteDiskCap(ProcessResult& r, bool full_before) const;

  std::string name_;
  std::shared_ptr<OverlaySnapshots> layers_;  // shared with the forks, which read its layers
  std::unique_ptr<OverlayFork> fork_;         // set on a fork: its tree is the one it works on
  std::shared_ptr<const PackageCache> packages_;
  SandboxCaps caps_;
  std::shared_ptr<CgroupTree> cgroups_;
};

}  // namespace temper::stig
