#include "stig/ssh/ssh_known_hosts.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "platform/process.h"

namespace temper::stig {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> Words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// True when the known_hosts line's host field (comma-separated names) names `name`.
bool LineNames(const std::string& line, const std::string& name) {
  std::vector<std::string> w = Words(line);
  if (w.size() < 3 || w[0].starts_with("#") || w[0].starts_with("@")) return false;
  std::istringstream names(w[0]);
  for (std::string n; std::getline(names, n, ',');) {
    if (n == name) return true;
  }
  return false;
}

// The SHA256 fingerprint of one known_hosts line, from ssh-keygen.
Result<std::string> Fingerprint(const std::string& line) {
  ProcessSpec spec;
  spec.argv = {"/usr/bin/ssh-keygen", "-l", "-E", "sha256", "-f", "-"};
  spec.env = {"PATH=/usr/bin:/bin", "LC_ALL=C"};
  spec.stdin_data = line + "\n";
  spec.timeout = std::chrono::seconds(10);
  TEMPER_ASSIGN_OR_RETURN(ProcessResult r, RunProcess(spec));
  std::vector<std::string> w = Words(r.out);
  if (!r.Succeeded() || w.size() < 2 || !w[1].starts_with("SHA256:")) {
    return Status::Internal(
        fmt::format("ssh-keygen could not fingerprint the key \"{}\" ({}): {}", line, r.Describe(), r.err));
  }
  return w[1];
}

Result<HostKey> KeyOfLine(const std::string& line) {
  std::vector<std::string> w = Words(line);
  HostKey key;
  key.type = w.size() >= 2 ? w[1] : "";
  key.line = w.size() >= 3 ? fmt::format("{} {} {}", w[0], w[1], w[2]) : line;
  TEMPER_ASSIGN_OR_RETURN(key.fingerprint, Fingerprint(key.line));
  return key;
}

}  // namespace

Result<std::vector<HostKey>> ScanHostKeys(const SshEndpoint& endpoint, std::chrono::seconds timeout) {
  ProcessSpec spec;
  spec.argv = {"/usr/bin/ssh-keyscan",
               "-T",
               std::to_string(std::max<long long>(1, timeout.count())),
               "-p",
               std::to_string(endpoint.port),
               "-t",
               "ed25519,ecdsa,rsa",
               "--",
               endpoint.host};
  spec.env = {"PATH=/usr/bin:/bin", "LC_ALL=C"};
  spec.timeout = timeout + std::chrono::seconds(10);
  TEMPER_ASSIGN_OR_RETURN(ProcessResult r, RunProcess(spec));
  std::vector<HostKey> keys;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line.starts_with("#")) continue;
    TEMPER_ASSIGN_OR_RETURN(HostKey key, KeyOfLine(line));
    keys.push_back(std::move(key));
  }
  if (keys.empty()) {
    return Status::Unavailable(fmt::format("{} offered no SSH host key on port {} ({}): {}", endpoint.host,
                                           endpoint.port, r.Describe(), r.err));
  }
  return keys;
}

Result<std::vector<HostKey>> RecordedHostKeys(const std::string& known_hosts, const SshEndpoint& endpoint) {
  std::vector<HostKey> keys;
  std::ifstream in(known_hosts);
  if (!in) return keys;
  const std::string name = endpoint.KnownHostsName();
  for (std::string line; std::getline(in, line);) {
    if (!LineNames(line, name)) continue;
    TEMPER_ASSIGN_OR_RETURN(HostKey key, KeyOfLine(line));
    keys.push_back(std::move(key));
  }
  return keys;
}

Result<HostKey> AcceptHostKey(const std::string& known_hosts, const SshEndpoint& endpoint,
                              const std::string& fingerprint, std::chrono::seconds timeout) {
  if (!fingerprint.starts_with("SHA256:") || fingerprint.size() < 20) {
    return Status::InvalidArgument(
        fmt::format("fingerprint '{}' is not a SHA256 fingerprint (SHA256:..., as `ssh-keygen -lf "
                    "/etc/ssh/ssh_host_ed25519_key.pub` "
                    "prints it on the host)",
                    fingerprint));
  }
  TEMPER_ASSIGN_OR_RETURN(std::vector<HostKey> offered, ScanHostKeys(endpoint, timeout));
  const HostKey* chosen = nullptr;
  for (const HostKey& k : offered) {
    if (k.fingerprint == fingerprint) chosen = &k;
  }
  if (chosen == nullptr) {
    std::string list;
    for (const HostKey& k : offered) list += fmt::format("\n  {} {}", k.type, k.fingerprint);
    return Status::NotFound(
        fmt::format("{} offers no host key with fingerprint {}; it offers:{}", endpoint.ToString(), fingerprint, list));
  }

  fs::path file(known_hosts);
  std::error_code ec;
  if (file.has_parent_path() && !fs::exists(file.parent_path(), ec)) {
    fs::create_directories(file.parent_path(), ec);
    if (ec) return Status::IOError(fmt::format("creating {}: {}", file.parent_path().string(), ec.message()));
    fs::permissions(file.parent_path(), fs::perms::owner_all, fs::perm_options::replace, ec);
  }
  const std::string lock_path = known_hosts + ".lock";
  int lock = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock < 0) return Status::FromErrno(errno, "opening " + lock_path);
  struct Unlock {
    int fd;
    ~Unlock() { ::close(fd); }
  } unlock{lock};
  while (::flock(lock, LOCK_EX) != 0) {
    if (errno != EINTR) return Status::FromErrno(errno, "locking " + lock_path);
  }

  const std::string name = endpoint.KnownHostsName();
  std::string kept;
  {
    std::ifstream in(known_hosts);
    for (std::string line; std::getline(in, line);) {
      if (!LineNames(line, name)) kept += line + "\n";
    }
  }
  kept += chosen->line + "\n";
  const std::string tmp = known_hosts + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << kept;
    out.close();
    if (!out) return Status::IOError("writing " + tmp);
  }
  fs::permissions(tmp, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace, ec);
  fs::rename(tmp, known_hosts, ec);
  if (ec) return Status::IOError(fmt::format("replacing {}: {}", known_hosts, ec.message()));
  return *chosen;
}

}  // namespace temper::stig
