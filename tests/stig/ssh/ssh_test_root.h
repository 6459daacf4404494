// The root file system SSH test hosts serve as their "/": the stig suite's shared Debian 12 root
// (tests/stig/rootfs_fixture.h) with one cached overlay layer on top that adds what a managed host
// has and the lab root lacks: openscap-scanner (oscap on the host), attr and acl (getfattr for the
// undo journal's checks), and the logins the tests use:
//   root   key login (client_key)
//   admin  key login, sudo without a password
//   clerk  key login, sudo that asks for a password (so sudo -n fails)
//
// The layer is built once per build tree (apt in a chroot of an overlay over the shared root, in a
// private mount namespace; about half a minute with network) and rebuilt only when the shared root
// or this recipe changes, like the shared root itself. Every host then mounts its own overlay over
// layer + root, so tests never change the cache.
// Requires root. Thread safety: EnsureSshTestRoot serialises builders with a lock file.
#pragma once

#include <string>

#include "common/log.h"
#include "common/status.h"

namespace temper::testing {

struct SshTestRoot {
  std::string base;        // the shared root (lowest layer)
  std::string layer;       // the cached layer above it
  std::string client_key;  // private key authorised for root, admin and clerk
  std::string wrong_key;   // private key authorised for nobody
};

// The shared root must already exist (the stig_rootfs fixture builds it). Errors: FailedPrecondition
// when it does not or when not root; Unavailable when apt in the chroot fails (no network).
Result<SshTestRoot> EnsureSshTestRoot(const Logger& log);

// The build directory the layer lives in (next to the shared root).
std::string SshTestRootDir();

}  // namespace temper::testing
