#include "orchestrator/server/tcp_listener.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace temper {

Result<std::unique_ptr<TcpListener>> TcpListener::Bind(const std::string& address, const Logger& log) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return Status::InvalidArgument(fmt::format("'{}' is not host:port", address));
  std::string host = address.substr(0, colon);
  const std::string port = address.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  int rc = getaddrinfo(host.empty() || host == "*" ? nullptr : host.c_str(), port.c_str(), &hints, &found);
  if (rc != 0) return Status::Unavailable(fmt::format("cannot listen on {}: {}", address, gai_strerror(rc)));
  std::string why = "no address";
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
      why = std::strerror(errno);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) return Status::Unavailable(fmt::format("cannot listen on {}: {}", address, why));
  TEMPER_ASSIGN_OR_RETURN(std::unique_ptr<AcceptLoop> loop, AcceptLoop::Create(fd, "TCP port " + address, log));
  return std::unique_ptr<TcpListener>(new TcpListener(std::move(loop)));
}

void TcpListener::Start(grpc::experimental::ExternalConnectionAcceptor* acceptor) {
  const int listen_fd = loop_->listen_fd();
  loop_->Start([acceptor, listen_fd](int conn) {
    int one = 1;
    setsockopt(conn, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    grpc::experimental::ExternalConnectionAcceptor::NewConnectionParameters p;
    p.listener_fd = listen_fd;
    p.fd = conn;  // gRPC owns it from here on
    acceptor->HandleNewConnection(&p);
  });
}

}  // namespace temper
