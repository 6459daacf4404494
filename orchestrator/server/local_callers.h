// LocalCallers: carries the identity of each unix-socket connection to every call made on it.
//
// gRPC does not tell a method which socket its call came on, and temperd hands accepted sockets to
// gRPC itself (unix_listener.h). So the server gets a fixed set of connection acceptors, one per
// local identity: each acceptor's credentials run a processor that stamps its identity on every
// call (client_identity.h). An identity takes the first free acceptor the first time it connects and
// keeps it for the daemon's life, so an acceptor never changes whom it stands for while a
// connection it took is open. Identities are (uid, role, targets): a user whose groups change gets a
// new one, and a machine has few users allowed to connect, so kMaxIdentities is plenty; past it,
// new identities are refused with a message that says so.
//
// Thread safety: Hand may be called from any thread.
#pragma once

#include <array>
#include <memory>
#include <mutex>

#include <grpcpp/server_builder.h>

#include "common/status.h"
#include "orchestrator/server/client_identity.h"

namespace temper {

class LocalCallers {
 public:
  static constexpr size_t kMaxIdentities = 32;

  // Adds the acceptors to `builder`; Hand works once the server it builds has started.
  explicit LocalCallers(grpc::ServerBuilder& builder);
  LocalCallers(const LocalCallers&) = delete;
  LocalCallers& operator=(const LocalCallers&) = delete;
  ~LocalCallers();

  // Hands the connected socket `fd` to gRPC as `identity` (gRPC owns it from then on).
  // ResourceExhausted when kMaxIdentities other identities hold every acceptor; `fd` is not taken.
  Status Hand(int fd, const ClientIdentity& identity);

 private:
  struct Slot;
  std::array<std::unique_ptr<Slot>, kMaxIdentities> slots_;
  std::mutex mu_;  // guards which identity each slot stands for
};

}  // namespace temper
