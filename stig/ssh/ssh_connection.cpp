#include "stig/ssh/ssh_connection.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "common/fnv1a.h"

namespace temper::stig {
namespace {

namespace fs = std::filesystem;

// sockaddr_un holds 108 bytes; ssh first binds the socket at the path plus a 17-byte suffix.
constexpr std::size_t kMaxControlPath = 90;
// Past the remote `timeout`, the local client waits this much longer for the exit status.
constexpr auto kLocalGrace = std::chrono::seconds(15);

bool Contains(const std::string& text, std::string_view what) { return text.find(what) != std::string::npos; }

std::string Trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  if (text.size() > 800) text = "…" + text.substr(text.size() - 800);
  return text;
}

Status PrepareControlDir(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    fs::create_directories(dir, ec);
    if (ec) return Status::IOError(fmt::format("creating the ssh control directory {}: {}", dir, ec.message()));
    if (::chmod(dir.c_str(), 0700) != 0) return Status::FromErrno(errno, "chmod 0700 " + dir);
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return Status::FromErrno(errno, "stat " + dir);
  if (!S_ISDIR(st.st_mode))
    return Status::FailedPrecondition(fmt::format("ssh control directory {} is not a directory", dir));
  // Whoever can enter it can use the master's socket, i.e. run commands as root on the host.
  if (st.st_uid != ::geteuid() || (st.st_mode & 077) != 0) {
    return Status::FailedPrecondition(fmt::format(
        "ssh control directory {} must be owned by uid {} with mode 0700 (it is uid {}, mode {:o}): its sockets "
        "give root on the hosts",
        dir, ::geteuid(), st.st_uid, st.st_mode & 07777));
  }
  return Status::OK();
}

}  // namespace

Result<SshEndpoint> SshEndpoint::Parse(std::string_view spec) {
  SshEndpoint e;
  std::size_t at = spec.find('@');
  if (at == std::string_view::npos || at == 0) {
    return Status::InvalidArgument(fmt::format("host '{}' must be user@name[:port]", spec));
  }
  e.user = std::string(spec.substr(0, at));
  std::string_view rest = spec.substr(at + 1);
  std::string_view port;
  bool has_port = false;
  if (!rest.empty() && rest.front() == '[') {
    std::size_t close = rest.find(']');
    if (close == std::string_view::npos)
      return Status::InvalidArgument(fmt::format("host '{}': '[' without ']'", spec));
    e.host = std::string(rest.substr(1, close - 1));
    std::string_view after = rest.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':')
        return Status::InvalidArgument(fmt::format("host '{}': expected ':port' after ']'", spec));
      port = after.substr(1);
      has_port = true;
    }
  } else {
    std::size_t colon = rest.find(':');
    e.host = std::string(rest.substr(0, colon));
    if (colon != std::string_view::npos) {
      if (rest.find(':', colon + 1) != std::string_view::npos) {
        return Status::InvalidArgument(fmt::format("host '{}': write an IPv6 address as user@[address]:port", spec));
      }
      port = rest.substr(colon + 1);
      has_port = true;
    }
  }
  for (char c : e.user) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) {
      return Status::InvalidArgument(
          fmt::format("host '{}': user name '{}' has a character other than letters, digits, "
                      "'_', '-' and '.'",
                      spec, e.user));
    }
  }
  if (e.host.empty()) return Status::InvalidArgument(fmt::format("host '{}': no host name", spec));
  for (char c : e.host) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == ':' || c == '_')) {
      return Status::InvalidArgument(fmt::format("host '{}': '{}' is not a host name or address", spec, e.host));
    }
  }
  if (e.host.front() == '-')
    return Status::InvalidArgument(fmt::format("host '{}': a host name cannot start with '-'", spec));
  if (has_port) {
    unsigned value = 0;
    bool valid = !port.empty() && port.size() <= 5;
    for (char c : port) {
      valid = valid && std::isdigit(static_cast<unsigned char>(c));
      if (valid) value = value * 10 + static_cast<unsigned>(c - '0');
    }
    if (!valid || value == 0 || value > 65535) {
      return Status::InvalidArgument(fmt::format("host '{}': port '{}' is not a number from 1 to 65535", spec, port));
    }
    e.port = static_cast<std::uint16_t>(value);
  }
  return e;
}

std::string SshEndpoint::ToString() const {
  bool v6 = host.find(':') != std::string::npos;
  return fmt::format("{}@{}{}{}:{}", user, v6 ? "[" : "", host, v6 ? "]" : "", port);
}

std::string SshEndpoint::KnownHostsName() const { return port == 22 ? host : fmt::format("[{}]:{}", host, port); }

Status SshOptions::Validate() const {
  if (endpoint.user.empty()) return Status::InvalidArgument("ssh: user is empty");
  if (endpoint.host.empty()) return Status::InvalidArgument("ssh: host is empty");
  if (endpoint.port == 0) return Status::InvalidArgument("ssh: port must be 1-65535");
  if (known_hosts.empty()) return Status::InvalidArgument("ssh: known_hosts is empty (temper keeps its own file)");
  if (control_dir.empty()) return Status::InvalidArgument("ssh: control_dir is empty");
  if (connect_timeout.count() < 1) return Status::InvalidArgument("ssh: connect_timeout must be at least 1 s");
  if (alive_interval.count() < 1 || alive_count_max < 1) {
    return Status::InvalidArgument("ssh: alive_interval and alive_count_max must be at least 1");
  }
  if (control_persist.count() < 60) return Status::InvalidArgument("ssh: control_persist must be at least 60 s");
  return Status::OK();
}

SshConnection::SshConnection(SshOptions options, std::string control_path, const Logger& log, Env& env)
    : options_(std::move(options)),
      name_(options_.endpoint.ToString()),
      control_path_(std::move(control_path)),
      log_(log),
      env_(env),
      last_used_(env.SteadyNow()) {}

Result<std::unique_ptr<SshConnection>> SshConnection::Open(SshOptions options, const Logger& log, Env& env) {
  TEMPER_RETURN_IF_ERROR(options.Validate());
  const std::string name = options.endpoint.ToString();
  if (::access(options.ssh_program.c_str(), X_OK) != 0) {
    return Status::FailedPrecondition(
        fmt::format("{} is missing (apt-get install openssh-client)", options.ssh_program));
  }
  std::error_code ec;
  if (!fs::is_regular_file(options.known_hosts, ec)) {
    return Status::FailedPrecondition(fmt::format(
        "ssh {}: \"host key unknown\": temper's known_hosts file {} does not exist yet; check the host's fingerprint "
        "and accept it (temper hosts accept)",
        name, options.known_hosts));
  }
  if (!options.identity_file.empty() && ::access(options.identity_file.c_str(), R_OK) != 0) {
    return Status::FailedPrecondition(
        fmt::format("ssh {}: the key file {} cannot be read: {}", name, options.identity_file, std::strerror(errno)));
  }
  TEMPER_RETURN_IF_ERROR(PrepareControlDir(options.control_dir));
  std::string control_path = options.control_dir + "/m-" + Fnv1aHex(name);
  if (control_path.size() > kMaxControlPath) {
    return Status::InvalidArgument(
        fmt::format("ssh control directory {} is too long for a socket path ({} bytes at most)", options.control_dir,
                    kMaxControlPath - 19));
  }
  std::unique_ptr<SshConnection> c(new SshConnection(std::move(options), std::move(control_path), log, env));
  TEMPER_RETURN_IF_ERROR(c->StartMaster());
  return c;
}

SshConnection::~SshConnection() { StopMaster(); }

std::vector<std::string> SshConnection::Environment() const {
  std::vector<std::string> env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"};
  if (const char* home = std::getenv("HOME")) env.push_back(std::string("HOME=") + home);
  if (!options_.agent_socket.empty()) {
    env.push_back("SSH_AUTH_SOCK=" + options_.agent_socket);
  } else if (const char* sock = std::getenv("SSH_AUTH_SOCK")) {
    env.push_back(std::string("SSH_AUTH_SOCK=") + sock);
  }
  return env;
}

std::vector<std::string> SshConnection::SshArgv(const std::vector<std::string>& extra) const {
  std::vector<std::string> argv = {options_.ssh_program,
                                   "-F",
                                   "none",
                                   "-T",
                                   "-p",
                                   std::to_string(options_.endpoint.port),
                                   "-l",
                                   options_.endpoint.user,
                                   "-o",
                                   "BatchMode=yes",
                                   "-o",
                                   "StrictHostKeyChecking=yes",
                                   "-o",
                                   "UserKnownHostsFile=" + options_.known_hosts,
                                   "-o",
                                   "GlobalKnownHostsFile=/dev/null",
                                   "-o",
                                   "CheckHostIP=no",
                                   "-o",
                                   "UpdateHostKeys=no",
                                   "-o",
                                   "PasswordAuthentication=no",
                                   "-o",
                                   "KbdInteractiveAuthentication=no",
                                   "-o",
                                   "ConnectionAttempts=1",
                                   "-o",
                                   fmt::format("ConnectTimeout={}", options_.connect_timeout.count()),
                                   "-o",
                                   fmt::format("ServerAliveInterval={}", options_.alive_interval.count()),
                                   "-o",
                                   fmt::format("ServerAliveCountMax={}", options_.alive_count_max),
                                   "-o",
                                   "LogLevel=ERROR"};
  if (!options_.identity_file.empty()) {
    argv.insert(argv.end(), {"-i", options_.identity_file, "-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none"});
  }
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

std::string SshConnection::RemoteCommandLine(const std::vector<std::string>& argv, const SandboxLimits& limits) const {
  // The login shell parses this line; the program then runs under /bin/sh with a fixed PATH and
  // locale, bounded on the host by ulimit and timeout (so it stops there too, not just here).
  std::string inner =
      "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin; export PATH; "
      "LC_ALL=C; export LC_ALL; umask 022; ";
  if (limits.memory_limit_bytes > 0)
    inner += fmt::format("ulimit -v {} 2>/dev/null; ", limits.memory_limit_bytes / 1024);
  auto seconds = std::chrono::duration_cast<std::chrono::seconds>(limits.timeout).count();
  inner += limits.timeout.count() > 0 ? fmt::format("exec timeout -k 5 {} \"$@\"", std::max<long long>(1, seconds))
                                      : std::string("exec \"$@\"");
  std::string line = login_is_root() ? "" : "sudo -n -H -- ";
  line += "/bin/sh -c " + ShellQuote(inner) + " temper";
  for (const std::string& a : argv) line += " " + ShellQuote(a);
  return line;
}

Status SshConnection::ConnectFailure(const ProcessResult& r) const {
  const std::string& e = r.err;
  const std::string detail = Trimmed(e);
  if (r.timed_out) {
    return Status::DeadlineExceeded(fmt::format("ssh {}: \"connection timed out\" ({})", name_, r.Describe()));
  }
  if (Contains(e, "REMOTE HOST IDENTIFICATION HAS CHANGED") || Contains(e, "Host key for ") ||
      Contains(e, "has changed and you have requested strict checking")) {
    return Status::PermissionDenied(fmt::format(
        "ssh {}: \"host key CHANGED\": the host offered a key that differs from the one in {}; this may be an attack "
        "or a reinstalled host. Verify its new fingerprint out of band before accepting it (temper hosts accept). "
        "ssh said: {}",
        name_, options_.known_hosts, detail));
  }
  if (Contains(e, "host key is known for") || Contains(e, "Host key verification failed")) {
    return Status::FailedPrecondition(
        fmt::format("ssh {}: \"host key unknown\": {} has no key for {}; check the host's fingerprint and accept it "
                    "(temper hosts accept). ssh said: {}",
                    name_, options_.known_hosts, options_.endpoint.KnownHostsName(), detail));
  }
  if (Contains(e, "Permission denied (")) {
    return Status::Unauthenticated(
        fmt::format("ssh {}: \"authentication refused\" with {}: {}", name_,
                    options_.identity_file.empty() ? "the agent's keys" : options_.identity_file, detail));
  }
  if (Contains(e, "Connection refused")) {
    return Status::Unavailable(fmt::format("ssh {}: \"connection refused\": nothing accepts connections on port {}",
                                           name_, options_.endpoint.port));
  }
  if (Contains(e, "timed out")) {
    return Status::DeadlineExceeded(fmt::format("ssh {}: \"connection timed out\" after {} s: {}", name_,
                                                options_.connect_timeout.count(), detail));
  }
  if (Contains(e, "No route to host") || Contains(e, "Network is unreachable") ||
      Contains(e, "Could not resolve hostname") || Contains(e, "Name or service not known")) {
    return Status::Unavailable(fmt::format("ssh {}: \"host unreachable\": {}", name_, detail));
  }
  if (r.exit_code == 1 && !login_is_root()) {
    if (Contains(e, "a password is required")) {
      return Status::PermissionDenied(fmt::format(
          "ssh {}: \"sudo needs a password\": {} may not run commands as root without one; give it NOPASSWD in "
          "sudoers or log in as root",
          name_, options_.endpoint.user));
    }
    if (Contains(e, "sudo:") || Contains(e, "sudo ")) {
      return Status::PermissionDenied(fmt::format("ssh {}: \"sudo refused\": {}", name_, detail));
    }
  }
  return Status::Unavailable(fmt::format("ssh {}: \"ssh failed\" ({}): {}", name_, r.Describe(), detail));
}

Status SshConnection::StartMaster() {
  StopMaster();
  std::error_code ec;
  fs::remove(control_path_, ec);  // a socket left by a crashed master would disable multiplexing
  ProcessSpec spec;
  spec.argv =
      SshArgv({"-o", "ControlMaster=yes", "-o", fmt::format("ControlPersist={}", options_.control_persist.count()),
               "-o", "ControlPath=" + control_path_});
  spec.argv.insert(spec.argv.end(), {"--", options_.endpoint.host, login_is_root() ? "true" : "sudo -n true"});
  spec.env = Environment();
  spec.timeout = options_.connect_timeout + kLocalGrace;
  spec.max_output_bytes = 64 << 10;
  log_.Debug("ssh {}: opening the master connection", name_);
  TEMPER_ASSIGN_OR_RETURN(ProcessResult r, env_.RunProcess(spec));
  last_used_ = env_.SteadyNow();
  if (!r.Succeeded()) {
    Status failure = ConnectFailure(r);
    StopMaster();
    return failure;
  }
  if (!MasterAlive()) {
    return Status::Unavailable(
        fmt::format("ssh {}: \"ssh failed\": the login worked but no master connection stayed "
                    "open at {}",
                    name_, control_path_));
  }
  return Status::OK();
}

void SshConnection::StopMaster() {
  std::error_code ec;
  if (!fs::exists(control_path_, ec)) return;
  ProcessSpec spec;
  spec.argv = SshArgv({"-o", "ControlPath=" + control_path_, "-O", "exit"});
  spec.argv.insert(spec.argv.end(), {"--", options_.endpoint.host});
  spec.env = Environment();
  spec.timeout = std::chrono::seconds(10);
  Result<ProcessResult> r = env_.RunProcess(spec);
  if (!r.ok()) log_.Warning("ssh {}: closing the master: {}", name_, r.status().ToString());
}

bool SshConnection::MasterAlive() const {
  // A live master accepts on its socket; a dead one leaves none, or one that refuses. This is what
  // `ssh -O check` learns, without starting a client for it.
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, control_path_.c_str(), std::min(control_path_.size(), sizeof addr.sun_path - 1));
  bool alive = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return alive;
}

bool SshConnection::MasterExpired() const {
  auto idle = env_.SteadyNow() - last_used_;
  return !MasterAlive() && idle >= options_.control_persist - std::chrono::seconds(5);
}

Status SshConnection::Reconnect() {
  log_.Info("ssh {}: opening a fresh connection", name_);
  return StartMaster();
}

Status SshConnection::CheckFreshLogin() const {
  ProcessSpec spec;
  spec.argv = SshArgv({"-o", "ControlPath=none", "-o", "ControlMaster=no"});
  spec.argv.insert(spec.argv.end(), {"--", options_.endpoint.host, login_is_root() ? "true" : "sudo -n true"});
  spec.env = Environment();
  spec.timeout = options_.connect_timeout + kLocalGrace;
  spec.max_output_bytes = 64 << 10;
  TEMPER_ASSIGN_OR_RETURN(ProcessResult r, env_.RunProcess(spec));
  if (!r.Succeeded()) return ConnectFailure(r).WithContext("a fresh login");
  return Status::OK();
}

Result<ProcessResult> SshConnection::Exec(const std::vector<std::string>& argv, std::string_view stdin_data,
                                          const SandboxLimits& limits) {
  return Run(argv, stdin_data, limits, -1);
}

Result<ProcessResult> SshConnection::ExecToFd(const std::vector<std::string>& argv, const SandboxLimits& limits,
                                              int stdout_fd) {
  if (stdout_fd < 0) return Status::InvalidArgument("ssh " + name_ + ": ExecToFd needs a descriptor for stdout");
  return Run(argv, {}, limits, stdout_fd);
}

Result<ProcessResult> SshConnection::Run(const std::vector<std::string>& argv, std::string_view stdin_data,
                                         const SandboxLimits& limits, int stdout_fd) {
  if (argv.empty()) return Status::InvalidArgument("ssh " + name_ + ": empty command");
  if (!MasterAlive()) {
    // An idle master ends by itself after control_persist; only a master that died while in use
    // is a lost connection.
    if (!MasterExpired()) {
      return Status::Aborted(fmt::format("ssh {}: \"connection lost\": the master connection is gone", name_));
    }
    TEMPER_RETURN_IF_ERROR(StartMaster());
  }
  ProcessSpec spec;
  // ProxyCommand=/bin/false: if the master vanishes, ssh must fail rather than connect anew.
  spec.argv =
      SshArgv({"-o", "ControlMaster=no", "-o", "ControlPath=" + control_path_, "-o", "ProxyCommand=/bin/false"});
  spec.argv.insert(spec.argv.end(), {"--", options_.endpoint.host, RemoteCommandLine(argv, limits)});
  spec.env = Environment();
  spec.stdin_data = std::string(stdin_data);
  spec.stdout_fd = stdout_fd;
  // Only a stream is cut short locally: Exec's commands (the undo journal's among them) always run
  // to their end, as they always have.
  if (stdout_fd >= 0 && limits.stop_requested) spec.stop_when = limits.stop_requested;
  spec.max_output_bytes = limits.max_output_bytes;
  if (limits.timeout.count() > 0) {
    spec.timeout = limits.timeout + std::chrono::seconds(5) + kLocalGrace;
  }
  TEMPER_ASSIGN_OR_RETURN(ProcessResult r, env_.RunProcess(spec));
  last_used_ = env_.SteadyNow();
  if (r.timed_out) {
    // The host did not answer within the command's own limit plus grace: the connection is suspect.
    if (!MasterAlive()) {
      return Status::Aborted(
          fmt::format("ssh {}: \"connection lost\" while running {} ({})", name_, argv[0], r.Describe()));
    }
    return r;
  }
  if (r.term_signal == 0 && r.exit_code == 255 && !MasterAlive()) {
    return Status::Aborted(
        fmt::format("ssh {}: \"connection lost\" while running {}; its outcome on the host is unknown: {}", name_,
                    argv[0], Trimmed(r.err)));
  }
  if (!login_is_root() && r.term_signal == 0 && r.exit_code == 1 && r.err.starts_with("sudo: a password is required")) {
    return Status::PermissionDenied(
        fmt::format("ssh {}: \"sudo needs a password\": {} may no longer run commands as root "
                    "without one",
                    name_, options_.endpoint.user));
  }
  // `timeout` exits 124 (or 137 after its KILL) when the program ran past the limit.
  auto elapsed = std::chrono::duration<double>(r.seconds);
  if (limits.timeout.count() > 0 && r.term_signal == 0 && (r.exit_code == 124 || r.exit_code == 137) &&
      elapsed >= limits.timeout) {
    r.timed_out = true;
  }
  return r;
}

}  // namespace temper::stig
