#include "orchestrator/config/access_config.h"

#include <set>

#include <fmt/format.h>

#include "orchestrator/config/yaml_reader.h"

namespace temper {

std::string_view ClientRoleName(ClientRole role) {
  switch (role) {
    case ClientRole::kViewer:
      return "viewer";
    case ClientRole::kOperator:
      return "operator";
    case ClientRole::kAdmin:
      return "admin";
  }
  return "viewer";
}

std::optional<ClientRole> ParseClientRole(std::string_view name) {
  for (ClientRole role : {ClientRole::kViewer, ClientRole::kOperator, ClientRole::kAdmin}) {
    if (name == ClientRoleName(role)) return role;
  }
  return std::nullopt;
}

namespace {

Result<AccessGrant> ParseGrant(const YamlNode& node) {
  TEMPER_RETURN_IF_ERROR(
      node.ExpectMapWithKeys({"unix_user", "unix_group", "token_file", "tls_client", "name", "role", "targets"}));
  AccessGrant grant;
  grant.where = node.Location();
  int ways = 0;
  if (auto n = node.Find("unix_user")) {
    TEMPER_ASSIGN_OR_RETURN(grant.unix_user, n->AsString());
    ++ways;
  }
  if (auto n = node.Find("unix_group")) {
    TEMPER_ASSIGN_OR_RETURN(grant.unix_group, n->AsString());
    ++ways;
  }
  if (auto n = node.Find("token_file")) {
    TEMPER_ASSIGN_OR_RETURN(grant.token_file, n->AsPath());
    ++ways;
  }
  if (auto n = node.Find("tls_client")) {
    TEMPER_ASSIGN_OR_RETURN(grant.tls_client, n->AsString());
    ++ways;
  }
  if (ways != 1) {
    return node.Error(
        "each access entry names exactly one client: unix_user, unix_group, token_file (with name) or tls_client");
  }
  if (auto n = node.Find("name")) {
    TEMPER_ASSIGN_OR_RETURN(grant.name, n->AsString());
  } else if (!grant.token_file.empty()) {
    return node.Error("a token_file entry needs a name: it is how the client appears in logs and limits");
  } else {
    grant.name = !grant.unix_user.empty()    ? grant.unix_user
                 : !grant.unix_group.empty() ? grant.unix_group
                                             : grant.tls_client;
  }
  TEMPER_ASSIGN_OR_RETURN(YamlNode role_node, node.Require("role"));
  TEMPER_ASSIGN_OR_RETURN(std::string role, role_node.AsString());
  std::optional<ClientRole> parsed = ParseClientRole(role);
  if (!parsed) return role_node.Error(fmt::format("unknown role '{}' (expected: viewer, operator, admin)", role));
  grant.role = *parsed;
  if (auto n = node.Find("targets")) {
    if (grant.role != ClientRole::kOperator) {
      return n->Error("only an operator's grant lists targets (a viewer acts on none, an admin on all)");
    }
    TEMPER_ASSIGN_OR_RETURN(std::vector<YamlNode> items, n->Items());
    for (const YamlNode& item : items) {
      TEMPER_ASSIGN_OR_RETURN(std::string target, item.AsString());
      grant.targets.push_back(std::move(target));
    }
    if (grant.targets.empty()) return n->Error("an empty list would allow no target; leave targets out to allow all");
  }
  return grant;
}

}  // namespace

Result<std::vector<AccessGrant>> ParseAccessGrants(const YamlNode& node) {
  TEMPER_ASSIGN_OR_RETURN(std::vector<YamlNode> items, node.Items());
  std::vector<AccessGrant> grants;
  std::set<std::string> token_names;
  for (const YamlNode& item : items) {
    TEMPER_ASSIGN_OR_RETURN(AccessGrant grant, ParseGrant(item));
    if (!grant.token_file.empty() && !token_names.insert(grant.name).second) {
      return item.Error(fmt::format("a second token named '{}': token names identify clients", grant.name));
    }
    grants.push_back(std::move(grant));
  }
  return grants;
}

}  // namespace temper
