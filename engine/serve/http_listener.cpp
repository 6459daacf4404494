#include "engine/serve/http_listener.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "common/accept_backoff.h"

namespace temper::engine {

namespace {

using Clock = std::chrono::steady_clock;

// After the last reply on a connection the listener closes, it reads and drops what the client
// still sends for this long, so that closing with unread data (which makes the kernel send a reset)
// does not destroy the reply before the client read it.
constexpr std::chrono::milliseconds kLinger{2000};
// How often deadlines are checked.
constexpr std::chrono::milliseconds kSweepInterval{100};
constexpr size_t kReadChunk = 64 << 10;
constexpr int kReadsPerEvent = 16;

enum class Phase {
  kIdle,  // kept alive, waiting for the first byte of the next request
  kHead,  // reading the request line and headers
  kBody,  // reading a Content-Length body
  kDrain  // the reply is sent and the sending side shut: dropping what still arrives
};

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

const char* Reason(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 408:
      return "Request Timeout";
    case 431:
      return "Request Header Fields Too Large";
    default:
      return "Service Unavailable";
  }
}

// Waits until `fd` reports anything for `events` (ready, or an error or hang-up the next call will
// see) or `deadline` passes. False on timeout.
bool WaitFor(int fd, short events, Clock::time_point deadline) {
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, events, 0};
    int r = poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (r < 0 && errno != EINTR) return false;
    if (r > 0) return true;
  }
}

bool PeerClosed(int fd) {
  pollfd p{fd, POLLRDHUP, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

void Address(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  int r = peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len)
               : getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  char host[NI_MAXHOST] = "";
  char serv[NI_MAXSERV] = "";
  if (r == 0 && getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof host, serv, sizeof serv,
                            NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
    ip = host;
    port = std::atoi(serv);
  }
}

// One request as httplib reads it: first the bytes the listener already read, then (a chunked
// body only) the socket, until the body's deadline. Writes wait at most write_timeout for progress.
class RequestStream final : public httplib::Stream {
 public:
  RequestStream(int fd, const std::string& buffered, Clock::time_point read_deadline,
                std::chrono::milliseconds write_timeout)
      : fd_(fd), buffered_(buffered), read_deadline_(read_deadline), write_timeout_(write_timeout) {}

  bool is_readable() const override {
    if (pos_ < buffered_.size()) return true;
    pollfd p{fd_, POLLIN, 0};
    return poll(&p, 1, 0) > 0 && (p.revents & POLLIN) != 0;
  }
  bool is_writable() const override { return !PeerClosed(fd_) && WaitFor(fd_, POLLOUT, Clock::now() + write_timeout_); }
  ssize_t read(char* ptr, size_t size) override {
    if (pos_ < buffered_.size()) {
      size_t n = std::min(size, buffered_.size() - pos_);
      std::memcpy(ptr, buffered_.data() + pos_, n);
      pos_ += n;
      return static_cast<ssize_t>(n);
    }
    if (!WaitFor(fd_, POLLIN, read_deadline_)) return -1;
    ssize_t n = recv(fd_, ptr, size, MSG_DONTWAIT);
    if (n > 0) from_socket_ = true;
    return n;
  }
  ssize_t write(const char* ptr, size_t size) override {
    size_t done = 0;
    while (done < size) {
      ssize_t n = send(fd_, ptr + done, size - done, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        done += static_cast<size_t>(n);
      } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        if (!WaitFor(fd_, POLLOUT, Clock::now() + write_timeout_)) {
          failed_ = true;
          return -1;
        }
      } else {
        failed_ = true;
        return -1;
      }
    }
    return static_cast<ssize_t>(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override { Address(fd_, true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { Address(fd_, false, ip, port); }
  socket_t socket() const override { return fd_; }

  size_t buffered_consumed() const { return pos_; }
  bool read_from_socket() const { return from_socket_; }
  bool failed() const { return failed_; }

 private:
  const int fd_;
  const std::string& buffered_;
  size_t pos_ = 0;
  const Clock::time_point read_deadline_;
  const std::chrono::milliseconds write_timeout_;
  bool from_socket_ = false;
  bool failed_ = false;
};

// What the listener needs to know of a request head: how its body arrives.
struct Head {
  std::optional<size_t> content_length;
  bool chunked = false;                     // Transfer-Encoding: the worker reads the body
  bool bad_length = false;                  // unparseable or conflicting Content-Length
  size_t expect_begin = 0, expect_end = 0;  // an "Expect: 100-continue" line, when expect_end > 0
};

Head ParseHead(std::string_view head) {
  Head h;
  size_t pos = head.find("\r\n");  // skip the request line
  while (pos != std::string_view::npos && pos + 2 < head.size()) {
    const size_t begin = pos + 2;
    size_t end = head.find("\r\n", begin);
    if (end == std::string_view::npos) end = head.size();
    std::string_view line = head.substr(begin, end - begin);
    const size_t colon = line.find(':');
    if (colon != std::string_view::npos) {
      const std::string name = Lower(Trim(line.substr(0, colon)));
      const std::string_view value = Trim(line.substr(colon + 1));
      if (name == "content-length") {
        size_t n = 0;
        auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
        if (ec != std::errc() || p != value.data() + value.size() || (h.content_length && *h.content_length != n)) {
          h.bad_length = true;
        } else {
          h.content_length = n;
        }
      } else if (name == "transfer-encoding") {
        h.chunked = true;
      } else if (name == "expect" && Lower(value) == "100-continue") {
        h.expect_begin = begin;
        h.expect_end = end + 2;
      }
    }
    pos = end;
  }
  return h;
}

}  // namespace

struct HttpListener::Conn {
  Conn(int fd_in, std::atomic<size_t>& open_in, std::atomic<size_t>& buffered_in)
      : fd(fd_in), open(open_in), buffered(buffered_in) {
    open.fetch_add(1);
  }
  ~Conn() {
    Release();
    if (fd >= 0) close(fd);
    open.fetch_sub(1);
  }
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;
  void Release() {
    buffered.fetch_sub(reserved);
    reserved = 0;
  }

  const int fd;
  std::atomic<size_t>& open;
  std::atomic<size_t>& buffered;
  std::string buf;     // received and not yet handed to httplib
  size_t scanned = 0;  // the search for the head's end resumes here
  Phase phase = Phase::kHead;
  Clock::time_point deadline;
  size_t head_bytes = 0;     // of the request being read, once its head is complete
  size_t body_bytes = 0;     // its Content-Length, when the listener reads the body
  bool body_unread = false;  // a chunked body (the worker reads it) or one too large to read
  size_t reserved = 0;       // of buffered_bytes_, for the body
  size_t requests = 0;
};

HttpListener::HttpListener(HttpRouter& router, HttpListenerOptions options, const Logger& log)
    : router_(router), options_(std::move(options)), log_(log) {}

bool HttpConnection::ClientGone() const {
  const int fd = fd_.load();
  return fd < 0 || PeerClosed(fd);
}

Result<std::unique_ptr<HttpListener>> HttpListener::Start(HttpRouter& router, HttpListenerOptions options,
                                                          const Logger& log) {
  if (options.workers < 1) return Status::InvalidArgument("HTTP server: workers must be at least 1");
  if (options.max_connections < 1 || options.max_requests_per_connection < 1 || options.max_head_bytes < 1024) {
    return Status::InvalidArgument(
        "HTTP server: max_connections, max_requests_per_connection and max_head_bytes (>= 1024) out of range");
  }
  for (auto t : {options.header_timeout, options.body_timeout, options.idle_timeout, options.write_timeout}) {
    if (t.count() <= 0) return Status::InvalidArgument("HTTP server: timeouts must be positive");
  }
  std::unique_ptr<HttpListener> l(new HttpListener(router, std::move(options), log));
  const std::string where = fmt::format("{}:{}", l->options_.host, l->options_.port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(l->options_.port);
  int rc = getaddrinfo(l->options_.host.empty() ? nullptr : l->options_.host.c_str(), port.c_str(), &hints, &found);
  if (rc != 0) return Status::Unavailable(fmt::format("HTTP server: cannot bind {}: {}", where, gai_strerror(rc)));
  std::string why = "no address";
  for (addrinfo* a = found; a != nullptr && l->listen_fd_ < 0; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, SOMAXCONN) == 0) {
      l->listen_fd_ = fd;
    } else {
      why = std::strerror(errno);
      close(fd);
    }
  }
  freeaddrinfo(found);
  if (l->listen_fd_ < 0) return Status::Unavailable(fmt::format("HTTP server: cannot bind {}: {}", where, why));
  std::string ignored_ip;
  Address(l->listen_fd_, false, ignored_ip, l->port_);
  l->epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  l->wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (l->epoll_fd_ < 0 || l->wake_fd_ < 0) return Status::FromErrno(errno, "HTTP server: epoll/eventfd");
  for (int fd : {l->listen_fd_, l->wake_fd_}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    epoll_ctl(l->epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  }
  router.SetServing(true);
  l->loop_thread_ = std::thread([p = l.get()] { p->Loop(); });
  for (int i = 0; i < l->options_.workers; ++i) l->workers_.emplace_back([p = l.get()] { p->Work(); });
  return l;
}

HttpListener::~HttpListener() {
  Stop();
  for (int fd : {listen_fd_, epoll_fd_, wake_fd_}) {
    if (fd >= 0) close(fd);
  }
}

void HttpListener::Stop() {
  if (stopping_.exchange(true)) return;
  router_.SetServing(false);
  Wake();
  if (loop_thread_.joinable()) loop_thread_.join();
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
  std::lock_guard lock(mu_);
  ready_.clear();
  returned_.clear();
}

std::shared_ptr<const HttpConnection> HttpListener::ConnectionOf(const httplib::Request& request) const {
  std::lock_guard lock(requests_mu_);
  auto it = requests_.find(&request);
  return it == requests_.end() ? nullptr : it->second;
}

void HttpListener::Wake() {
  uint64_t one = 1;
  ssize_t ignored = write(wake_fd_, &one, sizeof one);
  (void)ignored;
}

void HttpListener::Loop() {
  AcceptBackoff backoff(fmt::format("HTTP {}:{}", options_.host, port_), log_);
  bool accepting = true;
  std::optional<Clock::time_point> resume;  // accepting paused until then
  Clock::time_point last_sweep = Clock::now();
  epoll_event events[64];
  while (!stopping_.load()) {
    int n = epoll_wait(epoll_fd_, events, 64, static_cast<int>(kSweepInterval.count()));
    if (n < 0 && errno != EINTR) {
      log_.Error("HTTP server: epoll_wait failed ({}); no longer serving", std::strerror(errno));
      break;
    }
    for (int i = 0; i < std::max(n, 0); ++i) {
      const int fd = events[i].data.fd;
      if (fd == wake_fd_) {
        uint64_t count;
        ssize_t ignored = read(wake_fd_, &count, sizeof count);
        (void)ignored;
        std::vector<std::unique_ptr<Conn>> back;
        {
          std::lock_guard lock(mu_);
          back.swap(returned_);
        }
        for (auto& c : back) Rearm(std::move(c));
      } else if (fd == listen_fd_) {
        while (true) {
          int conn = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (conn < 0) {
            AcceptBackoff::Action action = backoff.OnError(errno);
            if (action == AcceptBackoff::Action::kNext) continue;
            if (action == AcceptBackoff::Action::kPause || action == AcceptBackoff::Action::kStop) {
              epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
              accepting = false;
              if (action == AcceptBackoff::Action::kPause) resume = Clock::now() + backoff.pause();
            }
            break;
          }
          backoff.OnAccepted();
          auto c = std::make_unique<Conn>(conn, open_connections_, buffered_bytes_);
          if (open_connections_.load() > options_.max_connections) {
            Refuse(std::move(c), 503,
                   fmt::format("the server has {} connections open, its limit; try again later",
                               options_.max_connections));
            continue;
          }
          int one = 1;
          setsockopt(conn, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          c->deadline = Clock::now() + options_.header_timeout;
          Rearm(std::move(c));
        }
      } else if (auto it = reading_.find(fd); it != reading_.end()) {
        OnReadable(*it->second);
        Advance(it->second);
      }
    }
    if (!accepting && resume && Clock::now() >= *resume) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.fd = listen_fd_;
      epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
      accepting = true;
      resume.reset();
    }
    if (Clock::now() - last_sweep >= kSweepInterval) {
      Sweep();
      last_sweep = Clock::now();
    }
  }
  reading_.clear();
}

void HttpListener::Rearm(std::unique_ptr<Conn> c) {
  if (c->phase != Phase::kDrain) {
    if (c->requests == 0) {
      c->phase = Phase::kHead;  // a new connection: its head is due header_timeout after the accept
    } else {                    // kept alive: the next request's deadlines start now
      c->phase = c->buf.empty() ? Phase::kIdle : Phase::kHead;
      c->deadline = Clock::now() + (c->phase == Phase::kIdle ? options_.idle_timeout : options_.header_timeout);
    }
    c->scanned = 0;
    c->head_bytes = c->body_bytes = 0;
    c->body_unread = false;
  }
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.fd = c->fd;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, c->fd, &ev);
  const int fd = c->fd;
  auto& slot = reading_[fd] = std::move(c);
  if (slot->phase == Phase::kHead) Advance(slot);  // a pipelined request may be complete already
}

void HttpListener::OnReadable(Conn& c) {
  char chunk[kReadChunk];
  // At most kReadsPerEvent chunks, so one fast sender cannot keep this thread from the others; the
  // socket stays readable and the next round takes more.
  for (int reads = 0; reads < kReadsPerEvent; ++reads) {
    size_t want = kReadChunk;
    if (c.phase == Phase::kBody) {
      const size_t need = c.head_bytes + c.body_bytes;
      if (c.buf.size() >= need) return;
      want = std::min(want, need - c.buf.size());
    } else if (c.phase != Phase::kDrain && c.buf.size() > options_.max_head_bytes) {
      return;  // Advance refuses it
    }
    ssize_t n = recv(c.fd, chunk, want, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    if (n <= 0) {  // the client closed (or reset) the connection
      c.phase = Phase::kDrain;
      c.deadline = Clock::now();  // the sweep closes it
      epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
      return;
    }
    if (c.phase == Phase::kDrain) continue;
    if (c.phase == Phase::kIdle) {
      c.phase = Phase::kHead;
      c.deadline = Clock::now() + options_.header_timeout;
    }
    c.buf.append(chunk, static_cast<size_t>(n));
  }
}

void HttpListener::Advance(std::unique_ptr<Conn>& slot) {
  Conn& c = *slot;
  if (c.phase == Phase::kHead) {
    size_t from = c.scanned >= 3 ? c.scanned - 3 : 0;
    size_t end = c.buf.find("\r\n\r\n", from);
    if (end == std::string::npos) {
      c.scanned = c.buf.size();
      if (c.buf.size() > options_.max_head_bytes) {
        auto owned = std::move(reading_.extract(c.fd).mapped());
        epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, owned->fd, nullptr);
        Refuse(std::move(owned), 431,
               fmt::format("the request line and headers are over {} bytes", options_.max_head_bytes));
      }
      return;
    }
    c.head_bytes = end + 4;
    Head head = ParseHead(std::string_view(c.buf).substr(0, end + 2));
    if (head.bad_length) {
      auto owned = std::move(reading_.extract(c.fd).mapped());
      epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, owned->fd, nullptr);
      Refuse(std::move(owned), 400, "Content-Length is not one number");
      return;
    }
    const size_t length = head.content_length.value_or(0);
    if (head.chunked || length > options_.max_body_bytes) {
      c.body_unread = true;  // read by the worker, or answered 413 without being read
    } else if (length > 0) {
      if (buffered_bytes_.fetch_add(length) + length > options_.max_buffered_bytes) {
        buffered_bytes_.fetch_sub(length);
        auto owned = std::move(reading_.extract(c.fd).mapped());
        epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, owned->fd, nullptr);
        Refuse(std::move(owned), 503, "the server holds as many request bodies as it may; try again later");
        return;
      }
      c.reserved = length;
      c.body_bytes = length;
      c.phase = Phase::kBody;
      c.deadline = Clock::now() + options_.body_timeout;
      if (head.expect_end > 0) {
        // The listener reads the body itself, so it answers the client's Expect; httplib must not
        // answer it again once the body is there.
        static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
        ssize_t ignored = send(c.fd, kContinue.data(), kContinue.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        (void)ignored;
        c.buf.erase(head.expect_begin, head.expect_end - head.expect_begin);
        c.head_bytes -= head.expect_end - head.expect_begin;
      }
    }
  }
  if (c.phase == Phase::kBody && c.buf.size() < c.head_bytes + c.body_bytes) return;
  if (c.phase == Phase::kHead || c.phase == Phase::kBody) {
    auto owned = std::move(reading_.extract(c.fd).mapped());
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, owned->fd, nullptr);
    Dispatch(std::move(owned));
  }
}

void HttpListener::Dispatch(std::unique_ptr<Conn> c) {
  {
    std::lock_guard lock(mu_);
    ready_.push_back(std::move(c));
  }
  work_cv_.notify_one();
}

void HttpListener::Refuse(std::unique_ptr<Conn> c, int status, const std::string& message) {
  const std::string body = options_.error_body ? options_.error_body(status, message) : message;
  const std::string reply = fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n"
      "Connection: close\r\n\r\n{}",
      status, Reason(status), body.size(), body);
  // Best effort: a short reply fits the socket's send buffer; a client that does not read it loses it.
  ssize_t ignored = send(c->fd, reply.data(), reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  (void)ignored;
  Linger(std::move(c));
}

void HttpListener::Linger(std::unique_ptr<Conn> c) {
  shutdown(c->fd, SHUT_WR);
  c->Release();
  c->buf.clear();
  c->phase = Phase::kDrain;
  c->deadline = Clock::now() + kLinger;
  Rearm(std::move(c));
}

void HttpListener::Sweep() {
  const Clock::time_point now = Clock::now();
  std::vector<int> late;
  for (auto& [fd, c] : reading_) {
    if (now >= c->deadline) late.push_back(fd);
  }
  for (int fd : late) {
    std::unique_ptr<Conn> c = std::move(reading_.extract(fd).mapped());
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
    if (c->phase == Phase::kHead || c->phase == Phase::kBody) {
      const std::string message =
          c->phase == Phase::kHead
              ? fmt::format("the request head did not arrive within {} ms", options_.header_timeout.count())
              : fmt::format("the request body did not arrive within {} ms", options_.body_timeout.count());
      Refuse(std::move(c), 408, message);
    }
    // kIdle (no next request) and kDrain (done draining) close here.
  }
}

void HttpListener::Work() {
  while (true) {
    std::unique_ptr<Conn> c;
    {
      std::unique_lock lock(mu_);
      work_cv_.wait(lock, [&] { return stopping_.load() || !ready_.empty(); });
      if (stopping_.load()) return;
      c = std::move(ready_.front());
      ready_.pop_front();
    }
    Serve(std::move(c));
  }
}

void HttpListener::Serve(std::unique_ptr<Conn> c) {
  auto connection = std::make_shared<HttpConnection>(c->fd);
  RequestStream stream(c->fd, c->buf, Clock::now() + options_.body_timeout, options_.write_timeout);
  const bool last = c->requests + 1 >= options_.max_requests_per_connection || c->body_unread;
  bool closed = false;
  const httplib::Request* bound = nullptr;
  const bool ok = router_.process_request(stream, last, closed, [&](httplib::Request& request) {
    bound = &request;
    std::lock_guard lock(requests_mu_);
    requests_[&request] = connection;
  });
  if (bound != nullptr) {
    std::lock_guard lock(requests_mu_);
    requests_.erase(bound);
  }
  connection->Detach();
  ++c->requests;
  c->Release();
  // The request's bytes leave the buffer, also those of a body the route answered without reading.
  const size_t request_bytes =
      c->body_unread ? stream.buffered_consumed() : std::max(stream.buffered_consumed(), c->head_bytes + c->body_bytes);
  c->buf.erase(0, std::min(request_bytes, c->buf.size()));
  const bool keep = ok && !closed && !last && !stream.failed() && !stopping_.load();
  if (!keep && (stopping_.load() || stream.failed())) return;  // closes it
  if (!keep) {
    shutdown(c->fd, SHUT_WR);
    c->buf.clear();
    c->phase = Phase::kDrain;
    c->deadline = Clock::now() + kLinger;
  }
  {
    std::lock_guard lock(mu_);
    returned_.push_back(std::move(c));
  }
  Wake();
}

}  // namespace temper::engine
