// Target: the machine the loop hardens, as the Worker's tools and the evaluator see it.
//
// The orchestrator drives every target through these operations alone, so a rootfs sandbox
// (rootfs_target.h) and an SSH host (ssh_target.h) are interchangeable. Paths are absolute paths inside
// the target. Commands run as the target's root, confined to the target.
// Thread safety: implementations are not thread-safe; one owner drives a target at a time.
#pragma once

#include <sys/types.h>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "platform/process.h"
#include "platform/sandbox.h"
#include "stig/change_set.h"
#include "stig/fix_bundle.h"
#include "stig/packages/package_cache.h"
#include "stig/scap/evaluator.h"

namespace temper::stig {

using SnapshotId = std::uint32_t;

// One check of how the daemon reaches the target (see Target::CheckAccess).
struct AccessCheck {
  std::string name;    // e.g. "fresh-ssh-login"
  std::string method;  // what was done, for people
  bool ok = false;
  std::string detail;  // why it failed; empty when ok
};

// Paths that a later snapshot holds of those an earlier one changed (see Target::OverlapsAbove).
struct SnapshotOverlap {
  SnapshotId later = 0;
  std::vector<std::string> paths;  // absolute in the target, sorted
};

class Target {
 public:
  virtual ~Target() = default;

  virtual const std::string& name() const = 0;

  // Records the current state; Revert(id) returns to it. Ids grow with every snapshot and are
  // never reused, so a stored id always names the same recorded changes.
  virtual Result<SnapshotId> Snapshot() = 0;
  // Restores the exact state of snapshot `id` (0 = as created), discarding later snapshots and
  // changes since the latest one. For an id DropSnapshot removed: the state of the ones below it.
  virtual Status Revert(SnapshotId id) = 0;
  // The snapshots the target holds, oldest first (ascending ids).
  virtual Result<std::vector<SnapshotId>> Snapshots() = 0;
  // Paths changed since the latest snapshot, sorted; empty when the state is that snapshot's.
  virtual Result<std::vector<std::string>> UnsnapshottedPaths() = 0;
  // True when a command can change nothing but the files ChangesSinceSnapshot lists: no running
  // kernel, services or processes whose state a check could read (a root file system in a
  // sandbox). A verification may then skip the rules whose checks read none of those files.
  virtual bool ChangesAreFilesOnly() const { return false; }
  // Paths snapshot `id` changed over the snapshots below it, sorted. NotFound when not held.
  virtual Result<std::vector<std::string>> SnapshotChanges(SnapshotId id) = 0;
  // Takes the changes snapshot `id` recorded (over the one below it) out of the target, keeping
  // the later snapshots and their ids, and discards changes since the latest snapshot. What a
  // later snapshot changed on the same paths stays: check OverlapsAbove first. NotFound when the
  // target does not hold `id`.
  virtual Status DropSnapshot(SnapshotId id) = 0;
  // For each later snapshot, the paths `id` changed that it also holds (rewrote, deleted, or
  // created something under); empty when `id` can be dropped alone. NotFound as DropSnapshot.
  virtual Result<std::vector<SnapshotOverlap>> OverlapsAbove(SnapshotId id) = 0;
  // What changed since the last Snapshot (or since the last Revert, whose snapshot is then the
  // last): files, packages and services, for the record of an attempt. Unimplemented for a kind
  // of target that cannot tell (this default); other errors are the target's.
  virtual Result<ChangeSet> ChangesSinceSnapshot() {
    return Status::Unimplemented("target " + name() + " cannot list what changed since its last snapshot");
  }
  // The same changes whole (fix_bundle.h): every changed file's bytes, owner and mode before and
  // after, for replaying the fix elsewhere. Unimplemented for a kind of target that cannot tell
  // (this default); FailedPrecondition when the change breaks a bundle's limits (named).
  virtual Result<FixBundle> FixSinceSnapshot() {
    return Status::Unimplemented("target " + name() + " cannot capture what changed since its last snapshot whole");
  }

  // Forks, for attempts that run beside each other. A fork is a Target of its own over the
  // latest snapshot (changes since it are not in the fork); it runs commands, reads, writes and
  // evaluates like its target but cannot snapshot or revert: it is committed or dropped whole.
  // Unimplemented for a kind of target that cannot fork (this default: an SSH host is one host).
  virtual bool CanFork() const { return false; }
  virtual Result<std::unique_ptr<Target>> Fork() {
    return Status::Unimplemented("target " + name() + " cannot fork: its attempts run one at a time");
  }
  // Makes what `fork` (from this target's Fork()) changed the latest snapshot, above the snapshots
  // taken since the fork was made, and returns its id. Aborted, naming the paths, when one of those
  // changed a path the fork changed too: the fork's result was judged on a tree it would not land
  // on. The fork is spent either way. FailedPrecondition when this target has changes since its
  // latest snapshot; InvalidArgument when `fork` is not one of its forks.
  virtual Result<SnapshotId> CommitFork(Target& fork) {
    return Status::Unimplemented("target " + name() + " cannot fork, so it has no fork " + fork.name() + " to commit");
  }

  // Runs `command` with /bin/sh -c inside the target. A failing command is a ProcessResult with
  // its exit code, not an error.
  virtual Result<ProcessResult> Run(const std::string& command, const SandboxLimits& limits) = 0;
  // True when the target has a package cache, so PreparePackages can succeed.
  virtual bool CanInstallPackages() const = 0;
  // Makes `packages` (Debian package names) and what they depend on installable by the target's
  // own apt without network, fetching them into the host-side package cache; the target itself is
  // not changed. Errors as PackageCache::Fetch, and FailedPrecondition when the target has no
  // package cache.
  virtual Result<ResolvedPackages> PreparePackages(const std::vector<std::string>& packages) = 0;
  // Runs `command` as Run does, with the target's apt able to install `prepared` offline (e.g.
  // `apt-get install -y aide`, or a script that does). Errors as Run.
  virtual Result<ProcessResult> RunWithPackages(const std::string& command, const SandboxLimits& limits,
                                                const ResolvedPackages& prepared) = 0;
  // Reads at most `max_bytes` of a regular file (OutOfRange when larger). NotFound when missing.
  virtual Result<std::string> ReadFile(const std::string& path, std::size_t max_bytes) = 0;
  // Creates or replaces a file, owned by root, with `mode`. NotFound when the parent is missing.
  virtual Status WriteFile(const std::string& path, std::string_view content, mode_t mode) = 0;

  // OpenSCAP verdicts for the request on the target's current state.
  virtual Result<Evaluation> Evaluate(const Evaluator& evaluator, const EvaluationRequest& request) = 0;

  // Checks that the daemon can still reach and control the target as it could before a change
  // (an SSH host: a new login on a fresh connection, then sudo), run with the health checks. A
  // failing check is a result; errors mean the checks could not run. None by default (a rootfs
  // target is reached through the file system).
  virtual Result<std::vector<AccessCheck>> CheckAccess() { return std::vector<AccessCheck>{}; }
};

}  // namespace temper::stig
