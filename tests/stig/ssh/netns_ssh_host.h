// NetnsSshHost: a real OpenSSH server on its own network, serving a test root as its "/".
//
// Each host is a network namespace made with `ip netns` and joined to the test's namespace by a
// veth pair with addresses of its own (10.192.0.0/14, one /30 per host, derived from the test's
// pid so parallel tests do not collide), and an sshd from the test root chrooted into a private
// overlay of the SSH test root (ssh_test_root.h), with fresh host keys, its own /proc and its own
// pid namespace. Killing it kills sshd and every session at once: that is how tests lose a
// connection mid-command.
//
// The test process first moves into a private mount namespace (once), so the overlay mounts exist
// only for it and its children and vanish with it even if it crashes; the destructor kills sshd,
// deletes the veth pair and the namespace, unmounts and removes the host's directory.
// Requires root, /usr/sbin/ip and /usr/bin/unshare; Available() says why not when they are missing.
// Thread safety: StopSshd may be called from another thread while a command runs; the rest is
// single-threaded.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "stig/ssh/ssh_connection.h"
#include "stig/ssh/ssh_test_root.h"

namespace temper::testing {

class NetnsSshHost {
 public:
  // Empty when SSH test hosts can be made here; otherwise why not (for a skip message).
  static std::string Unavailable();

  // Creates the tree, the namespace and the link, then starts sshd and waits until it accepts
  // connections.
  static Result<std::unique_ptr<NetnsSshHost>> Start(const SshTestRoot& root, const std::string& name);
  ~NetnsSshHost();
  NetnsSshHost(const NetnsSshHost&) = delete;
  NetnsSshHost& operator=(const NetnsSshHost&) = delete;

  const std::string& address() const { return address_; }
  // The host's "/" as seen from the test process.
  const std::string& tree() const { return merged_; }
  // A directory for the test's own files (known_hosts, control sockets live elsewhere), removed with the host.
  const std::string& dir() const { return dir_; }
  // The SHA256 fingerprint of the host key sshd serves.
  const std::string& fingerprint() const { return fingerprint_; }
  stig::SshEndpoint Endpoint(const std::string& user) const { return {user, address_, 22}; }

  Status StartSshd();
  // Kills sshd and every session (the whole pid namespace); the tree stays as it is.
  void StopSshd();
  // A new host key, served from the next StartSshd.
  Status ReplaceHostKey();

 private:
  NetnsSshHost() = default;
  Status Setup(const SshTestRoot& root, const std::string& name);
  Status WaitForPort();

  std::string dir_, merged_, netns_, veth_, address_, fingerprint_;
  bool mounted_ = false, netns_made_ = false, veth_made_ = false;
  pid_t sshd_ = -1;
};

// SshOptions for a test host: key auth with `key`, temper's known_hosts at `known_hosts`, a short
// private control directory (removed by ScopedControlDir).
stig::SshOptions TestSshOptions(const stig::SshEndpoint& endpoint, const std::string& key,
                                const std::string& known_hosts, const std::string& control_dir);

// A private directory in the test process's temporary directory (scratch_space.h) for ssh control
// sockets, whose paths must stay short.
class ScopedControlDir {
 public:
  ScopedControlDir();
  ~ScopedControlDir();
  ScopedControlDir(const ScopedControlDir&) = delete;
  ScopedControlDir& operator=(const ScopedControlDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace temper::testing
