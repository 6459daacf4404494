// Opening files of a target's tree from the host (stig/target_file.h) on a real tree in a temporary
// directory: links resolve inside it, what is not a regular file is named and never opened, and
// nothing is created through a link.
#include "stig/target_file.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "scratch_space.h"

namespace temper::stig {
namespace {

namespace fs = std::filesystem;

class Tree {
 public:
  Tree() : root_(::temper::testing::TestScratchDir() + "/target-file-tree") {
    fs::remove_all(root_);
    fs::create_directories(root_ + "/etc");
    fs::create_directories(root_ + "/usr/lib");
    Write("/etc/hostname", "target\n");
  }
  ~Tree() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  const std::string& root() const { return root_; }
  std::string At(const std::string& path) const { return root_ + path; }
  void Write(const std::string& path, const std::string& text) const { std::ofstream(At(path)) << text; }
  std::string Read(const std::string& path) const {
    auto fd = OpenTargetFileForRead(root_, path);
    REQUIRE(fd.ok());
    return *ReadUpTo(fd->get(), 1 << 20, path);
  }

 private:
  std::string root_;
};

TEST_CASE("links in a target resolve inside it, never to the host's files", "[stig][target_file]") {
  Tree t;
  fs::create_symlink("/etc/hostname", t.At("/etc/absolute"));
  fs::create_symlink("../../../../../../../../etc/hostname", t.At("/etc/dotdot"));
  fs::create_symlink("/etc", t.At("/usr/lib/etc-link"));
  CHECK(t.Read("/etc/absolute") == "target\n");
  CHECK(t.Read("/etc/dotdot") == "target\n");
  CHECK(t.Read("/usr/lib/etc-link/hostname") == "target\n");
  CHECK(t.Read("/usr/lib/../../../etc/hostname") == "target\n");
}

TEST_CASE("what is not a regular file is named and never opened", "[stig][target_file]") {
  Tree t;
  REQUIRE(::mkfifo(t.At("/etc/fifo").c_str(), 0644) == 0);
  int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::string sock_path = t.At("/etc/sock");
  REQUIRE(sock_path.size() < sizeof addr.sun_path);
  std::strcpy(addr.sun_path, sock_path.c_str());
  REQUIRE(::bind(sock, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  ::close(sock);
  REQUIRE(::mknod(t.At("/etc/null").c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0);
  fs::create_symlink("fifo", t.At("/etc/to-fifo"));

  struct Case {
    const char* path;
    const char* what;
  };
  for (const Case& c : {Case{"/etc/fifo", "a FIFO"}, Case{"/etc/to-fifo", "a FIFO"}, Case{"/etc/sock", "a socket"},
                        Case{"/etc/null", "a character device"}, Case{"/etc", "a directory"}}) {
    INFO(c.path);
    const std::string message = fmt::format("{} is {} in the target, not a regular file", c.path, c.what);
    auto read = OpenTargetFileForRead(t.root(), c.path);
    CHECK(read.status().code() == StatusCode::kInvalidArgument);
    CHECK(read.status().message() == message);
    auto write = OpenTargetFileForWrite(t.root(), c.path, 0644);
    CHECK(write.status().code() == StatusCode::kInvalidArgument);
    CHECK(write.status().message() == message);
  }
  // In a layer, a link is content: it is not followed, at the end or on the way.
  CHECK(OpenLayerFile(t.root(), "/etc/to-fifo").status().message() ==
        "/etc/to-fifo is a symlink in the target, not a regular file");
  CHECK(OpenLayerFile(t.root(), "/usr/lib/etc-link/hostname").status().code() == StatusCode::kNotFound);
  fs::create_symlink("/etc", t.At("/usr/lib/etc-link"));
  CHECK(OpenLayerFile(t.root(), "/usr/lib/etc-link/hostname").status().code() == StatusCode::kIOError);
  auto plain = OpenLayerFile(t.root(), "/etc/hostname");
  REQUIRE(plain.ok());
  CHECK(*ReadUpTo(plain->get(), 100, "hostname") == "target\n");
}

TEST_CASE("writes truncate regular files, create new ones, and never create through a link", "[stig][target_file]") {
  Tree t;
  auto existing = OpenTargetFileForWrite(t.root(), "/etc/hostname", 0600);
  REQUIRE(existing.ok());
  REQUIRE(::write(existing->get(), "new\n", 4) == 4);
  existing->Reset();
  CHECK(t.Read("/etc/hostname") == "new\n");

  auto fresh = OpenTargetFileForWrite(t.root(), "/etc/fresh", 0600);
  REQUIRE(fresh.ok());
  struct stat st {};
  REQUIRE(::stat(t.At("/etc/fresh").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);

  // A link to a regular file in the tree is followed, as the target would follow it.
  fs::create_symlink("/etc/hostname", t.At("/etc/via-link"));
  auto via = OpenTargetFileForWrite(t.root(), "/etc/via-link", 0644);
  REQUIRE(via.ok());
  REQUIRE(::write(via->get(), "linked\n", 7) == 7);
  via->Reset();
  CHECK(t.Read("/etc/hostname") == "linked\n");

  // A dangling one is refused, and its target is not made (in the tree or on the host).
  fs::create_symlink("/etc/made-through-link", t.At("/etc/dangling"));
  auto dangling = OpenTargetFileForWrite(t.root(), "/etc/dangling", 0644);
  CHECK(dangling.status().code() == StatusCode::kInvalidArgument);
  CHECK(dangling.status().message() ==
        "/etc/dangling is a symlink to /etc/made-through-link, which does not exist in the target; files are not "
        "created through links (remove the link or write to its target's path)");
  CHECK_FALSE(fs::exists(fs::symlink_status(t.At("/etc/made-through-link"))));
  CHECK_FALSE(fs::exists(fs::symlink_status("/etc/made-through-link")));

  CHECK(OpenTargetFileForWrite(t.root(), "/no/such/dir/f", 0644).status().message() ==
        "the directory of /no/such/dir/f does not exist in the target");
  CHECK(OpenTargetFileForWrite(t.root(), "etc/relative", 0644).status().message() ==
        "target path must be absolute: \"etc/relative\"");
  CHECK(OpenTargetFileForRead(t.root(), "/etc/missing").status().code() == StatusCode::kNotFound);
}

TEST_CASE("StatInTarget sees the last link itself, the links on the way resolved in the tree", "[stig][target_file]") {
  Tree t;
  fs::create_symlink("/usr", t.At("/etc/usr-link"));
  auto link = StatInTarget(t.root(), "/etc/usr-link");
  REQUIRE(link.ok());
  CHECK(S_ISLNK(link->st_mode));
  auto through = StatInTarget(t.root(), "/etc/usr-link/lib");
  REQUIRE(through.ok());
  CHECK(S_ISDIR(through->st_mode));
  CHECK(StatInTarget(t.root(), "/etc/usr-link/nothing").status().code() == StatusCode::kNotFound);
}

}  // namespace
}  // namespace temper::stig
