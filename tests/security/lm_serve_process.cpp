#include "security/lm_serve_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <regex>
#include <thread>

#include <fmt/format.h>

namespace temper::testing {

LmServeProcess::LmServeProcess(const TempDir& dir, std::vector<std::string> flags)
    : dir_(dir), flags_(std::move(flags)), log_path_(dir / "temper-lm.log") {}

LmServeProcess::~LmServeProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

Status LmServeProcess::Start() {
  std::vector<std::string> argv = {std::string(TEMPER_BINARY_DIR) + "/engine/tools/temper-lm", "serve", "--port", "0"};
  if (std::find(flags_.begin(), flags_.end(), "--synthetic") == flags_.end() &&
      std::find(flags_.begin(), flags_.end(), "--model") == flags_.end()) {
    argv.insert(argv.end(), {"--model", std::string(TEMPER_TEST_DATA_DIR) + "/gemma4-tiny"});
  }
  argv.insert(argv.end(), flags_.begin(), flags_.end());
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  pid_ = fork();
  if (pid_ < 0) return Status::FromErrno(errno, "fork");
  if (pid_ == 0) {
    int log = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int in = open("/dev/null", O_RDONLY);
    dup2(in, 0);
    dup2(log, 1);
    dup2(log, 2);
    execv(args[0], args.data());
    _exit(127);
  }
  const std::regex serving(R"(serving '.*' on http://[^:]+:([0-9]+))");
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    std::smatch m;
    std::string log = Log();
    if (std::regex_search(log, m, serving)) {
      port_ = std::stoi(m[1]);
      return Status::OK();
    }
    if (!Alive()) return Status::Unavailable("temper-lm serve exited during start-up:\n" + Log());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return Status::DeadlineExceeded("temper-lm serve did not say it was serving within 60 s:\n" + Log());
}

int LmServeProcess::Stop() {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool LmServeProcess::Alive() {
  if (pid_ <= 0) return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) != pid_) return true;
  pid_ = -1;
  return false;
}

std::string LmServeProcess::Log() const { return ReadFileOrEmpty(log_path_); }

bool SendAll(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

namespace {

// True once `got` holds a head and as much body as its Content-Length says.
bool Complete(const std::string& got) {
  size_t head_end = got.find("\r\n\r\n");
  if (head_end == std::string::npos) return false;
  std::smatch m;
  std::string head = got.substr(0, head_end);
  static const std::regex length(R"(\r\n[Cc]ontent-[Ll]ength: *([0-9]+))");
  if (!std::regex_search(head, m, length)) return false;
  return got.size() >= head_end + 4 + std::stoull(m[1]);
}

}  // namespace

std::string ReadResponse(int fd, std::chrono::milliseconds timeout) {
  std::string got;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!Complete(got)) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    char buf[65536];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

std::string ReadUntil(int fd, const std::string& needle, std::chrono::milliseconds timeout) {
  std::string got;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (got.find(needle) == std::string::npos) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    char buf[4096];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

int StatusOf(const std::string& response) {
  std::smatch m;
  static const std::regex status_line(R"(^HTTP/1\.[01] ([0-9]{3}))");
  return std::regex_search(response, m, status_line) ? std::stoi(m[1]) : 0;
}

std::string BodyOf(const std::string& response) {
  size_t head_end = response.find("\r\n\r\n");
  return head_end == std::string::npos ? "" : response.substr(head_end + 4);
}

}  // namespace temper::testing
