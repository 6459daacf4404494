// PeerAccess: who may talk to temperd over its unix socket.
//
// temperd changes hosts as root, so its socket is a root-equivalent door. Each accepted connection's
// peer credentials (SO_PEERCRED and SO_PEERGROUPS, set by the kernel, unforgeable by the client) must
// show root, the daemon's own user, or membership of the configured group (`temper` by default).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace temper {

struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;              // primary group
  std::vector<gid_t> groups;  // supplementary groups
};

// Reads the credentials of the process at the other end of a connected unix socket.
Result<PeerCredentials> ReadPeerCredentials(int fd);

class PeerAccess {
 public:
  // `group_name` empty: root and the daemon's own user only. A group that does not exist on this
  // system is reported by Create as NotFound, so the daemon can warn rather than silently allow none.
  static Result<PeerAccess> Create(const std::string& group_name);
  // Root and the daemon's own user only.
  static PeerAccess RootOnly();

  // PermissionDenied naming the uid when the peer may not connect.
  Status Check(const PeerCredentials& peer) const;
  // What a refused client is told.
  std::string Describe() const;

 private:
  PeerAccess(uid_t own_uid, std::optional<gid_t> group, std::string group_name)
      : own_uid_(own_uid), group_(group), group_name_(std::move(group_name)) {}
  uid_t own_uid_;
  std::optional<gid_t> group_;
  std::string group_name_;
};

}  // namespace temper
