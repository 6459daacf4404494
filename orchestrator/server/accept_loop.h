// AcceptLoop: the thread that accepts connections on one of temperd's listening sockets and hands
// each to its owner (the unix socket's credential check, the TCP port's TLS handshake in gRPC).
//
// temperd accepts connections itself rather than leaving it to gRPC so that running out of file
// descriptors can neither stop the listener (gRPC 1.51's TCP listener gives up for good at the first
// EMFILE) nor make it spin: failures go through AcceptBackoff, which pauses accepting until
// descriptors free up while new connections wait in the backlog.
//
// Thread safety: Start and Stop from one thread; the callback runs on the loop's own thread.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "common/log.h"
#include "common/status.h"

namespace temper {

class AcceptLoop {
 public:
  // Takes ownership of the listening socket `listen_fd` (made non-blocking here). `name` names it in
  // log lines. `log` must outlive the loop. IOError when the wake-up eventfd cannot be made (the
  // socket is closed then too).
  static Result<std::unique_ptr<AcceptLoop>> Create(int listen_fd, std::string name, const Logger& log);
  AcceptLoop(const AcceptLoop&) = delete;
  AcceptLoop& operator=(const AcceptLoop&) = delete;
  ~AcceptLoop();  // stops, then closes the socket

  // Starts accepting. `on_connection` receives each connection (non-blocking, close-on-exec) and owns it.
  void Start(std::function<void(int fd)> on_connection);
  // Stops accepting and joins the thread. Idempotent.
  void Stop();

  int listen_fd() const { return listen_fd_; }

 private:
  AcceptLoop(int listen_fd, int wake_fd, std::string name, const Logger& log)
      : listen_fd_(listen_fd), wake_fd_(wake_fd), name_(std::move(name)), log_(log) {}
  void Run(const std::function<void(int fd)>& on_connection);

  const int listen_fd_;
  const int wake_fd_;  // an eventfd that interrupts the loop's poll
  const std::string name_;
  const Logger& log_;
  std::thread thread_;
  std::atomic<bool> stopped_{false};
};

}  // namespace temper
