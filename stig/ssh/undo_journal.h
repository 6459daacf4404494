// UndoJournal: snapshot and exact revert of a live host's configuration, stored on the host.
//
// A real host cannot be remounted like a rootfs target, so a snapshot records, on the host, the
// state of the paths STIG fixes change (the roots: /etc with PAM, audit, sudoers, sshd and
// systemd's unit links; grub's configuration; cron; root's home with its ssh keys; dpkg's statoverride,
// diversions and alternatives) plus any path the Worker wrote outside them (Track), and the
// installed package list:
//   - a tar of the roots with owners (numeric), modes, xattrs and ACLs;
//   - a manifest: per path its type, mode, owner, group, size, symlink target, SHA-256 and xattrs;
//   - dpkg's package list (name, version, state).
// Revert(n) makes the host match snapshot n exactly: packages installed since are purged (or
// removed, when n had only their configuration), packages removed or changed since are installed
// at n's version, files and directories added under the roots are deleted, the tar is extracted
// over the roots, and then the host's manifest and package list are compared with n's. Anything
// that differs is reported (path by path, package by package) and the revert FAILS with DataLoss:
// the caller must stop and leave the host to a human rather than guess.
//
// Not covered: changes outside the roots and the Worker's written paths (a command can write
// anywhere; only paths it names through write_file become tracked), running state (a service
// restarted with a bad configuration keeps running until restarted again), and data that package
// maintainer scripts leave outside the roots. Packages are tracked with dpkg; a host without
// dpkg-query gets only its files restored (Open logs this).
//
// Storage: `dir` (root-only, 0700) holds tracked (the roots), last_id, snap.<id>/ per snapshot.
// Snapshot 0 is taken when the journal is first opened on the host; ids grow with every snapshot
// and are never reused (last_id survives reverts and restarts), so a stored id always names the
// same recorded state. Revert(n) deletes the snapshots after n, and Snapshot keeps 0 and the
// newest `keep_recent`, so reverting to a dropped id is NotFound.
// A journal left by an earlier daemon is picked up as it is, like OverlaySnapshots' layers.
// Faults: every step is a command through the shell (SshConnection starts each through its Env), and
// a command that cannot run (a process that does not start, a lost connection) fails the call with
// the shell's error and leaves the journal consistent: a failed Snapshot leaves no half-written
// snapshot and its id is never used again, a failed Revert may be called again and finishes the
// revert, and a snapshot whose id was returned stays held until a Revert or keep_recent drops it.
// The clock (a revert's seconds) is the Env's (env.h).
// Thread safety: single owner (as Target); the shell and the Env must outlive the journal.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/log.h"
#include "common/status.h"
#include "platform/env.h"
#include "stig/ssh/remote_shell.h"

namespace temper::stig {

// /etc, /boot/grub, /boot/grub2, /root, /usr/share/pam-configs, /var/spool/cron and dpkg's
// statoverride, diversions and alternatives.
std::vector<std::string> DefaultUndoRoots();

struct UndoManifest;  // one state of the roots, as recorded or as found

struct UndoJournalOptions {
  std::string dir;  // on the host, absolute; e.g. /var/lib/temper/undo/<target>
  // Used when the host has no journal yet; an existing journal keeps its own (and its Tracked paths).
  std::vector<std::string> roots = DefaultUndoRoots();
  std::uint32_t keep_recent = 64;
};

struct RevertReport {
  std::vector<std::string> packages_purged;     // installed since the snapshot
  std::vector<std::string> packages_installed;  // name=version put back
  std::size_t paths_removed = 0;                // added under the roots since the snapshot
  double seconds = 0;
};

class UndoJournal {
 public:
  // Opens the journal in options.dir on the host, creating it (and snapshot 0) when missing.
  // Errors: InvalidArgument for a relative dir or root; FailedPrecondition when the host lacks tar,
  // gzip, find, sha256sum or xargs; Internal when the host refuses; the shell's transport errors.
  static Result<UndoJournal> Open(RemoteShell& shell, UndoJournalOptions options, const Logger& log,
                                  Env& env = Env::Default());

  // The newest snapshot the journal holds (after Revert(n): n).
  std::uint32_t depth() const { return depth_; }
  // The snapshot ids on the host, ascending.
  const std::vector<std::uint32_t>& snapshots() const { return ids_; }
  const std::vector<std::string>& roots() const { return roots_; }
  // False when the host has no getfattr (package attr): xattrs and ACLs are restored by tar but
  // cannot be compared afterwards.
  bool xattrs_checked() const { return xattrs_checked_; }

  // Records the current state as a new snapshot and returns its id, one above every id taken. Internal (with tar's or
  // find's message) when the host could not record it; nothing half-written is kept.
  Result<std::uint32_t> Snapshot();
  // Restores snapshot `id` exactly (see above) and deletes the snapshots after it. OutOfRange when
  // id was never taken; NotFound when it is no longer held; DataLoss, listing every path and package that could
  // not be restored, when the host does not match the snapshot afterwards.
  Result<RevertReport> Revert(std::uint32_t id);
  // Paths under the roots whose state now differs from snapshot `id` (type, mode, owners, size,
  // link, SHA-256, xattrs), sorted, and /var/lib/dpkg/status when the packages differ. Errors as
  // Revert's for the id, Internal when the host cannot list them.
  Result<std::vector<std::string>> ChangedSince(std::uint32_t id);
  // The same between two held snapshots, from what they recorded.
  Result<std::vector<std::string>> Difference(std::uint32_t older, std::uint32_t newer);
  // Makes `path` (absolute) part of every snapshot from now on, and records its current state into
  // every existing snapshot, as the state it had there: call it before the first change to a path
  // outside the roots. A path under a root is already covered (no-op).
  Status Track(const std::string& path);
  // True when `path` lies under one of the roots.
  bool Covers(const std::string& path) const;

 private:
  UndoJournal(RemoteShell& shell, UndoJournalOptions options, const Logger& log, Env& env)
      : shell_(&shell), options_(std::move(options)), log_(&log), env_(&env) {}

  Status Load();
  // OutOfRange for an id never taken, NotFound for one no longer held.
  Status CheckHeld(std::uint32_t id) const;
  // Snapshot `snap`'s recorded manifest and the one of what now lies under its roots.
  Result<std::pair<UndoManifest, UndoManifest>> SnapshotAndNow(const std::string& snap);
  Result<ProcessResult> Script(const char* script, std::vector<std::string> args, std::string_view stdin_data = {});
  Status TakeSnapshot(std::uint32_t id);
  Status Drop(const std::vector<std::uint32_t>& ids);
  Status RevertPackages(const std::string& snap, RevertReport& report, std::vector<std::string>& problems);
  Status RevertFiles(const std::string& snap, RevertReport& report);
  // Compares what now lies under the snapshot's roots with its manifest (removing xattrs added
  // since, which tar leaves on directories it finds in place); each difference is a problem.
  Status CompareFiles(const std::string& snap, std::vector<std::string>& problems);

  RemoteShell* shell_;
  UndoJournalOptions options_;
  const Logger* log_;
  Env* env_;
  std::vector<std::string> roots_;
  std::vector<std::uint32_t> ids_;
  std::uint32_t depth_ = 0;
  std::uint32_t last_id_ = 0;
  bool xattrs_checked_ = true;
};

}  // namespace temper::stig
