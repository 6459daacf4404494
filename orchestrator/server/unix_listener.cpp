#include "orchestrator/server/unix_listener.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include <fmt/format.h>
#include <grpcpp/server_posix.h>

namespace temper {

namespace {

Result<sockaddr_un> SocketAddress(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) {
    return Status::InvalidArgument(
        fmt::format("socket path {} is longer than {} bytes", path, sizeof addr.sun_path - 1));
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

// True when some process listens at `path`. Non-blocking: a listener that does not accept (a killed temperd's child
// still holding the socket) fills its backlog, and a blocking connect would then wait for ever; EAGAIN says it listens.
bool SomeoneListens(const sockaddr_un& addr) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return false;
  bool live = connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0 || errno == EAGAIN;
  close(fd);
  return live;
}

}  // namespace

Result<std::unique_ptr<UnixSocketListener>> UnixSocketListener::Bind(const std::string& path, const Logger& log) {
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
    // A temperd that was just killed can still be accepting for a moment (a child it forked holds
    // the listening socket until it execs or exits; the kill -9 tests met this), so the socket
    // must stay live for a while before it counts as another temperd's.
    bool live = SomeoneListens(addr);
    for (int i = 0; live && i < 20; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      live = SomeoneListens(addr);
    }
    if (live) return Status::AlreadyExists(fmt::format("another temperd is already serving on {}", path));
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
  // from the credential check instead of a bare EACCES; the check in Start() is the access control.
  chmod(path.c_str(), 0666);
  // The kernel's deepest queue, as the TCP listener has: a burst of clients (a dashboard's streams,
  // a fleet's watchers) must wait for the accept loop, not be refused while it catches up under
  // load (220 watches at once lost 52 with a queue of 128 on a loaded 2-CPU machine).
  if (listen(fd, SOMAXCONN) != 0) {
    int err = errno;
    close(fd);
    unlink(path.c_str());
    return Status::FromErrno(err, fmt::format("listening on {}", path));
  }
  Result<std::unique_ptr<AcceptLoop>> loop = AcceptLoop::Create(fd, "unix socket " + path, log);
  if (!loop.ok()) {
    unlink(path.c_str());
    return loop.status();
  }
  return std::unique_ptr<UnixSocketListener>(new UnixSocketListener(path, std::move(*loop), log));
}

UnixSocketListener::~UnixSocketListener() { Stop(); }

void UnixSocketListener::Start(PeerAccess access, LocalCallers& callers, grpc::Server* refusal_server) {
  loop_->Start([this, access, &callers, refusal_server](int conn) {
    Result<PeerCredentials> peer = ReadPeerCredentials(conn);
    Result<ClientIdentity> identity = peer.ok() ? access.Identify(*peer) : Result<ClientIdentity>(peer.status());
    // gRPC drives the connection with its event engine (AcceptLoop made it non-blocking), and owns
    // `conn` from here on.
    Status handed = identity.ok() ? callers.Hand(conn, *identity) : identity.status();
    if (handed.ok()) {
      log_.Debug("unix socket: accepted {} as {} (pid {})", identity->name, ClientRoleName(identity->role), peer->pid);
      return;
    }
    log_.Warning("unix socket: {}", handed.message());
    grpc::AddInsecureChannelFromFd(refusal_server, conn);
  });
}

void UnixSocketListener::Stop() {
  if (stopped_) return;
  stopped_ = true;
  loop_->Stop();
  unlink(path_.c_str());
}

}  // namespace temper
