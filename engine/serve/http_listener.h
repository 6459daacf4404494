// HttpListener: the front of `temper-lm serve`: it owns the listening socket and every connection,
// and hands a request to a worker thread only once the request has fully arrived.
//
// cpp-httplib's own server gives each connection a thread for as long as it lives and only bounds
// the time between two reads, so a client that sends one header byte every few seconds holds a
// thread forever, and a few dozen such clients hold them all (slowloris). Here one thread reads
// every connection without blocking (epoll) and enforces deadlines on the whole of each phase:
//   - a new connection must deliver its request head (request line and headers) within
//     header_timeout of being accepted, a kept-alive one within idle_timeout plus header_timeout;
//   - a body (Content-Length, up to max_body_bytes) must arrive within body_timeout of the head;
//   - a reply must make progress at least every write_timeout.
// Late clients get 408, heads over max_head_bytes 431, and connections beyond max_connections (or
// bodies beyond max_buffered_bytes held at once) 503; then the connection is closed. Only complete
// requests reach the `workers` threads, which run httplib's request processing (HttpRouter: routes,
// parsing, responses, chunked streaming) over the bytes already read. A body over max_body_bytes is
// not read: the request goes to a worker at once, so the route's pre-routing check can answer 413,
// and the connection is closed after a lingering drain (so the client sees the answer, not a reset).
// A chunked request body is read by the worker, still within body_timeout.
//
// While a handler runs, ConnectionOf(request) tells it whether its client has gone, so it can stop
// work nobody will read. Accept failures go through AcceptBackoff (no spin on EMFILE).
//
// Thread safety: Start, port and Stop from one thread; ConnectionOf from handlers.
// Ownership: borrows the router and logger, which must outlive the listener.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <httplib.h>

#include "common/log.h"
#include "common/status.h"

namespace temper::engine {

struct HttpListenerOptions {
  std::string host = "127.0.0.1";
  int port = 0;      // 0: any free port
  int workers = 32;  // requests processed at once (a streaming reply holds one for its length)
  size_t max_connections = 1024;
  size_t max_head_bytes = 64 << 10;
  size_t max_body_bytes = 8 << 20;
  size_t max_buffered_bytes = 256 << 20;  // bodies held for all connections together
  size_t max_requests_per_connection = 100;
  std::chrono::milliseconds header_timeout{10000};
  std::chrono::milliseconds body_timeout{30000};
  std::chrono::milliseconds idle_timeout{60000};
  std::chrono::milliseconds write_timeout{30000};
  // The body of the listener's own error replies (408, 431, 503), given the status and a message.
  std::function<std::string(int status, const std::string& message)> error_body;
};

// cpp-httplib's request processing without its socket handling: routes are registered on it as on
// an httplib::Server, and HttpListener feeds it one complete request at a time.
class HttpRouter : public httplib::Server {
 public:
  using httplib::Server::process_request;
  // httplib ends a streamed reply early once it believes its listening socket closed; the
  // listener says whether it serves (`serving`) and so when streams must end.
  void SetServing(bool serving) { svr_sock_ = serving ? 0 : INVALID_SOCKET; }
};

// The connection a request came on, as its handler sees it.
class HttpConnection {
 public:
  explicit HttpConnection(int fd) : fd_(fd) {}
  // True once the client has closed, half-closed or reset the connection, or the request is over:
  // nobody will read a reply. An HTTP client that shuts down its sending side has hung up.
  bool ClientGone() const;
  // Called when the request is over, before the socket may close (and its number be reused).
  void Detach() { fd_.store(-1); }

 private:
  std::atomic<int> fd_;
};

class HttpListener {
 public:
  // Binds host:port and starts the reading thread and the workers. Unavailable naming the address
  // when it cannot bind; InvalidArgument for options out of range.
  static Result<std::unique_ptr<HttpListener>> Start(HttpRouter& router, HttpListenerOptions options,
                                                     const Logger& log);
  ~HttpListener();  // stops
  HttpListener(const HttpListener&) = delete;
  HttpListener& operator=(const HttpListener&) = delete;

  int port() const { return port_; }
  // Stops accepting, closes waiting connections, lets the requests being processed finish (their
  // streams end once they see the router stop), and joins every thread. Idempotent.
  void Stop();

  // The connection `request` arrived on, while its handler runs; null for any other request.
  std::shared_ptr<const HttpConnection> ConnectionOf(const httplib::Request& request) const;

 private:
  struct Conn;
  HttpListener(HttpRouter& router, HttpListenerOptions options, const Logger& log);
  void Loop();
  void AcceptAll();
  void OnReadable(Conn& c);
  void Advance(std::unique_ptr<Conn>& c);
  void Dispatch(std::unique_ptr<Conn> c);
  void Rearm(std::unique_ptr<Conn> c);
  void Refuse(std::unique_ptr<Conn> c, int status, const std::string& message);
  void Linger(std::unique_ptr<Conn> c);
  void CloseConn(std::unique_ptr<Conn> c);
  void Sweep();
  void Work();
  void Serve(std::unique_ptr<Conn> c);
  void Wake();

  HttpRouter& router_;
  const HttpListenerOptions options_;
  const Logger& log_;
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<size_t> open_connections_{0};
  std::atomic<size_t> buffered_bytes_{0};

  // The reading thread's connections, by fd.
  std::unordered_map<int, std::unique_ptr<Conn>> reading_;

  std::mutex mu_;  // guards ready_, returned_
  std::condition_variable work_cv_;
  std::deque<std::unique_ptr<Conn>> ready_;      // complete requests for the workers
  std::vector<std::unique_ptr<Conn>> returned_;  // back from the workers: keep-alive or linger

  mutable std::mutex requests_mu_;
  std::unordered_map<const httplib::Request*, std::shared_ptr<HttpConnection>> requests_;

  std::thread loop_thread_;
  std::vector<std::thread> workers_;
};

}  // namespace temper::engine
