// AccessConfig: who may do what with temperd (temperd.yaml's `access:` list).
//
// temperd changes hosts as root, so every client is one of three roles, each including the ones
// before it:
//   viewer    reads batches, reports, rule memories, exports, hosts and the journal;
//   operator  also submits, cancels, reverts and confirms reboots, on the targets its grant lists
//             (all when it lists none);
//   admin     also changes SSH trust and registers hosts (hosts accept, hosts clear, a submit
//             naming a host temperd does not know).
// A client is named by one of: a unix user or group (over the unix socket, from the kernel's peer
// credentials), a bearer token (over TCP), or a TLS client certificate's name (over TCP, when
// listen.tcp.client_ca is set). Root and temperd's own user are always admin. A local peer that no
// grant names is an operator when it belongs to listen.unix.group, else refused; listen.tcp.token_file
// is an operator token named "tcp" unless a grant names that file.
// Thread safety: values.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace temper {

class YamlNode;

enum class ClientRole { kViewer = 0, kOperator = 1, kAdmin = 2 };

std::string_view ClientRoleName(ClientRole role);  // "viewer", "operator", "admin"
std::optional<ClientRole> ParseClientRole(std::string_view name);

// One entry of `access:`. Exactly one of the four ways to name a client is set.
struct AccessGrant {
  std::string unix_user;   // a user name, or a numeric uid
  std::string unix_group;  // a group name, or a numeric gid
  std::string token_file;  // a bearer token's file (mode 0600); the client is `name`
  std::string tls_client;  // a client certificate's common name or DNS subject alternative name
  std::string name;        // required with token_file; defaults to the user, group or TLS name
  ClientRole role = ClientRole::kViewer;
  std::vector<std::string> targets;  // operator only: the targets it may act on; empty: all
  std::string where;                 // "temperd.yaml:12:5" for messages
};

// Parses the `access:` sequence. Errors name file:line:column and the field: an entry naming no
// client or two, an unknown role, targets on a role other than operator, a token_file without a name,
// two token entries with one name.
Result<std::vector<AccessGrant>> ParseAccessGrants(const YamlNode& node);

}  // namespace temper
