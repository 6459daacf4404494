// SshTarget: a Target that is a live Linux host reached over SSH — the machines users harden.
//
// Commands, reads and writes go over one OpenSSH master connection (ssh_connection.h) as root
// (sudo -n when the login is not root); snapshots and reverts are the host-side undo journal
// (undo_journal.h); evaluation runs oscap on the host (remote_oscap.h); packages come from the
// host's own apt (it has its sources and network, unlike a rootfs sandbox).
//
// Lost connections. Whether a lost connection is harmless depends on what happened since the last
// snapshot or revert: with no change made (`dirty` false), the next operation simply opens a fresh
// connection (as it does when the master ended after sitting idle). After a change, every operation but Revert
// fails with "connection lost" (Aborted): the change may have cut the host off, and the only safe
// next step is Revert, which opens a second, fresh connection (retrying while the host refuses or
// does not answer; see reconnect_tries) and restores the snapshot. A revert
// that fails (no way back in, or the journal cannot make the host exact) marks the target as
// needing a human: from then on every operation fails with FailedPrecondition saying why, until a
// person has looked at the host and the target is opened again.
//
// Guards: Run and WriteFile refuse (PermissionDenied, with the reason, for the Worker to read) what
// login_guard.h recognises as locking out the login user, and any change to temper's own directory
// on the host (host_dir: the undo journal; host_paths.h). Both judge a path where the host's
// symlinks lead, not only as written: the paths a command may change, and write_file's path, are
// resolved on the host first (one round trip), and write_file writes (and journals) the resolved
// path. CheckAccess logs in on a fresh connection (and runs sudo), so the health check after every
// change catches the rest while the old connection is still open to revert it.
// Thread safety: single owner (as Target).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/log.h"
#include "stig/ssh/login_guard.h"
#include "stig/ssh/remote_oscap.h"
#include "stig/ssh/ssh_connection.h"
#include "stig/ssh/undo_journal.h"
#include "stig/target.h"

namespace temper::stig {

struct SshTargetOptions {
  std::string name;
  SshOptions ssh;
  // temper's root-only directory on the host: undo/<name>, content/ (datastreams), eval/.
  std::string host_dir = "/var/lib/temper";
  // For a host without a journal yet; the login user's ~/.ssh is added when it is not root.
  std::vector<std::string> undo_roots = DefaultUndoRoots();
  std::uint32_t keep_snapshots = 64;  // the journal keeps snapshot 0 and this many newest
  // A host whose connection dropped may be restarting sshd: a revert tries this many fresh
  // connections, this far apart, before handing the host to a human (about 20 s by default).
  int reconnect_tries = 6;
  std::chrono::seconds reconnect_pause{4};
};

class SshTarget final : public Target {
 public:
  // Connects (errors as SshConnection::Open), then opens or starts the host's undo journal (errors
  // as UndoJournal::Open). InvalidArgument for a relative host_dir or an empty name.
  static Result<std::unique_ptr<SshTarget>> Open(SshTargetOptions options, const Logger& log);

  const std::string& name() const override { return options_.name; }
  // The journal's next snapshot. Errors as UndoJournal::Snapshot, and as Run when disconnected.
  Result<SnapshotId> Snapshot() override;
  // Restores snapshot `id` through the current connection, or a fresh one when it was lost, then
  // reloads sshd (so it runs the restored configuration) and proves a fresh login works. Any
  // failure marks the target as needing a human (see above).
  Status Revert(SnapshotId id) override;
  // The journal's snapshots but 0, the host as temper found it (what Revert(0) restores, as a
  // rootfs target's base).
  Result<std::vector<SnapshotId>> Snapshots() override;
  // Read from the host: what differs from the newest snapshot (UndoJournal::ChangedSince).
  Result<std::vector<std::string>> UnsnapshottedPaths() override;
  // What snapshot `id` recorded differently from the snapshot below it.
  Result<std::vector<std::string>> SnapshotChanges(SnapshotId id) override;
  // The newest snapshot only: dropping it is a revert to the one below. A snapshot with later ones
  // above is FailedPrecondition, naming them: its changes are in their archives too, so the
  // journal cannot take them out alone (revert the whole batch instead).
  Status DropSnapshot(SnapshotId id) override;
  // From the snapshots' records: a later snapshot overlaps where it changed a path `id` changed,
  // or something under one.
  Result<std::vector<SnapshotOverlap>> OverlapsAbove(SnapshotId id) override;
  // Refused (PermissionDenied) by the guards above before anything runs.
  Result<ProcessResult> Run(const std::string& command, const SandboxLimits& limits) override;
  // The host installs with its own apt and sources.
  bool CanInstallPackages() const override { return true; }
  // Downloads the packages into the host's apt cache (`apt-get install --download-only`), so the
  // install itself needs no network. NotFound for a package the host's apt does not know;
  // Unavailable when the host cannot reach its sources; FailedPrecondition for conflicts.
  Result<ResolvedPackages> PreparePackages(const std::vector<std::string>& packages) override;
  Result<ProcessResult> RunWithPackages(const std::string& command, const SandboxLimits& limits,
                                        const ResolvedPackages& prepared) override;
  Result<std::string> ReadFile(const std::string& path, std::size_t max_bytes) override;
  // Writes where `path` resolves on the host (symlinks followed), after the guards; a path outside
  // the journal's roots is added to the journal before it is written.
  Status WriteFile(const std::string& path, std::string_view content, mode_t mode) override;
  Result<Evaluation> Evaluate(const Evaluator& evaluator, const EvaluationRequest& request) override;
  // One check, "fresh-ssh-login": a new connection (not the master) logs in and runs sudo -n.
  Result<std::vector<AccessCheck>> CheckAccess() override;

  // Set after a revert failed; empty otherwise.
  const std::optional<std::string>& needs_human() const { return needs_human_; }
  // True when something may have changed on the host since the last snapshot or revert.
  bool dirty() const { return dirty_; }
  const SshEndpoint& endpoint() const { return options_.ssh.endpoint; }
  UndoJournal& journal() { return *journal_; }
  SshConnection& connection() { return *connection_; }

 private:
  SshTarget(SshTargetOptions options, std::unique_ptr<SshConnection> connection, LoginIdentity login, const Logger& log)
      : options_(std::move(options)), connection_(std::move(connection)), login_(std::move(login)), log_(log) {}

  // Fails when a human is needed, or when the connection is gone after a change; reconnects when it
  // is gone with nothing changed. `changes`: the operation may change the host.
  Status Ready(bool changes);
  Status MarkNeedsHuman(const Status& why);
  // The guards for a command: lock-out, temper's directory, and both again where the paths it may
  // change resolve on the host. PermissionDenied with the reason.
  Status GuardCommand(const std::string& command);
  // The held snapshot just below `id`; NotFound when `id` is 0 or not held.
  Result<SnapshotId> SnapshotBelow(SnapshotId id) const;
  // Reconnects, retrying for a while when the host refuses or does not answer (it may be restarting).
  Status ReconnectPatiently();
  // Makes sshd run the (restored) configuration and proves a fresh login works.
  Status ReloadSshdAndCheckAccess();

  SshTargetOptions options_;
  std::unique_ptr<SshConnection> connection_;
  LoginIdentity login_;
  const Logger& log_;
  std::optional<UndoJournal> journal_;
  std::optional<RemoteOscap> oscap_;
  bool dirty_ = false;
  std::optional<std::string> needs_human_;
};

}  // namespace temper::stig
