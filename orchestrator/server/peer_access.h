// PeerAccess: who a process connecting to temperd's unix socket is, and in which role.
//
// temperd changes hosts as root, so its socket is a root-equivalent door. Each accepted connection's
// peer credentials (SO_PEERCRED and SO_PEERGROUPS, set by the kernel, unforgeable by the client)
// decide its identity (client_identity.h): root and the daemon's own user are admins; the users and
// groups of temperd.yaml's `access:` list get their grant's role (the highest when several match);
// other members of the socket's group (`temper` by default) are operators; anyone else is refused.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "orchestrator/config/access_config.h"
#include "orchestrator/server/client_identity.h"

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
  // `group_name`: the socket's group, whose members are operators; empty for none. `grants`: the
  // access list; its unix users and groups are looked up now. A socket group that does not exist
  // is NotFound (the daemon warns and goes on without it); a user or group named in a grant that
  // does not exist is InvalidArgument naming the grant's place in temperd.yaml.
  static Result<PeerAccess> Create(const std::string& group_name, const std::vector<AccessGrant>& grants);

  // The peer's identity, or PermissionDenied naming the uid and who may connect.
  Result<ClientIdentity> Identify(const PeerCredentials& peer) const;
  // What a refused client is told.
  std::string Describe() const;

 private:
  struct LocalGrant {
    std::optional<uid_t> uid;
    std::optional<gid_t> gid;
    ClientRole role;
    std::vector<std::string> targets;
  };
  PeerAccess(uid_t own_uid, std::optional<gid_t> group, std::string group_name, std::vector<LocalGrant> grants)
      : own_uid_(own_uid), group_(group), group_name_(std::move(group_name)), grants_(std::move(grants)) {}

  uid_t own_uid_;
  std::optional<gid_t> group_;
  std::string group_name_;
  std::vector<LocalGrant> grants_;
};

}  // namespace temper
