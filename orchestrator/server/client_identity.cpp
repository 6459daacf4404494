#include "orchestrator/server/client_identity.h"

#include <algorithm>
#include <mutex>

namespace temper {

namespace {

// Auth-context property names; the "temper." prefix keeps them apart from gRPC's own (x509_*).
constexpr char kKey[] = "temper.client.key";
constexpr char kName[] = "temper.client.name";
constexpr char kRole[] = "temper.client.role";
constexpr char kTarget[] = "temper.client.target";

std::string Only(const grpc::AuthContext& context, const char* property) {
  std::vector<grpc::string_ref> values = context.FindPropertyValues(property);
  // Two values would mean two stamps: trust neither.
  if (values.size() != 1) return "";
  return std::string(values[0].data(), values[0].size());
}

}  // namespace

bool ClientIdentity::MayActOn(std::string_view target) const {
  if (role == ClientRole::kAdmin) return true;
  if (role != ClientRole::kOperator) return false;
  return targets.empty() || std::find(targets.begin(), targets.end(), target) != targets.end();
}

grpc::Status StampCaller(const ClientIdentity& identity, grpc::AuthContext& context) {
  // gRPC keeps one auth context per connection and runs the processors on every call, concurrently
  // for concurrent calls, and an AuthContext is not thread-safe. So the stamp is written once per
  // connection, under a lock: a connection's later calls find it and write nothing, and then every
  // write to a connection's context happens before any of its methods reads it.
  static std::mutex stamping;
  std::lock_guard lock(stamping);
  std::vector<grpc::string_ref> stamped = context.FindPropertyValues(kKey);
  if (!stamped.empty()) {
    if (stamped.size() == 1 && std::string_view(stamped[0].data(), stamped[0].size()) == identity.key) {
      return grpc::Status::OK;
    }
    // A second token over one TCP connection: a connection speaks for one client.
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "this connection already speaks for another client; open a new one for " + identity.name);
  }
  context.AddProperty(kKey, identity.key);
  context.AddProperty(kName, identity.name);
  context.AddProperty(kRole, std::string(ClientRoleName(identity.role)));
  for (const std::string& target : identity.targets) context.AddProperty(kTarget, target);
  return grpc::Status::OK;
}

ClientIdentity CallerOf(const grpc::ServerContextBase& call) {
  ClientIdentity caller;
  std::shared_ptr<const grpc::AuthContext> context = call.auth_context();
  if (!context) return caller;
  std::optional<ClientRole> role = ParseClientRole(Only(*context, kRole));
  if (!role) return caller;
  caller.key = Only(*context, kKey);
  caller.name = Only(*context, kName);
  caller.role = *role;
  for (const grpc::string_ref& t : context->FindPropertyValues(kTarget))
    caller.targets.emplace_back(t.data(), t.size());
  return caller;
}

}  // namespace temper
