#include "orchestrator/unix_listener.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>
#include <grpcpp/server_posix.h>

namespace temper {

namespace {

Result<sockaddr_un> SocketAddress(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) {
    return Status::InvalidArgument(fmt::format("socket path {} is longer than {} bytes", path,
                                               sizeof addr.sun_path - 1));
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

// True when some process accepts connections at `path`.
bool SomeoneListens(const sockaddr_un& addr) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  bool live = connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return live;
}

}  // namespace

Result<std::unique_ptr<UnixSocketListener>> UnixSocketListener::Bind(const std::string& path,
                                                                     const Logger& log) {
  TEMPER_ASSIGN_OR_RETURN(sockaddr_un addr, SocketAddress(path));
  std::error_code ec;
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (!dir.empty() && !std::filesystem::exists(dir, ec)) {
    std::filesystem::create_directories(dir, ec);
    if (ec) return Status::IOError(fmt::format("cannot create socket directory {}: {}", dir.string(), ec.message()));
  }
  struct stat st {};
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return Status::FailedPrecondition(
          fmt::format("{} exists and is not a socket; move it away or set listen.unix.path", path));
    }
    if (SomeoneListens(addr)) {
      return Status::AlreadyExists(fmt::format("another temperd is already serving on {}", path));
    }
    log.Info("removing stale socket {} left by a previous temperd", path);
    if (unlink(path.c_str()) != 0) return Status::FromErrno(errno, fmt::format("removing stale socket {}", path));
  }

  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::FromErrno(errno, "socket(AF_UNIX)");
  if (bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    int err = errno;
    close(fd);
    return Status::FromErrno(err, fmt::format("binding {}", path));
  }
  // Anyone may connect at the file-system level so that a refused user gets a clear PERMISSION_DENIED
  // from the credential check instead of a bare EACCES; the check in AcceptLoop is the access control.
  chmod(path.c_str(), 0666);
  if (listen(fd, 128) != 0) {
    int err = errno;
    close(fd);
    unlink(path.c_str());
    return Status::FromErrno(err, fmt::format("listening on {}", path));
  }
  int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    int err = errno;
    close(fd);
    unlink(path.c_str());
    return Status::FromErrno(err, "eventfd");
  }
  return std::unique_ptr<UnixSocketListener>(new UnixSocketListener(path, fd, wake, log));
}

UnixSocketListener::~UnixSocketListener() {
  Stop();
  close(listen_fd_);
  close(wake_fd_);
}

void UnixSocketListener::Start(PeerAccess access, grpc::Server* server, grpc::Server* refusal_server) {
  thread_ = std::thread([this, access, server, refusal_server] { AcceptLoop(access, server, refusal_server); });
}

void UnixSocketListener::Stop() {
  if (stopped_.exchange(true)) return;
  uint64_t one = 1;
  ssize_t ignored = write(wake_fd_, &one, sizeof one);
  (void)ignored;
  if (thread_.joinable()) thread_.join();
  unlink(path_.c_str());
}

void UnixSocketListener::AcceptLoop(PeerAccess access, grpc::Server* server, grpc::Server* refusal_server) {
  pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  while (!stopped_.load()) {
    int ready = poll(fds, 2, -1);
    if (ready < 0) {
      if (errno == EINTR) continue;
      log_.Error("unix socket {}: poll failed: {}", path_, std::strerror(errno));
      return;
    }
    if (fds[1].revents != 0) return;
    if ((fds[0].revents & POLLIN) == 0) continue;
    // gRPC drives the connection with its event engine, which expects a non-blocking fd.
    int conn = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (conn < 0) {
      if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED) {
        log_.Warning("unix socket {}: accept failed: {}", path_, std::strerror(errno));
      }
      continue;
    }
    Result<PeerCredentials> peer = ReadPeerCredentials(conn);
    Status allowed = peer.ok() ? access.Check(*peer) : peer.status();
    if (allowed.ok()) {
      log_.Debug("unix socket: accepted uid {} pid {}", peer->uid, peer->pid);
      grpc::AddInsecureChannelFromFd(server, conn);  // gRPC owns `conn` from here on
    } else {
      log_.Warning("unix socket: {}", allowed.message());
      grpc::AddInsecureChannelFromFd(refusal_server, conn);
    }
  }
}

}  // namespace temper
