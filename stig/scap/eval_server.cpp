#include "stig/scap/eval_server.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace temper::stig {

namespace {
constexpr std::size_t kMaxLine = 1 << 20;
// How long a killed server's processes may take to be gone (the kernel tears down a pid
// namespace in milliseconds; this only bounds a stuck one).
constexpr auto kExitWait = std::chrono::seconds(10);
}  // namespace

Result<std::unique_ptr<EvalServer>> EvalServer::Start(const ProcessSpec& spec, std::chrono::milliseconds timeout) {
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    return Status::FromErrno(errno, "socketpair for the evaluation server");
  }
  UniqueFd ours(pair[0]), theirs(pair[1]);
  TEMPER_ASSIGN_OR_RETURN(StartedProcess p, StartProcess(spec, theirs.get()));
  theirs.Reset();
  std::unique_ptr<EvalServer> server(new EvalServer(p.pid, std::move(ours), std::move(p.err)));
  auto line = server->ReadLine(std::chrono::steady_clock::now() + timeout);
  if (!line.ok()) return line.status().WithContext("starting the evaluation server");
  nlohmann::json j = nlohmann::json::parse(*line, nullptr, false);
  if (!j.is_object() || !j.value("ready", false)) {
    return server->Break(Status::Internal("the evaluation server said " + *line + " instead of ready"));
  }
  return server;
}

namespace {

// The pids of `pid` and all its descendants, from /proc's children lists.
std::vector<pid_t> ProcessTree(pid_t pid) {
  std::vector<pid_t> tree = {pid};
  for (std::size_t i = 0; i < tree.size(); ++i) {
    std::ifstream tasks(fmt::format("/proc/{}/task/{}/children", tree[i], tree[i]));
    pid_t child;
    while (tasks >> child) tree.push_back(child);
  }
  return tree;
}

}  // namespace

void EvalServer::KillTree() {
  if (killed_) return;
  killed_ = true;
  // The evaluation child has its root and working directory in the caller's tree (a scratch view
  // about to be unmounted): every process of the sandbox must be gone, not only bwrap, before the
  // caller goes on. Their pidfds say when; bwrap's pid namespace kills the rest once its init dies.
  std::vector<UniqueFd> pidfds;
  for (pid_t p : ProcessTree(pid_)) {
    if (p == pid_) continue;
    int fd = static_cast<int>(::syscall(SYS_pidfd_open, p, 0));  // glibc 2.36 declares it without C linkage
    if (fd >= 0) pidfds.emplace_back(fd);
  }
  ::kill(-pid_, SIGKILL);
  int st;
  while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
  }
  auto deadline = std::chrono::steady_clock::now() + kExitWait;
  for (const UniqueFd& fd : pidfds) {
    pollfd pfd{fd.get(), POLLIN, 0};
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || ::poll(&pfd, 1, static_cast<int>(left.count())) != 0) break;
    }
  }
}

EvalServer::~EvalServer() {
  socket_.Reset();
  KillTree();
}

std::string EvalServer::DrainStderr() {
  std::string err;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(err_.get(), buf, sizeof buf)) > 0 && err.size() < 65536)
    err.append(buf, static_cast<std::size_t>(n));
  return err;
}

Status EvalServer::Break(Status s) {
  broken_ = true;
  KillTree();
  return s;
}

Result<std::string> EvalServer::ReadLine(std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    if (auto nl = buffer_.find('\n'); nl != std::string::npos) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return line;
    }
    if (buffer_.size() > kMaxLine) return Break(Status::Internal("the evaluation server wrote a line over 1 MiB"));
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return Break(Status::DeadlineExceeded("the evaluation server did not answer in time"));
    pollfd pfd{socket_.get(), POLLIN, 0};
    int rc = ::poll(&pfd, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (rc < 0 && errno != EINTR) return Break(Status::FromErrno(errno, "polling the evaluation server"));
    if (rc <= 0) continue;
    char buf[65536];
    ssize_t n = ::recv(socket_.get(), buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::string err = DrainStderr();
      return Break(Status::Internal("the evaluation server ended" + (err.empty() ? "" : ": " + err)));
    }
    buffer_.append(buf, static_cast<std::size_t>(n));
  }
}

Result<EvalServer::Reply> EvalServer::Evaluate(const Request& request, std::chrono::milliseconds timeout) {
  if (broken_) return Status::FailedPrecondition("the evaluation server is broken");
  auto start = std::chrono::steady_clock::now();
  nlohmann::json j = {{"root", request.root},
                      {"rules", request.rules},
                      {"results", request.out_dir_fd >= 0},
                      {"fix", request.fix},
                      {"target", request.target_name}};
  std::string line = j.dump() + "\n";
  int fds[2] = {request.tree_fd, request.out_dir_fd};
  std::size_t nfds = request.out_dir_fd >= 0 ? 2 : 1;
  alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof fds)] = {};
  struct iovec iov {
    line.data(), line.size()
  };
  struct msghdr msg {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
  struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
  std::memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
  // The request is small: the socket buffer takes it whole; a short send is a broken protocol.
  ssize_t sent;
  while ((sent = ::sendmsg(socket_.get(), &msg, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
  }
  if (sent != static_cast<ssize_t>(line.size())) {
    return Break(Status::Internal(fmt::format("sending a request to the evaluation server: {}",
                                              sent < 0 ? std::strerror(errno) : "short write")));
  }

  auto deadline = start + timeout;
  Reply reply;
  for (;;) {
    auto got = ReadLine(deadline);
    if (!got.ok()) {
      if (got.status().code() == StatusCode::kDeadlineExceeded) {
        return Status::DeadlineExceeded(
            fmt::format("timed out after {:.1f} s",
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()));
      }
      return got.status();
    }
    nlohmann::json r = nlohmann::json::parse(*got, nullptr, false);
    if (!r.is_object() || !r.value("end", false)) {
      reply.out += *got + "\n";
      continue;
    }
    if (r.contains("error")) {
      return Break(Status::Internal("the evaluation server refused a request: " + r.value("error", "")));
    }
    if (r.contains("signal")) {
      reply.failure = fmt::format("killed by signal {}: {}", r.value("signal", 0), r.value("stderr", ""));
    } else if (r.value("exit", -1) != 0) {
      reply.failure = fmt::format("exit {}: {}", r.value("exit", -1), r.value("stderr", ""));
    }
    reply.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return reply;
  }
}

}  // namespace temper::stig
