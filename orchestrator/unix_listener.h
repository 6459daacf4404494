// UnixSocketListener: temperd's local front door. It owns the listening unix socket, accepts each
// connection itself, checks the peer's credentials, and only then hands the connection to gRPC:
// allowed peers to the API server, refused peers to a server that answers every call with
// PERMISSION_DENIED and a message saying who may connect (so `temper` can tell the user why).
//
// Thread safety: Start and Stop are called from one thread; the accept loop runs on its own thread.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include <grpcpp/server.h>

#include "common/log.h"
#include "common/status.h"
#include "orchestrator/peer_access.h"

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

  // Starts accepting. `server` and `refusal_server` must stay alive until Stop() returns.
  void Start(PeerAccess access, grpc::Server* server, grpc::Server* refusal_server);
  // Stops accepting new connections and removes the socket file. Idempotent.
  void Stop();

  const std::string& path() const { return path_; }

 private:
  UnixSocketListener(std::string path, int listen_fd, int wake_fd, const Logger& log)
      : path_(std::move(path)), listen_fd_(listen_fd), wake_fd_(wake_fd), log_(log) {}
  void AcceptLoop(PeerAccess access, grpc::Server* server, grpc::Server* refusal_server);

  const std::string path_;
  int listen_fd_;
  int wake_fd_;  // an eventfd that interrupts the accept loop's poll
  const Logger& log_;
  std::thread thread_;
  std::atomic<bool> stopped_{false};
};

}  // namespace temper
