#include "orchestrator/server/tcp_callers.h"

#include <fmt/format.h>

#include "orchestrator/token_auth.h"

namespace temper {

Result<std::vector<TcpClient>> TcpClientsOf(const DaemonConfig& config) {
  std::vector<TcpClient> clients;
  if (!config.tcp) return clients;
  bool token_file_granted = false;
  for (const AccessGrant& g : config.access) {
    if (g.token_file.empty() && g.tls_client.empty()) continue;
    TcpClient client;
    client.identity.role = g.role;
    client.identity.targets = g.targets;
    if (!g.token_file.empty()) {
      Result<std::string> token = ReadTokenFile(g.token_file);
      if (!token.ok()) return token.status().WithContext(fmt::format("{}: access", g.where));
      client.token = std::move(*token);
      client.identity.key = "token:" + g.name;
      client.identity.name = fmt::format("token '{}'", g.name);
      token_file_granted |= g.token_file == config.tcp->token_file;
    } else {
      client.tls_name = g.tls_client;
      client.identity.key = "tls:" + g.tls_client;
      client.identity.name = "TLS client " + g.tls_client;
    }
    clients.push_back(std::move(client));
  }
  if (!config.tcp->token_file.empty() && !token_file_granted) {
    Result<std::string> token = ReadTokenFile(config.tcp->token_file);
    if (!token.ok()) return token.status().WithContext("listen.tcp.token_file");
    clients.push_back(
        TcpClient{.identity = {.key = "token:tcp", .name = "token 'tcp'", .role = ClientRole::kOperator, .targets = {}},
                  .token = std::move(*token),
                  .tls_name = ""});
  }
  return clients;
}

grpc::Status TcpCallers::Process(const InputMetadata& auth_metadata, grpc::AuthContext* context,
                                 OutputMetadata* consumed_auth_metadata, OutputMetadata*) {
  std::lock_guard lock(mu_);
  constexpr std::string_view kPrefix = "Bearer ";
  auto it = auth_metadata.find("authorization");
  if (it != auth_metadata.end()) {
    std::string_view value(it->second.data(), it->second.size());
    if (value.substr(0, kPrefix.size()) != kPrefix) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "the authorization metadata is not 'Bearer <token>'");
    }
    // Every token is compared, whichever matches, so the time taken says nothing about which.
    const TcpClient* found = nullptr;
    for (const TcpClient& c : clients_) {
      if (!c.token.empty() && ConstantTimeEquals(value.substr(kPrefix.size()), c.token)) found = &c;
    }
    if (found == nullptr) return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "the bearer token was not accepted");
    consumed_auth_metadata->insert(std::make_pair(std::string(it->first.data(), it->first.size()),
                                                  std::string(it->second.data(), it->second.size())));
    return StampCaller(found->identity, *context);
  }
  // gRPC's TLS puts the verified peer certificate's names on the context (only when client_ca made
  // TLS ask for and check one).
  for (const char* property : {"x509_common_name", "x509_subject_alternative_name"}) {
    for (const grpc::string_ref& name : context->FindPropertyValues(property)) {
      for (const TcpClient& c : clients_) {
        if (!c.tls_name.empty() && c.tls_name == std::string_view(name.data(), name.size())) {
          return StampCaller(c.identity, *context);
        }
      }
    }
  }
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      "temperd requires a bearer token on TCP (metadata 'authorization: Bearer <token>') or a "
                      "client certificate that temperd.yaml's access list names");
}

}  // namespace temper
