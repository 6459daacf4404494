// TcpListener: temperd's TCP port (listen.tcp). temperd accepts the connections itself (AcceptLoop,
// which no lack of descriptors can stop or make spin) and hands each to gRPC's external connection
// acceptor, which runs the TLS handshake and the bearer-token check exactly as on a port gRPC
// listened on itself. (gRPC 1.51's own TCP listener stops accepting for good at the first EMFILE.)
//
// Thread safety: Bind, Start and Stop from one thread.
#pragma once

#include <memory>
#include <string>

#include <grpcpp/server_builder.h>

#include "common/log.h"
#include "common/status.h"
#include "orchestrator/server/accept_loop.h"

namespace temper {

class TcpListener {
 public:
  // Binds and listens on `address` ("host:port", "[v6]:port"; an empty host or "*" means every
  // address). Unavailable naming the address when it cannot. `log` must outlive the listener.
  static Result<std::unique_ptr<TcpListener>> Bind(const std::string& address, const Logger& log);

  // Hands each accepted connection to `acceptor`, which must stay alive until Stop() returns.
  void Start(grpc::experimental::ExternalConnectionAcceptor* acceptor);
  // Stops accepting. Idempotent.
  void Stop() { loop_->Stop(); }

 private:
  explicit TcpListener(std::unique_ptr<AcceptLoop> loop) : loop_(std::move(loop)) {}
  std::unique_ptr<AcceptLoop> loop_;
};

}  // namespace temper
