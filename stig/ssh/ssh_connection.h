// SshConnection: one host reached with the OpenSSH client (/usr/bin/ssh), as a RemoteShell.
//
// No protocol code of our own: the connection is an OpenSSH ControlMaster (one per host, its
// socket in a private 0700 directory), opened once with key-file or agent authentication and
// reused by every command, so a command costs a channel, not a handshake. Host keys are checked
// against temper's own known_hosts file with StrictHostKeyChecking=yes: an unknown or changed key
// is refused, never learnt (ssh_known_hosts.h records a key the operator approved). BatchMode
// means nothing ever prompts; ConnectTimeout and ServerAlive bound a dead network.
// Commands run as root: directly when the login is root, else through `sudo -n`, which fails
// instead of asking for a password.
//
// Commands go through the master only (a fallback direct connection is disabled), so a master
// that died shows as exactly that: the command's exit 255 with the master gone is "connection
// lost", never a silent reconnect. Reconnect() opens a fresh master deliberately.
//
// Each failure is a named Status (the message starts with the host, then the phrase in quotes):
//   Unauthenticated     "authentication refused"       the key or agent was not accepted
//   FailedPrecondition  "host key unknown"             no key for the host in temper's known_hosts
//   PermissionDenied    "host key CHANGED"             the host offered a different key than recorded
//   PermissionDenied    "sudo needs a password"        the login is not root and sudo -n is refused
//   PermissionDenied    "sudo refused"                 the login may not use sudo at all
//   Unavailable         "connection refused"           nothing listens on the port
//   DeadlineExceeded    "connection timed out"         no answer within connect_timeout
//   Unavailable         "host unreachable"             no route, name not resolved, network down
//   Aborted             "connection lost"              the master died (mid-command or between)
//   Unavailable         "ssh failed"                   anything else ssh reported (its message)
// The ssh processes and the clock (idle time) go through a temper::Env (env.h), the real one unless
// a test passes its own: a process that cannot start is an IOError from the call that needed it.
// Thread safety: not thread-safe; one owner drives a connection (as a Target).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/log.h"
#include "common/status.h"
#include "platform/env.h"
#include "stig/ssh/remote_shell.h"

namespace temper::stig {

struct SshEndpoint {
  std::string user;
  std::string host;  // a name or an address (IPv6 without brackets)
  std::uint16_t port = 22;

  // "user@host", "user@host:port" or "user@[v6addr]:port". InvalidArgument says what is wrong.
  static Result<SshEndpoint> Parse(std::string_view spec);
  // user@host:port (brackets around an IPv6 address).
  std::string ToString() const;
  // How known_hosts names the host: "host", or "[host]:port" when the port is not 22.
  std::string KnownHostsName() const;
};

struct SshOptions {
  SshEndpoint endpoint;
  // A private key file; empty authenticates with the agent (agent_socket, else $SSH_AUTH_SOCK).
  std::string identity_file;
  std::string agent_socket;
  // temper's own known_hosts file (not ~/.ssh/known_hosts); it must exist.
  std::string known_hosts;
  // Holds the master's socket; created 0700 when missing, refused when others can enter it.
  std::string control_dir;
  std::chrono::seconds connect_timeout{10};
  // A silent server is dropped after interval × count_max.
  std::chrono::seconds alive_interval{5};
  int alive_count_max = 3;
  // An idle master exits after this long (a crashed daemon leaves none behind for longer); the
  // next command opens a fresh one, as idling is not a lost connection.
  std::chrono::seconds control_persist{1800};
  std::string ssh_program = "/usr/bin/ssh";

  // InvalidArgument naming the field: empty user/host/known_hosts/control_dir, a bad port or timing.
  Status Validate() const;
};

class SshConnection final : public RemoteShell {
 public:
  // Opens the master and checks that commands can run as root (sudo -n when the login is not
  // root). Errors: the named failures above; InvalidArgument for bad options; FailedPrecondition
  // when known_hosts or the identity file is missing, or control_dir is not private.
  // `log` and `env` must outlive the connection.
  static Result<std::unique_ptr<SshConnection>> Open(SshOptions options, const Logger& log, Env& env = Env::Default());
  // Closes the master.
  ~SshConnection() override;
  SshConnection(const SshConnection&) = delete;
  SshConnection& operator=(const SshConnection&) = delete;

  const std::string& host_name() const override { return name_; }
  const SshOptions& options() const { return options_; }
  bool login_is_root() const { return options_.endpoint.user == "root"; }

  // See RemoteShell. Errors: "connection lost" (Aborted) when the master is gone; "sudo needs a
  // password" when sudo started asking; "ssh failed" when the ssh client itself failed.
  Result<ProcessResult> Exec(const std::vector<std::string>& argv, std::string_view stdin_data,
                             const SandboxLimits& limits) override;

  // As Exec with no stdin, but the program's stdout goes to `stdout_fd` as it comes (for output
  // too large to hold: a host's whole file system as an archive) and ProcessResult::out stays
  // empty. limits.stop_requested ends the local client at once (the host's `timeout` ends the
  // program there). The caller keeps `stdout_fd` open until this returns. Errors as Exec.
  Result<ProcessResult> ExecToFd(const std::vector<std::string>& argv, const SandboxLimits& limits, int stdout_fd);

  // True while the master answers (a local socket query; no network round trip).
  bool MasterAlive() const;
  // True when the master is gone because it sat idle for control_persist (not a lost connection).
  bool MasterExpired() const;
  // Drops the current master (if any) and opens a fresh one. Errors as Open.
  Status Reconnect();
  // A login on a new connection that bypasses the master, then `sudo -n true` when the login is not
  // root: what a change to sshd, PAM, sudo or the firewall must leave working. Errors as Open.
  Status CheckFreshLogin() const;

 private:
  SshConnection(SshOptions options, std::string control_path, const Logger& log, Env& env);
  // ssh's argv up to and including the destination: the common options plus `extra`.
  std::vector<std::string> SshArgv(const std::vector<std::string>& extra) const;
  // `argv` as one command line for the login shell: sudo (when not root), limits, the program.
  std::string RemoteCommandLine(const std::vector<std::string>& argv, const SandboxLimits& limits) const;
  std::vector<std::string> Environment() const;
  // Exec and ExecToFd: `stdout_fd` -1 keeps stdout in the result.
  Result<ProcessResult> Run(const std::vector<std::string>& argv, std::string_view stdin_data,
                            const SandboxLimits& limits, int stdout_fd);
  Status StartMaster();
  void StopMaster();
  // The named failure for a connection attempt that ended with `r`.
  Status ConnectFailure(const ProcessResult& r) const;

  SshOptions options_;
  std::string name_;
  std::string control_path_;
  const Logger& log_;
  Env& env_;
  std::chrono::steady_clock::time_point last_used_;
};

}  // namespace temper::stig
