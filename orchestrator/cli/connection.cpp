#include "orchestrator/cli/connection.h"

#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "orchestrator/token_auth.h"

namespace temper::cli {

Result<Connection> Connection::Open(const ConnectionOptions& options) {
  Connection c;
  c.timeout_seconds_ = options.timeout_seconds;
  if (options.address.empty()) {
    c.endpoint_ = "unix:" + options.socket;
    c.channel_ = grpc::CreateChannel(c.endpoint_, grpc::InsecureChannelCredentials());
  } else {
    if (options.token_file.empty()) {
      return Status::InvalidArgument("--token-file: required with --address (temperd's TCP port needs a token)");
    }
    grpc::SslCredentialsOptions ssl;
    if (!options.tls_ca.empty()) {
      std::ifstream in(options.tls_ca);
      if (!in) return Status::NotFound(fmt::format("--tls-ca: cannot read {}", options.tls_ca));
      std::ostringstream pem;
      pem << in.rdbuf();
      ssl.pem_root_certs = pem.str();
    }
    TEMPER_ASSIGN_OR_RETURN(std::string token, ReadTokenFile(options.token_file));
    auto creds = grpc::CompositeChannelCredentials(grpc::SslCredentials(ssl), grpc::AccessTokenCredentials(token));
    c.endpoint_ = options.address;
    c.channel_ = grpc::CreateChannel(options.address, creds);
  }
  c.stub_ = temper::v1::Temper::NewStub(c.channel_);
  return c;
}

std::unique_ptr<grpc::ClientContext> Connection::NewContext(bool with_deadline) const {
  auto context = std::make_unique<grpc::ClientContext>();
  if (with_deadline) {
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(timeout_seconds_));
  }
  return context;
}

Status Connection::Explain(const grpc::Status& status) const {
  const std::string& message = status.error_message();
  switch (status.error_code()) {
    case grpc::StatusCode::OK:
      return Status::OK();
    case grpc::StatusCode::UNAVAILABLE:
      return Status::Unavailable(
          fmt::format("temperd is not answering on {} ({}). Is it running? Start it with `systemctl start temperd` "
                      "or `temperd --config FILE`, or point --socket/--address at it",
                      endpoint_, message));
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return Status::DeadlineExceeded(fmt::format("temperd at {} did not answer in time ({})", endpoint_, message));
    case grpc::StatusCode::PERMISSION_DENIED:
      return Status::PermissionDenied(message);
    case grpc::StatusCode::UNAUTHENTICATED:
      return Status::Unauthenticated(message);
    case grpc::StatusCode::NOT_FOUND:
      return Status::NotFound(message);
    case grpc::StatusCode::INVALID_ARGUMENT:
      return Status::InvalidArgument(message);
    case grpc::StatusCode::FAILED_PRECONDITION:
      return Status::FailedPrecondition(message);
    default:
      return Status::Internal(fmt::format("temperd: {}", message));
  }
}

}  // namespace temper::cli
