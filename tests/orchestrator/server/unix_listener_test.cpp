// UnixSocketListener::Bind against the socket file a previous temperd left: live, stale, or live
// only for a moment after the previous temperd was killed.
#include "orchestrator/server/unix_listener.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include <catch2/catch.hpp>

#include "scratch_space.h"

namespace temper {
namespace {

// A socket listening at `path`, as another process's would be; closed with the object.
class ListeningSocket {
 public:
  explicit ListeningSocket(const std::string& path) : fd_(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    REQUIRE(fd_ >= 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    REQUIRE(path.size() < sizeof addr.sun_path);
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    REQUIRE(bind(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(listen(fd_, 4) == 0);
  }
  ~ListeningSocket() { Close(); }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

TEST_CASE("binding over a previous temperd's socket: refused while it answers, taken once it is stale") {
  testing::ScratchPath dir("unix-listener");
  std::filesystem::create_directories(dir.path());
  const std::string path = dir.path() + "/temper.sock";
  const Logger log(LogLevel::kError);

  ListeningSocket other(path);
  auto refused = UnixSocketListener::Bind(path, log);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == StatusCode::kAlreadyExists);
  CHECK(refused.status().message() == "another temperd is already serving on " + path);

  // Closed: the file stays behind, and the next temperd removes it and serves.
  other.Close();
  REQUIRE(std::filesystem::exists(path));
  auto bound = UnixSocketListener::Bind(path, log);
  REQUIRE(bound.ok());
}

// After kill -9 a child the killed temperd forked can hold its listening socket for a moment; the
// next temperd waits that out instead of refusing to start (a restart failed so in the loop's kill
// -9 tests).
TEST_CASE("binding over a socket that answers for a moment more waits for it to go") {
  testing::ScratchPath dir("unix-listener-moment");
  std::filesystem::create_directories(dir.path());
  const std::string path = dir.path() + "/temper.sock";
  ListeningSocket other(path);
  std::thread closer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    other.Close();
  });
  auto bound = UnixSocketListener::Bind(path, Logger(LogLevel::kError));
  closer.join();
  INFO(bound.status().ToString());
  CHECK(bound.ok());
}

}  // namespace
}  // namespace temper
