#include "loop/headless_browser.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include <fmt/format.h>

namespace temper::testing {
namespace {

constexpr auto kReplyTimeout = std::chrono::seconds(30);

std::string DecodeBase64(const std::string& in) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  uint32_t bits = 0;
  int count = 0;
  for (char c : in) {
    int v = value(c);
    if (v < 0) continue;  // padding, line ends
    bits = (bits << 6) | static_cast<uint32_t>(v);
    count += 6;
    if (count >= 8) {
      count -= 8;
      out += static_cast<char>((bits >> count) & 0xff);
    }
  }
  return out;
}

}  // namespace

Result<std::unique_ptr<HeadlessBrowser>> HeadlessBrowser::Open(const std::string& url, const std::string& profile_dir) {
  int commands[2], replies[2];
  if (pipe2(commands, O_CLOEXEC) != 0 || pipe2(replies, O_CLOEXEC) != 0) return Status::IOError("pipe2");
  std::unique_ptr<HeadlessBrowser> b(new HeadlessBrowser());
  const std::string profile = "--user-data-dir=" + profile_dir;
  b->pid_ = fork();
  if (b->pid_ == 0) {
    // The DevTools pipe is fds 3 (commands in) and 4 (replies out); nothing else stays open.
    dup2(commands[0], 3);
    dup2(replies[1], 4);
    int null = open("/dev/null", O_RDWR);
    dup2(null, 0);
    dup2(null, 1);
    dup2(null, 2);
    close_range(5, ~0U, 0);
    execl(kChromium, kChromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
          "--remote-debugging-pipe", "--window-size=1400,900", profile.c_str(), "about:blank",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(commands[0]);
  close(replies[1]);
  b->to_browser_ = commands[1];
  b->from_browser_ = replies[0];
  if (b->pid_ < 0) return Status::IOError("fork");
  TEMPER_ASSIGN_OR_RETURN(nlohmann::json target, b->Call("Target.createTarget", {{"url", url}}, true));
  TEMPER_ASSIGN_OR_RETURN(
      nlohmann::json attached,
      b->Call("Target.attachToTarget", {{"targetId", target["targetId"]}, {"flatten", true}}, true));
  b->session_ = attached["sessionId"].get<std::string>();
  return b;
}

HeadlessBrowser::~HeadlessBrowser() {
  if (pid_ > 0) {
    if (to_browser_ >= 0) (void)Call("Browser.close", nlohmann::json::object(), true);
    for (int i = 0; i < 50 && waitpid(pid_, nullptr, WNOHANG) == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (kill(pid_, 0) == 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  if (to_browser_ >= 0) close(to_browser_);
  if (from_browser_ >= 0) close(from_browser_);
}

Result<nlohmann::json> HeadlessBrowser::Call(const std::string& method, nlohmann::json params, bool browser_level) {
  const int id = next_id_++;
  nlohmann::json message = {{"id", id}, {"method", method}, {"params", std::move(params)}};
  if (!browser_level) message["sessionId"] = session_;
  std::string bytes = message.dump();
  bytes.push_back('\0');
  for (size_t sent = 0; sent < bytes.size();) {
    ssize_t n = write(to_browser_, bytes.data() + sent, bytes.size() - sent);
    if (n <= 0) return Status::IOError(fmt::format("DevTools pipe: writing {} failed", method));
    sent += static_cast<size_t>(n);
  }
  const auto deadline = std::chrono::steady_clock::now() + kReplyTimeout;
  while (true) {
    // Whole messages already read: events are skipped, the reply to `id` returned.
    for (size_t end; (end = pending_.find('\0')) != std::string::npos;) {
      nlohmann::json reply = nlohmann::json::parse(pending_.substr(0, end), nullptr, false);
      pending_.erase(0, end + 1);
      if (!reply.is_object() || !reply.contains("id") || reply["id"] != id) continue;
      if (reply.contains("error")) return Status::Internal(fmt::format("{}: {}", method, reply["error"].dump()));
      return reply["result"];
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return Status::DeadlineExceeded(fmt::format("DevTools: no reply to {}", method));
    pollfd p{from_browser_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[65536];
    ssize_t n = read(from_browser_, buf, sizeof buf);
    if (n <= 0) return Status::Unavailable(fmt::format("DevTools: the browser closed the pipe during {}", method));
    pending_.append(buf, static_cast<size_t>(n));
  }
}

Result<nlohmann::json> HeadlessBrowser::Evaluate(const std::string& expression) {
  TEMPER_ASSIGN_OR_RETURN(nlohmann::json r,
                          Call("Runtime.evaluate", {{"expression", expression}, {"returnByValue", true}}));
  if (r.contains("exceptionDetails")) return Status::Internal("page: " + r["exceptionDetails"].dump());
  return r["result"].value("value", nlohmann::json());
}

bool HeadlessBrowser::WaitFor(const std::string& expression, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    Result<nlohmann::json> v = Evaluate(expression);
    if (v.ok() && v->is_boolean() && v->get<bool>()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

Status HeadlessBrowser::Screenshot(const std::string& path) {
  TEMPER_ASSIGN_OR_RETURN(nlohmann::json shot, Call("Page.captureScreenshot", {{"format", "png"}}));
  std::ofstream out(path, std::ios::binary);
  out << DecodeBase64(shot["data"].get<std::string>());
  return out ? Status::OK() : Status::IOError("writing " + path);
}

}  // namespace temper::testing
