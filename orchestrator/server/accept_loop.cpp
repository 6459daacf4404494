#include "orchestrator/server/accept_loop.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "common/accept_backoff.h"

namespace temper {

Result<std::unique_ptr<AcceptLoop>> AcceptLoop::Create(int listen_fd, std::string name, const Logger& log) {
  int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    int err = errno;
    close(listen_fd);
    return Status::FromErrno(err, "eventfd for " + name);
  }
  fcntl(listen_fd, F_SETFL, fcntl(listen_fd, F_GETFL) | O_NONBLOCK);
  return std::unique_ptr<AcceptLoop>(new AcceptLoop(listen_fd, wake, std::move(name), log));
}

AcceptLoop::~AcceptLoop() {
  Stop();
  close(listen_fd_);
  close(wake_fd_);
}

void AcceptLoop::Start(std::function<void(int fd)> on_connection) {
  thread_ = std::thread([this, cb = std::move(on_connection)] { Run(cb); });
}

void AcceptLoop::Stop() {
  if (stopped_.exchange(true)) return;
  uint64_t one = 1;
  ssize_t ignored = write(wake_fd_, &one, sizeof one);
  (void)ignored;
  if (thread_.joinable()) thread_.join();
}

void AcceptLoop::Run(const std::function<void(int fd)>& on_connection) {
  AcceptBackoff backoff(name_, log_);
  int pause_ms = -1;  // while pausing, only the wake-up fd is watched, for this long
  while (!stopped_.load()) {
    pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    int ready = poll(fds, pause_ms < 0 ? 2 : 1, pause_ms);
    if (ready < 0) {
      if (errno == EINTR) continue;
      log_.Error("{}: poll failed ({}); no longer accepting connections", name_, std::strerror(errno));
      return;
    }
    if (fds[0].revents != 0) return;
    pause_ms = -1;
    // Take every pending connection, until the backlog is empty or a failure says to wait.
    while (!stopped_.load()) {
      int conn = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (conn >= 0) {
        backoff.OnAccepted();
        on_connection(conn);
        continue;
      }
      AcceptBackoff::Action action = backoff.OnError(errno);
      if (action == AcceptBackoff::Action::kNext) continue;
      if (action == AcceptBackoff::Action::kPause) pause_ms = static_cast<int>(backoff.pause().count());
      if (action == AcceptBackoff::Action::kStop) return;
      break;
    }
  }
}

}  // namespace temper
