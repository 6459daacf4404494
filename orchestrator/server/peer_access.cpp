#include "orchestrator/server/peer_access.h"

#include <grp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include <fmt/format.h>

namespace temper {

Result<PeerCredentials> ReadPeerCredentials(int fd) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return Status::FromErrno(errno, "getsockopt(SO_PEERCRED)");
  }
  PeerCredentials peer{.pid = cred.pid, .uid = cred.uid, .gid = cred.gid, .groups = {}};
  // SO_PEERGROUPS reports ERANGE with the needed size when the buffer is too small.
  std::vector<gid_t> groups(64);
  while (true) {
    socklen_t bytes = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &bytes) == 0) {
      groups.resize(bytes / sizeof(gid_t));
      break;
    }
    if (errno != ERANGE || bytes / sizeof(gid_t) <= groups.size()) {
      return Status::FromErrno(errno, "getsockopt(SO_PEERGROUPS)");
    }
    groups.resize(bytes / sizeof(gid_t));
  }
  peer.groups = std::move(groups);
  return peer;
}

Result<PeerAccess> PeerAccess::Create(const std::string& group_name) {
  if (group_name.empty()) return RootOnly();
  group entry{};
  group* found = nullptr;
  std::vector<char> buffer(16384);
  int rc = getgrnam_r(group_name.c_str(), &entry, buffer.data(), buffer.size(), &found);
  if (rc != 0) return Status::FromErrno(rc, fmt::format("looking up group '{}'", group_name));
  if (found == nullptr) {
    return Status::NotFound(fmt::format("group '{}' does not exist on this system", group_name));
  }
  return PeerAccess(geteuid(), found->gr_gid, group_name);
}

PeerAccess PeerAccess::RootOnly() { return PeerAccess(geteuid(), std::nullopt, ""); }

Status PeerAccess::Check(const PeerCredentials& peer) const {
  if (peer.uid == 0 || peer.uid == own_uid_) return Status::OK();
  if (group_) {
    if (peer.gid == *group_) return Status::OK();
    for (gid_t g : peer.groups) {
      if (g == *group_) return Status::OK();
    }
  }
  return Status::PermissionDenied(fmt::format("uid {} (pid {}) refused: {}", peer.uid, peer.pid, Describe()));
}

std::string PeerAccess::Describe() const {
  if (!group_) return "temperd accepts only root and its own user on this socket";
  return fmt::format("temperd accepts only root, its own user and members of group '{}' on this socket", group_name_);
}

}  // namespace temper
