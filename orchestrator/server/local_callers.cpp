#include "orchestrator/server/local_callers.h"

#include <grpcpp/security/auth_metadata_processor.h>
#include <grpcpp/security/server_credentials.h>

#include <fmt/format.h>

namespace temper {

namespace {

// Whom one acceptor stands for: set once, under LocalCallers::mu_, before the first connection is
// handed to the acceptor; read by the processor on gRPC's threads after that hand-over.
struct IdentityCell {
  std::mutex mu;
  std::shared_ptr<const ClientIdentity> identity;

  std::shared_ptr<const ClientIdentity> Get() {
    std::lock_guard lock(mu);
    return identity;
  }
};

// Stamps the cell's identity on each call made on a connection its acceptor took.
class CellStamp final : public grpc::AuthMetadataProcessor {
 public:
  explicit CellStamp(std::shared_ptr<IdentityCell> cell) : cell_(std::move(cell)) {}
  bool IsBlocking() const override { return false; }
  grpc::Status Process(const InputMetadata&, grpc::AuthContext* context, OutputMetadata*, OutputMetadata*) override {
    std::shared_ptr<const ClientIdentity> identity = cell_->Get();
    if (!identity) return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "temperd did not identify this connection");
    return StampCaller(*identity, *context);
  }

 private:
  const std::shared_ptr<IdentityCell> cell_;
};

}  // namespace

struct LocalCallers::Slot {
  std::shared_ptr<IdentityCell> cell = std::make_shared<IdentityCell>();
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor;
};

LocalCallers::LocalCallers(grpc::ServerBuilder& builder) {
  for (std::unique_ptr<Slot>& slot : slots_) {
    slot = std::make_unique<Slot>();
    // Local credentials on a unix socket add no handshake: clients connect as they would to an
    // insecure server. They are here because only secure credentials run an auth processor.
    std::shared_ptr<grpc::ServerCredentials> creds = grpc::experimental::LocalServerCredentials(UDS);
    creds->SetAuthMetadataProcessor(std::make_shared<CellStamp>(slot->cell));
    slot->acceptor = builder.experimental().AddExternalConnectionAcceptor(
        grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD, creds);
  }
}

LocalCallers::~LocalCallers() = default;

Status LocalCallers::Hand(int fd, const ClientIdentity& identity) {
  Slot* chosen = nullptr;
  {
    std::lock_guard lock(mu_);
    for (const std::unique_ptr<Slot>& slot : slots_) {
      std::shared_ptr<const ClientIdentity> held = slot->cell->Get();
      if (held && *held == identity) {
        chosen = slot.get();
        break;
      }
    }
    for (size_t i = 0; chosen == nullptr && i < slots_.size(); ++i) {
      std::lock_guard cell_lock(slots_[i]->cell->mu);
      if (slots_[i]->cell->identity) continue;
      slots_[i]->cell->identity = std::make_shared<const ClientIdentity>(identity);
      chosen = slots_[i].get();
    }
  }
  if (chosen == nullptr) {
    return Status::ResourceExhausted(
        fmt::format("{} refused: temperd serves at most {} distinct local users and roles until it restarts",
                    identity.name, kMaxIdentities));
  }
  grpc::experimental::ExternalConnectionAcceptor::NewConnectionParameters connection;
  connection.listener_fd = -1;
  connection.fd = fd;
  chosen->acceptor->HandleNewConnection(&connection);
  return Status::OK();
}

}  // namespace temper
