// RootfsBuilder: builds the Debian 12 root that rootfs targets start from, once, and reuses it.
//
// The root is a `mmdebstrap --variant=minbase` Debian 12 with the subsystems the Ubuntu 20.04
// STIG profile configures (sshd, sudo, auditd, PAM pwquality, rsyslog, systemd for systemctl),
// presented as Ubuntu 20.04 through /etc/lsb-release (SSG's CPE check for ubuntu2004 reads
// DISTRIB_ID and DISTRIB_CODENAME there). The packages STIG fixes install (aide, apparmor, ufw,
// chrony, vlock, ...) are downloaded into the apt cache but not installed, so fixes can install
// them in a sandbox that has no network, and the rules that want them start out failing.
//
// A build is keyed by its spec: `dir`/stamp.json records the key, and EnsureRootfs rebuilds when
// the package lists, suite or mirror change. Builds of one `dir` are serialised with a lock file,
// so concurrent callers wait for one build instead of racing.
// Requires root and network access to the mirror (mmdebstrap --mode=root).
#pragma once

#include <string>
#include <vector>

#include "common/log.h"
#include "common/status.h"

namespace temper::stig {

struct RootfsSpec {
  std::string suite = "bookworm";
  std::string mirror = "http://deb.debian.org/debian";
  std::vector<std::string> packages = DefaultPackages();
  std::vector<std::string> cached_packages = DefaultCachedPackages();

  static std::vector<std::string> DefaultPackages();
  static std::vector<std::string> DefaultCachedPackages();
  // A hex digest of every field and of the builder's own recipe version.
  std::string Key() const;
};

struct RootfsBuild {
  std::string root;    // `dir`/root: pass it as a target's base
  bool built = false;  // false when the cached root was reused
  double seconds = 0;
};

// Ensures `dir`/root holds the root `spec` describes, building it when missing or stale.
// Errors: FailedPrecondition when not root or mmdebstrap is missing; Unavailable when mmdebstrap
// fails (the message ends with its last output lines, e.g. a mirror that cannot be reached).
Result<RootfsBuild> EnsureRootfs(const std::string& dir, const RootfsSpec& spec, const Logger& log);

}  // namespace temper::stig
