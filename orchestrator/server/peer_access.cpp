#include "orchestrator/server/peer_access.h"

#include <grp.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>

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

namespace {

std::optional<unsigned> Numeric(const std::string& text) {
  unsigned value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// The gid of group `name` (or a numeric gid as given); nullopt when there is no such group.
Result<std::optional<gid_t>> LookUpGroup(const std::string& name) {
  if (std::optional<unsigned> gid = Numeric(name)) return std::optional<gid_t>(*gid);
  group entry{};
  group* found = nullptr;
  std::vector<char> buffer(16384);
  int rc = getgrnam_r(name.c_str(), &entry, buffer.data(), buffer.size(), &found);
  if (rc != 0) return Status::FromErrno(rc, fmt::format("looking up group '{}'", name));
  if (found == nullptr) return std::optional<gid_t>();
  return std::optional<gid_t>(found->gr_gid);
}

Result<std::optional<uid_t>> LookUpUser(const std::string& name) {
  if (std::optional<unsigned> uid = Numeric(name)) return std::optional<uid_t>(*uid);
  passwd entry{};
  passwd* found = nullptr;
  std::vector<char> buffer(16384);
  int rc = getpwnam_r(name.c_str(), &entry, buffer.data(), buffer.size(), &found);
  if (rc != 0) return Status::FromErrno(rc, fmt::format("looking up user '{}'", name));
  if (found == nullptr) return std::optional<uid_t>();
  return std::optional<uid_t>(found->pw_uid);
}

// "alice (uid 1000)", or "uid 1000" for a uid with no name.
std::string UserName(uid_t uid) {
  passwd entry{};
  passwd* found = nullptr;
  std::vector<char> buffer(16384);
  if (getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) != 0 || found == nullptr) {
    return fmt::format("uid {}", uid);
  }
  return fmt::format("{} (uid {})", found->pw_name, uid);
}

bool InGroup(const PeerCredentials& peer, gid_t gid) {
  return peer.gid == gid || std::find(peer.groups.begin(), peer.groups.end(), gid) != peer.groups.end();
}

}  // namespace

Result<PeerAccess> PeerAccess::Create(const std::string& group_name, const std::vector<AccessGrant>& grants) {
  std::vector<LocalGrant> local;
  for (const AccessGrant& g : grants) {
    if (g.unix_user.empty() && g.unix_group.empty()) continue;
    LocalGrant grant{.uid = std::nullopt, .gid = std::nullopt, .role = g.role, .targets = g.targets};
    if (!g.unix_user.empty()) {
      TEMPER_ASSIGN_OR_RETURN(grant.uid, LookUpUser(g.unix_user));
      if (!grant.uid) {
        return Status::InvalidArgument(
            fmt::format("{}: access: user '{}' does not exist on this system", g.where, g.unix_user));
      }
    } else {
      TEMPER_ASSIGN_OR_RETURN(grant.gid, LookUpGroup(g.unix_group));
      if (!grant.gid) {
        return Status::InvalidArgument(
            fmt::format("{}: access: group '{}' does not exist on this system", g.where, g.unix_group));
      }
    }
    local.push_back(std::move(grant));
  }
  std::optional<gid_t> group;
  if (!group_name.empty()) {
    TEMPER_ASSIGN_OR_RETURN(group, LookUpGroup(group_name));
    if (!group) return Status::NotFound(fmt::format("group '{}' does not exist on this system", group_name));
  }
  return PeerAccess(geteuid(), group, group_name, std::move(local));
}

Result<ClientIdentity> PeerAccess::Identify(const PeerCredentials& peer) const {
  ClientIdentity identity{.key = fmt::format("unix:{}", peer.uid), .name = UserName(peer.uid)};
  if (peer.uid == 0 || peer.uid == own_uid_) {
    identity.role = ClientRole::kAdmin;
    return identity;
  }
  // The highest role among the grants that name the peer; an operator's targets are the union of its
  // operator grants' lists, all when any of them lists none.
  std::optional<ClientRole> best;
  bool all_targets = false;
  for (const LocalGrant& g : grants_) {
    const bool matches = g.uid ? *g.uid == peer.uid : InGroup(peer, *g.gid);
    if (!matches) continue;
    if (!best || g.role > *best) {
      best = g.role;
      identity.targets.clear();
      all_targets = false;
    }
    if (g.role != *best) continue;
    all_targets |= g.targets.empty();
    identity.targets.insert(identity.targets.end(), g.targets.begin(), g.targets.end());
  }
  if (!best && group_ && InGroup(peer, *group_)) {
    best = ClientRole::kOperator;
    all_targets = true;
  }
  if (!best) {
    return Status::PermissionDenied(fmt::format("{} (pid {}) refused: {}", identity.name, peer.pid, Describe()));
  }
  identity.role = *best;
  if (all_targets || identity.role != ClientRole::kOperator) identity.targets.clear();
  std::sort(identity.targets.begin(), identity.targets.end());
  identity.targets.erase(std::unique(identity.targets.begin(), identity.targets.end()), identity.targets.end());
  return identity;
}

std::string PeerAccess::Describe() const {
  std::vector<std::string> who = {"root", "its own user"};
  if (group_) who.push_back(fmt::format("members of group '{}'", group_name_));
  if (!grants_.empty()) who.push_back("the users and groups of temperd.yaml's access list");
  std::string list = who[0];
  for (size_t i = 1; i < who.size(); ++i) list += (i + 1 == who.size() ? " and " : ", ") + who[i];
  return fmt::format("temperd accepts only {} on this socket", list);
}

}  // namespace temper
