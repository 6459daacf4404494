// How the `temper` CLI reaches temperd: the unix socket by default, or TCP with TLS and a bearer
// token. Also turns gRPC failures into messages that say what to do.
#pragma once

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "common/status.h"
#include "temper/v1/temper.grpc.pb.h"

namespace temper::cli {

struct ConnectionOptions {
  std::string socket = "/run/temper/temper.sock";
  std::string address;     // host:port; when set, TCP is used instead of the socket
  std::string tls_ca;      // PEM file of the CA that signed temperd's certificate
  std::string token_file;  // file holding the bearer token
  int timeout_seconds = 30;
};

class Connection {
 public:
  static Result<Connection> Open(const ConnectionOptions& options);

  temper::v1::Temper::Stub& stub() { return *stub_; }
  // A context with the per-call deadline (none for streams that follow the journal).
  std::unique_ptr<grpc::ClientContext> NewContext(bool with_deadline = true) const;
  // A Status for a failed call, with the daemon's message and, when it cannot be reached, the hint.
  Status Explain(const grpc::Status& status) const;
  const std::string& endpoint() const { return endpoint_; }

 private:
  Connection() = default;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<temper::v1::Temper::Stub> stub_;
  std::string endpoint_;
  int timeout_seconds_ = 30;
};

}  // namespace temper::cli
