#include "stig/ssh/ssh_target.h"

#include <algorithm>
#include <iterator>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "common/lexical_path.h"
#include "stig/packages/apt_output.h"
#include "stig/ssh/host_paths.h"

namespace temper::stig {
namespace {

SandboxLimits Setup() {
  SandboxLimits l;
  l.timeout = std::chrono::minutes(2);
  l.memory_limit_bytes = 0;
  return l;
}

// After a revert sshd must run the restored configuration, not one a failed attempt loaded.
// Exit 30: the restored configuration does not pass `sshd -t`.
constexpr const char* kReloadSshdScript = R"SH(sshd=$(command -v sshd || echo /usr/sbin/sshd)
[ -x "$sshd" ] || exit 0
"$sshd" -t || exit 30
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
  for unit in ssh sshd; do
    if systemctl is-active --quiet "$unit"; then systemctl reload "$unit"; exit $?; fi
  done
fi
if [ -f /run/sshd.pid ]; then kill -HUP "$(cat /run/sshd.pid)"; exit $?; fi
exit 0
)SH";

// The login user's home directory on the host, from its passwd entry.
std::string HomeOf(SshConnection& c, const std::string& user) {
  std::string fallback = user == "root" ? "/root" : "/home/" + user;
  Result<ProcessResult> r = c.Exec({"getent", "passwd", user}, {}, Setup());
  if (!r.ok() || !r->Succeeded()) return fallback;
  std::vector<std::string> fields;
  std::istringstream in(r->out.substr(0, r->out.find('\n')));
  for (std::string f; std::getline(in, f, ':');) fields.push_back(f);
  return fields.size() >= 6 && fields[5].starts_with("/") ? fields[5] : fallback;
}

}  // namespace

Result<std::unique_ptr<SshTarget>> SshTarget::Open(SshTargetOptions options, const Logger& log) {
  if (options.name.empty()) return Status::InvalidArgument("ssh target: empty name");
  if (options.host_dir.empty() || options.host_dir[0] != '/') {
    return Status::InvalidArgument(
        fmt::format("ssh target {}: host_dir '{}' must be absolute", options.name, options.host_dir));
  }
  const std::string context = fmt::format("target {}", options.name);
  Result<std::unique_ptr<SshConnection>> connection = SshConnection::Open(options.ssh, log);
  if (!connection.ok()) return connection.status().WithContext(context);
  SshConnection& c = **connection;

  LoginIdentity login{options.ssh.endpoint.user, HomeOf(c, options.ssh.endpoint.user), options.ssh.endpoint.port};
  std::vector<std::string> roots = options.undo_roots;
  if (login.user != "root") roots.push_back(login.home + "/.ssh");
  TEMPER_ASSIGN_OR_RETURN(
      ProcessResult made,
      c.Exec({"/bin/sh", "-c", "umask 077; mkdir -p -- \"$1\" && chmod 0700 -- \"$1\"", "mkdir", options.host_dir}, {},
             Setup()));
  if (!made.Succeeded()) {
    return Status::Internal(fmt::format("{}: creating {} on {} failed ({}): {}", context, options.host_dir,
                                        c.host_name(), made.Describe(), made.err));
  }
  UndoJournalOptions journal{options.host_dir + "/undo/" + options.name, roots, options.keep_snapshots};
  Result<UndoJournal> opened = UndoJournal::Open(c, std::move(journal), log);
  if (!opened.ok()) return opened.status().WithContext(context);

  std::unique_ptr<SshTarget> t(new SshTarget(std::move(options), std::move(*connection), std::move(login), log));
  t->journal_.emplace(std::move(*opened));
  t->oscap_.emplace(*t->connection_, t->options_.host_dir, log);
  return t;
}

Status SshTarget::MarkNeedsHuman(const Status& why) {
  needs_human_ = why.ToString();
  log_.Error("target {} ({}) needs a human: {}", options_.name, connection_->host_name(), *needs_human_);
  return why.WithContext(fmt::format("target {} needs a human", options_.name));
}

Status SshTarget::Ready(bool changes) {
  if (needs_human_) {
    return Status::FailedPrecondition(fmt::format("target {} ({}) needs a human since a revert failed: {}",
                                                  options_.name, connection_->host_name(), *needs_human_));
  }
  if (!connection_->MasterAlive()) {
    if (dirty_ && !connection_->MasterExpired()) {
      return Status::Aborted(
          fmt::format("ssh {}: \"connection lost\" after a change to the host; only a revert (through "
                      "a fresh connection) may follow",
                      connection_->host_name()));
    }
    TEMPER_RETURN_IF_ERROR(connection_->Reconnect());
  }
  if (changes) dirty_ = true;
  return Status::OK();
}

Result<SnapshotId> SshTarget::Snapshot() {
  TEMPER_RETURN_IF_ERROR(Ready(false));
  TEMPER_ASSIGN_OR_RETURN(std::uint32_t id, journal_->Snapshot());
  dirty_ = false;
  return id;
}

Status SshTarget::Revert(SnapshotId id) {
  if (needs_human_) return Ready(false);
  for (int round = 0;; ++round) {
    if (!connection_->MasterAlive()) {
      log_.Warning("target {}: the connection to {} was lost; reverting to snapshot {} through a fresh connection",
                   options_.name, connection_->host_name(), id);
      Status reconnected = ReconnectPatiently();
      if (!reconnected.ok())
        return MarkNeedsHuman(reconnected.WithContext(fmt::format("reconnecting to revert to snapshot {}", id)));
    }
    Result<RevertReport> r = journal_->Revert(id);
    if (r.ok()) {
      log_.Info(
          "target {}: reverted to snapshot {} in {:.1f} s ({} path(s) removed, {} package(s) purged, {} reinstalled)",
          options_.name, id, r->seconds, r->paths_removed, r->packages_purged.size(), r->packages_installed.size());
      Status access = ReloadSshdAndCheckAccess();
      if (!access.ok()) return MarkNeedsHuman(access.WithContext(fmt::format("after reverting to snapshot {}", id)));
      dirty_ = false;
      return Status::OK();
    }
    // Lost mid-revert: one more try through another fresh connection.
    if (r.status().code() == StatusCode::kAborted && round == 0) continue;
    return MarkNeedsHuman(r.status());
  }
}

Result<std::vector<SnapshotId>> SshTarget::Snapshots() {
  std::vector<SnapshotId> out;
  for (std::uint32_t id : journal_->snapshots()) {
    if (id != 0) out.push_back(id);
  }
  return out;
}

Result<std::vector<std::string>> SshTarget::UnsnapshottedPaths() {
  TEMPER_RETURN_IF_ERROR(Ready(false));
  return journal_->ChangedSince(journal_->depth());
}

Result<SnapshotId> SshTarget::SnapshotBelow(SnapshotId id) const {
  const std::vector<std::uint32_t>& held = journal_->snapshots();
  auto it = std::find(held.begin(), held.end(), id);
  if (id == 0 || it == held.end()) {
    return Status::NotFound(
        fmt::format("target {} holds no snapshot {} (held: {})", options_.name, id, fmt::join(held, ", ")));
  }
  return *std::prev(it);  // snapshot 0 is always held, below every other
}

Result<std::vector<std::string>> SshTarget::SnapshotChanges(SnapshotId id) {
  TEMPER_ASSIGN_OR_RETURN(SnapshotId below, SnapshotBelow(id));
  TEMPER_RETURN_IF_ERROR(Ready(false));
  return journal_->Difference(below, id);
}

Status SshTarget::DropSnapshot(SnapshotId id) {
  TEMPER_ASSIGN_OR_RETURN(SnapshotId below, SnapshotBelow(id));
  std::vector<SnapshotId> later;
  for (std::uint32_t s : journal_->snapshots()) {
    if (s > id) later.push_back(s);
  }
  if (!later.empty()) {
    return Status::FailedPrecondition(fmt::format(
        "target {} is an SSH host: its undo journal cannot take snapshot {} out from under later snapshot(s) {}, whose "
        "archives hold its changes too; revert those first, or revert the whole batch",
        options_.name, id, fmt::join(later, ", ")));
  }
  return Revert(below);
}

Result<std::vector<SnapshotOverlap>> SshTarget::OverlapsAbove(SnapshotId id) {
  TEMPER_ASSIGN_OR_RETURN(std::vector<std::string> changed, SnapshotChanges(id));
  std::vector<SnapshotOverlap> out;
  for (std::uint32_t above : journal_->snapshots()) {
    if (above <= id) continue;
    TEMPER_ASSIGN_OR_RETURN(std::vector<std::string> held, SnapshotChanges(above));
    SnapshotOverlap overlap{above, {}};
    for (const std::string& p : changed) {
      bool touched = std::any_of(held.begin(), held.end(), [&](const std::string& q) {
        return q == p || (q.size() > p.size() && q.starts_with(p) && q[p.size()] == '/');
      });
      if (touched) overlap.paths.push_back(p);
    }
    if (!overlap.paths.empty()) out.push_back(std::move(overlap));
  }
  return out;
}

Status SshTarget::ReconnectPatiently() {
  Status s;
  const int tries = std::max(1, options_.reconnect_tries);
  for (int i = 0; i < tries; ++i) {
    if (i > 0) std::this_thread::sleep_for(options_.reconnect_pause);
    s = connection_->Reconnect();
    // A refused key or host key will not change by waiting; a host that is coming back may.
    if (s.ok() || (s.code() != StatusCode::kUnavailable && s.code() != StatusCode::kDeadlineExceeded)) return s;
    log_.Warning("target {}: {} (try {} of {})", options_.name, s.message(), i + 1, tries);
  }
  return s;
}

Status SshTarget::ReloadSshdAndCheckAccess() {
  TEMPER_ASSIGN_OR_RETURN(ProcessResult r, connection_->Exec({"/bin/sh", "-c", kReloadSshdScript}, {}, Setup()));
  if (r.exit_code == 30) {
    return Status::FailedPrecondition(fmt::format("the restored sshd configuration fails `sshd -t`: {}", r.err));
  }
  if (!r.Succeeded())
    return Status::Internal(fmt::format("reloading sshd failed ({}): {}", r.Describe(), r.err + r.out));
  // sshd re-executes itself on reload and does not listen for a moment.
  Status login;
  for (int i = 0; i < 10; ++i) {
    login = connection_->CheckFreshLogin();
    if (login.ok()) return login;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  return login;
}

Status SshTarget::GuardCommand(const std::string& command) {
  auto refuse = [&](const std::string& why) {
    return Status::PermissionDenied(fmt::format("refused on {}: {}", options_.name, why));
  };
  if (std::string why = LockoutRisk(command, login_); !why.empty()) return refuse(why);
  Result<std::vector<NamedPath>> named = PathsNamedBy(command);
  if (!named.ok()) return refuse(fmt::format("the guards cannot read the command ({})", named.status().message()));
  std::vector<NamedPath> changed;
  for (const NamedPath& n : *named) {
    if (std::string why = HostDirRisk(n, options_.host_dir); !why.empty()) return refuse(why);
    if (n.changes) changed.push_back(n);
  }
  if (changed.empty()) return Status::OK();
  // Where the changes land once the host follows its symlinks.
  std::vector<std::string> paths;
  for (const NamedPath& n : changed) paths.push_back(n.path);
  TEMPER_RETURN_IF_ERROR(Ready(false));
  TEMPER_ASSIGN_OR_RETURN(std::vector<std::string> resolved, RemoteResolvePaths(*connection_, paths));
  for (size_t k = 0; k < changed.size(); ++k) {
    if (resolved[k] == changed[k].path) continue;
    NamedPath landing = changed[k];
    landing.path = resolved[k];
    std::string why = HostDirRisk(landing, options_.host_dir);
    if (why.empty()) why = WriteLockoutRisk(resolved[k], login_);
    if (!why.empty())
      return refuse(fmt::format("{} is a symlink to {} on this host: {}", changed[k].path, resolved[k], why));
  }
  return Status::OK();
}

Result<ProcessResult> SshTarget::Run(const std::string& command, const SandboxLimits& limits) {
  TEMPER_RETURN_IF_ERROR(GuardCommand(command));
  TEMPER_RETURN_IF_ERROR(Ready(true));
  return connection_->Exec({"/bin/sh", "-c", command}, {}, limits);
}

Result<ResolvedPackages> SshTarget::PreparePackages(const std::vector<std::string>& packages) {
  TEMPER_RETURN_IF_ERROR(Ready(false));
  std::vector<std::string> argv = {"env",
                                   "DEBIAN_FRONTEND=noninteractive",
                                   "apt-get",
                                   "install",
                                   "--download-only",
                                   "-y",
                                   "-q",
                                   "-o",
                                   "Dpkg::Use-Pty=0"};
  argv.insert(argv.end(), packages.begin(), packages.end());
  SandboxLimits limits;
  limits.timeout = std::chrono::minutes(15);
  limits.memory_limit_bytes = 0;
  TEMPER_ASSIGN_OR_RETURN(ProcessResult r, connection_->Exec(argv, {}, limits));
  if (!r.Succeeded()) {
    const std::string output = r.out + "\n" + r.err;
    const std::string tail = output.size() > 3000 ? "…" + output.substr(output.size() - 3000) : output;
    std::vector<std::string> unknown;
    for (const std::string& line : OutputLines(output)) {
      if (line.starts_with("E: Unable to locate package ")) unknown.push_back(line.substr(28));
    }
    if (!unknown.empty()) {
      return Status::NotFound(
          fmt::format("{} unknown to the apt of {}:\n{}", fmt::join(unknown, ", "), connection_->host_name(), tail));
    }
    if (Contains(output, "Failed to fetch") || Contains(output, "Temporary failure resolving") ||
        Contains(output, "Could not resolve") || Contains(output, "Unable to fetch")) {
      return Status::Unavailable(fmt::format("{} could not download {} from its apt sources:\n{}",
                                             connection_->host_name(), fmt::join(packages, " "), tail));
    }
    return Status::FailedPrecondition(fmt::format("downloading {} on {} failed ({}):\n{}", fmt::join(packages, " "),
                                                  connection_->host_name(), r.Describe(), tail));
  }
  ResolvedPackages out;
  out.requested = packages;
  return out;
}

Result<ProcessResult> SshTarget::RunWithPackages(const std::string& command, const SandboxLimits& limits,
                                                 const ResolvedPackages&) {
  return Run(command, limits);
}

Result<std::string> SshTarget::ReadFile(const std::string& path, std::size_t max_bytes) {
  TEMPER_RETURN_IF_ERROR(Ready(false));
  return RemoteReadFile(*connection_, path, max_bytes);
}

Status SshTarget::WriteFile(const std::string& path, std::string_view content, mode_t mode) {
  if (path.empty() || path[0] != '/') return Status::InvalidArgument("target path must be absolute: \"" + path + "\"");
  auto guard = [&](const std::string& p) {
    std::string why = WriteLockoutRisk(p, login_);
    if (why.empty()) why = HostDirRisk({p, true, false, fmt::format("write_file {}", path)}, options_.host_dir);
    return why;
  };
  if (std::string why = guard(NormalizePath(path)); !why.empty()) {
    return Status::PermissionDenied(fmt::format("refused on {}: {}", options_.name, why));
  }
  TEMPER_RETURN_IF_ERROR(Ready(false));
  // The write lands where the host's symlinks lead: judge, journal and write that path.
  TEMPER_ASSIGN_OR_RETURN(std::vector<std::string> resolved, RemoteResolvePaths(*connection_, {path}));
  const std::string& target = resolved[0];
  if (std::string why = guard(target); !why.empty()) {
    return Status::PermissionDenied(
        fmt::format("refused on {}: {} leads to {} on this host: {}", options_.name, path, target, why));
  }
  TEMPER_RETURN_IF_ERROR(Ready(true));
  if (!journal_->Covers(target)) TEMPER_RETURN_IF_ERROR(journal_->Track(target));
  return RemoteWriteFile(*connection_, target, content, mode);
}

Result<Evaluation> SshTarget::Evaluate(const Evaluator& evaluator, const EvaluationRequest& request) {
  TEMPER_RETURN_IF_ERROR(Ready(false));
  return oscap_->Evaluate(evaluator, request);
}

Result<std::vector<AccessCheck>> SshTarget::CheckAccess() {
  TEMPER_RETURN_IF_ERROR(Ready(false));
  AccessCheck check;
  check.name = "fresh-ssh-login";
  check.method = fmt::format("a new SSH login as {} on port {} (not through the open connection){}", login_.user,
                             login_.port, login_.user == "root" ? "" : ", then sudo -n true");
  Status s = connection_->CheckFreshLogin();
  check.ok = s.ok();
  if (!s.ok()) check.detail = s.message();
  return std::vector<AccessCheck>{check};
}

}  // namespace temper::stig
