// LoginGuard: refuses the Worker's changes that would lock temper out of an SSH host.
//
// temper reaches the host as one login user on one port. A STIG fix that locks, expires or deletes
// that user, changes its shell to nologin, takes it out of the sudo group, rewrites its
// authorized_keys or makes the firewall drop the SSH port would cut the daemon off mid-batch, and
// the revert would have no way in. These are refused before they run, with the reason, so the
// model can choose another way (rules that really require them are left to a human).
//
// Commands are read with policy/shell_split (runners such as sudo, env -S and flock peeled, the
// scripts of bash -c and eval parsed), in addition to the Worker's general command policy. Paths
// are judged as written; SshTarget resolves them on the host (symlinks followed) and asks again
// with what they resolve to. It cannot see every way to lock a host; the real verification is the
// health check after every change (a fresh SSH login and sudo on a new connection while the old
// one stays open), which reverts what slipped past.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "policy/shell_split.h"

namespace temper::stig {

struct LoginIdentity {
  std::string user;         // the login user (root included)
  std::string home;         // its home directory on the host
  std::uint16_t port = 22;  // the SSH port temper connects to
};

// Why `command` could lock `login` out, or "" when nothing in it does. A command the guard cannot
// parse is refused (the reason says so).
std::string LockoutRisk(std::string_view command, const LoginIdentity& login);

// Why writing `path` could lock `login` out (its authorized_keys; /etc/nologin for a login other
// than root), or "".
std::string WriteLockoutRisk(std::string_view path, const LoginIdentity& login);

// True when `c` only reads the files it names (cat, grep, ls, stat, sed without -i, find without
// -delete/-exec, ...): a guarded path among its words is not a change.
bool OnlyReads(const SimpleCommand& c);

}  // namespace temper::stig
