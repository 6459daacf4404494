// UnixSocketListener: temperd's local front door. It owns the listening unix socket, accepts each
// connection itself, identifies the peer from its credentials (peer_access.h), and only then hands
// the connection to gRPC: known peers to the API server as who they are (local_callers.h), refused
// peers to a server that answers every call with PERMISSION_DENIED and a message saying who may
// connect (so `temper` can tell the user why).
// Accepting goes through AcceptLoop: out of descriptors, it pauses instead of spinning or stopping.
//
// Thread safety: Start and Stop are called from one thread; the accept loop runs on its own thread.
#pragma once

#include <memory>
#include <string>

#include <grpcpp/server.h>

#include "common/log.h"
#include "common/status.h"
#include "orchestrator/server/accept_loop.h"
#include "orchestrator/server/local_callers.h"
#include "orchestrator/server/peer_access.h"

namespace temper {

class UnixSocketListener {
 public:
  // Creates the socket's directory if missing, removes a stale socket file left by a dead daemon,
  // binds and listens. AlreadyExists when a live daemon answers at `path`; FailedPrecondition when
  // `path` is something other than a socket (never deleted).
  static Result<std::unique_ptr<UnixSocketListener>> Bind(const std::string& path, const Logger& log);

  UnixSocketListener(const UnixSocketListener&) = delete;
  UnixSocketListener& operator=(const UnixSocketListener&) = delete;
  ~UnixSocketListener();

  // Starts accepting. `callers` (whose server must have started) and `refusal_server` must stay
  // alive until Stop() returns.
  void Start(PeerAccess access, LocalCallers& callers, grpc::Server* refusal_server);
  // Stops accepting new connections and removes the socket file. Idempotent.
  void Stop();

  const std::string& path() const { return path_; }

 private:
  UnixSocketListener(std::string path, std::unique_ptr<AcceptLoop> loop, const Logger& log)
      : path_(std::move(path)), loop_(std::move(loop)), log_(log) {}

  const std::string path_;
  std::unique_ptr<AcceptLoop> loop_;
  const Logger& log_;
  bool stopped_ = false;
};

}  // namespace temper
