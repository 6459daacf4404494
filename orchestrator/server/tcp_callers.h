// TcpCallers: who a call on temperd's TCP port is. TLS encrypts; this decides who may talk. A
// client either sends "authorization: Bearer <token>", compared in constant time with every
// configured token, or (when listen.tcp.client_ca is set, so TLS has verified its certificate) is
// named by its certificate's common name or a DNS subject alternative name. The identity found is
// stamped on the call (client_identity.h); a call that proves no identity is UNAUTHENTICATED. A
// token that does not match is refused even when the certificate would name a client: a wrong
// token is an attack or a mistake, not a fallback.
// Thread safety: Process is called concurrently, for calls on one connection too, whose auth context
// gRPC shares between them: each call is processed under mu_ (client_identity.h says why).
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include <grpcpp/security/auth_metadata_processor.h>

#include "common/status.h"
#include "orchestrator/config/daemon_config.h"
#include "orchestrator/server/client_identity.h"

namespace temper {

struct TcpClient {
  ClientIdentity identity;
  std::string token;     // the bearer token that proves it, or empty
  std::string tls_name;  // the certificate name that proves it, or empty
};

// The TCP clients of `config`: listen.tcp.token_file (an operator named "tcp", unless an access
// entry names that file) and the access entries with token_file or tls_client. Token files are read
// now (ReadTokenFile's checks); errors name the file and the entry.
Result<std::vector<TcpClient>> TcpClientsOf(const DaemonConfig& config);

class TcpCallers final : public grpc::AuthMetadataProcessor {
 public:
  explicit TcpCallers(std::vector<TcpClient> clients) : clients_(std::move(clients)) {}
  bool IsBlocking() const override { return false; }
  grpc::Status Process(const InputMetadata& auth_metadata, grpc::AuthContext* context,
                       OutputMetadata* consumed_auth_metadata, OutputMetadata* response_metadata) override;

 private:
  const std::vector<TcpClient> clients_;
  std::mutex mu_;
};

}  // namespace temper
