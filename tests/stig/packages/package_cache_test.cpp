// The host-side package cache with the host's real apt: against a flat repository made by the test
// (no network), and an unreachable source for the no-network error. The real Debian archive is
// exercised by package_network_test.cpp (label "network").
#include "stig/packages/package_cache.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "scratch_space.h"
#include "stig/test_repository.h"

namespace temper::stig {
namespace {

namespace fs = std::filesystem;

// A dpkg status file listing temper-test-ok as installed, and nothing else.
constexpr const char* kStatusWithOk =
    "Package: temper-test-ok\nStatus: install ok installed\nPriority: optional\nSection: misc\n"
    "Maintainer: temper tests <tests@example.invalid>\nArchitecture: all\nVersion: 1.0\n"
    "Description: temper test package\n A package made by temper's tests.\n\n";

std::vector<std::string> FileNames(const ResolvedPackages& r) {
  std::vector<std::string> names;
  for (const auto& f : r.files) names.push_back(f.file_name);
  std::sort(names.begin(), names.end());
  return names;
}

TEST_CASE("Package names and cache options are checked before apt runs", "[stig][package_cache]") {
  CHECK(IsPackageName("vlock"));
  CHECK(IsPackageName("libpam-pwquality"));
  CHECK(IsPackageName("g++"));
  CHECK(IsPackageName("libc6.1"));
  CHECK_FALSE(IsPackageName("a"));
  CHECK_FALSE(IsPackageName("Vlock"));
  CHECK_FALSE(IsPackageName("-oAPT::Get::Trivial-Only=0"));
  CHECK_FALSE(IsPackageName("vlock;reboot"));
  CHECK_FALSE(IsPackageName("vlock*"));
  CHECK_FALSE(IsPackageName("?installed"));
  CHECK_FALSE(IsPackageName("vlock=2.2"));

  PackageCacheOptions o;
  o.dir = "relative/dir";
  CHECK(o.Validate().code() == StatusCode::kInvalidArgument);
  o.dir = "/var/lib/temper/\"packages";
  CHECK(o.Validate().message().find("cannot quote") != std::string::npos);
  o.dir = "/var/lib/temper/packages";
  CHECK(o.Validate().ok());
  o.sources = {"deb http://deb.debian.org/debian bookworm main", "http://example.org/debian bookworm main"};
  Status bad = o.Validate();
  CHECK(bad.code() == StatusCode::kInvalidArgument);
  CHECK(bad.message().find("sources[1]") != std::string::npos);
  o.sources = {"deb http://deb.debian.org/debian bookworm main\ndeb http://evil.example/ x y"};
  CHECK(o.Validate().code() == StatusCode::kInvalidArgument);
  o.sources = {};
  CHECK(o.Validate().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("The cache resolves against the target's dpkg status and names apt's errors", "[stig][package_cache]") {
  testing::TestRepository repo;
  ::temper::testing::ScratchPath dir("resolve");
  PackageCacheOptions o;
  o.dir = dir.path();
  o.sources = {repo.Source()};
  auto cache = PackageCache::Open(o);
  REQUIRE(cache.ok());

  // Nothing installed: the dependency comes along. temper-test-ok installed: only the new package.
  auto bare = cache->Fetch("", {"temper-test-dep"});
  INFO(bare.status().ToString());
  REQUIRE(bare.ok());
  CHECK(FileNames(*bare) == std::vector<std::string>{"temper-test-dep_1.0_all.deb", "temper-test-ok_1.0_all.deb"});
  auto with_ok = cache->Fetch(kStatusWithOk, {"temper-test-dep"});
  REQUIRE(with_ok.ok());
  CHECK(FileNames(*with_ok) == std::vector<std::string>{"temper-test-dep_1.0_all.deb"});
  // The files of a file: mirror are used where they are.
  CHECK(with_ok->files[0].host_path == repo.dir() + "/debs/temper-test-dep_1.0_all.deb");
  CHECK(with_ok->files[0].size == fs::file_size(with_ok->files[0].host_path));
  auto installed = cache->Fetch(kStatusWithOk, {"temper-test-ok"});
  REQUIRE(installed.ok());
  CHECK(installed->files.empty());

  auto unknown = cache->Fetch("", {"temper-test-ok", "temper-no-such-package"});
  CHECK(unknown.status().code() == StatusCode::kNotFound);
  CHECK(unknown.status().message().find("temper-no-such-package is not in the archive") != std::string::npos);
  CHECK(unknown.status().message().find("E: Unable to locate package temper-no-such-package") != std::string::npos);

  auto conflict = cache->Fetch("", {"temper-test-ok", "temper-test-conflict"});
  CHECK(conflict.status().code() == StatusCode::kFailedPrecondition);
  CHECK(conflict.status().message().find("temper-test-conflict : Conflicts: temper-test-ok") != std::string::npos);
  auto conflict_with_installed = cache->Fetch(kStatusWithOk, {"temper-test-conflict"});
  REQUIRE(conflict_with_installed.ok());  // apt removes the installed one to make room, as on a host
  CHECK(FileNames(*conflict_with_installed) == std::vector<std::string>{"temper-test-conflict_1.0_all.deb"});

  auto bad = cache->Fetch("", {"--reinstall"});
  CHECK(bad.status().code() == StatusCode::kInvalidArgument);
  CHECK(cache->Fetch("", {}).status().code() == StatusCode::kInvalidArgument);
  // No per-call state is left behind.
  CHECK(fs::is_empty(dir.path() + "/work/resolve/partial"));
  int leftovers = 0;
  for (const auto& e : fs::directory_iterator(dir.path() + "/work")) leftovers += e.is_regular_file() ? 1 : 0;
  CHECK(leftovers == 0);
}

TEST_CASE("A sandbox gets the resolved files and the indexes, not the host's apt", "[stig][package_cache]") {
  testing::TestRepository repo;
  ::temper::testing::ScratchPath dir("extras");
  PackageCacheOptions o;
  o.dir = dir.path();
  o.sources = {repo.Source()};
  auto cache = PackageCache::Open(o);
  REQUIRE(cache.ok());
  auto resolved = cache->Fetch("", {"temper-test-ok"});
  REQUIRE(resolved.ok());
  auto extras = cache->SandboxFor(*resolved);
  REQUIRE(extras.ok());
  CHECK(extras->tmpfs == std::vector<std::string>{"/var/cache/apt"});
  bool deb = false, index = false;
  for (const auto& m : extras->read_only_mounts) {
    CHECK(m.sandbox_path.starts_with("/var/cache/apt/"));
    deb = deb || m.sandbox_path == "/var/cache/apt/archives/temper-test-ok_1.0_all.deb";
    index = index || m.sandbox_path.ends_with("_Packages");
  }
  CHECK(deb);
  CHECK(index);
  REQUIRE(extras->env.size() == 1);
  CHECK(extras->env[0].first == "APT_CONFIG");
  // The host's configuration (its sources, hooks, proxies) never reaches apt through the cache.
  std::ifstream conf(dir.path() + "/apt.conf");
  std::string text((std::istreambuf_iterator<char>(conf)), std::istreambuf_iterator<char>());
  CHECK(text.find("Dir::Etc::Parts \"" + dir.path() + "/empty.d\"") != std::string::npos);
  CHECK(text.find("Dir::Etc::SourceParts \"" + dir.path() + "/empty.d\"") != std::string::npos);
}

TEST_CASE("Sources that cannot be reached are Unavailable, naming the source", "[stig][package_cache]") {
  ::temper::testing::ScratchPath dir("offline");
  PackageCacheOptions o;
  o.dir = dir.path();
  // Port 9 (discard) on loopback: nothing listens, so the connection is refused at once.
  o.sources = {"deb http://127.0.0.1:9/debian bookworm main"};
  auto cache = PackageCache::Open(o);
  REQUIRE(cache.ok());
  Status update = cache->Update();
  CHECK(update.code() == StatusCode::kUnavailable);
  CHECK(update.message().find("no network") != std::string::npos);
  CHECK(update.message().find("127.0.0.1:9") != std::string::npos);
  auto fetched = cache->Fetch("", {"vlock"});
  CHECK(fetched.status().code() == StatusCode::kUnavailable);
}

// `dir` served over HTTP on loopback by Python's http.server, as a mirror apt downloads from (a
// file: source is used in place and never fills the cache). Stopped when it dies.
class HttpMirror {
 public:
  explicit HttpMirror(const std::string& dir) {
    port_ = FreePort();
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      const int quiet = ::open("/dev/null", O_WRONLY | O_CLOEXEC);  // its request log is noise here
      if (quiet >= 0) {
        ::dup2(quiet, 1);
        ::dup2(quiet, 2);
      }
      const std::string port = std::to_string(port_);
      ::execlp("python3", "python3", "-m", "http.server", port.c_str(), "--bind", "127.0.0.1", "--directory",
               dir.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    for (int i = 0; i < 100 && !Listening(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    REQUIRE(Listening());
  }
  ~HttpMirror() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  HttpMirror(const HttpMirror&) = delete;
  HttpMirror& operator=(const HttpMirror&) = delete;

  std::string Source() const { return fmt::format("deb [trusted=yes] http://127.0.0.1:{}/ ./", port_); }

 private:
  static sockaddr_in Loopback(int port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
  }
  static int FreePort() {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a = Loopback(0);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    socklen_t len = sizeof a;
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    ::close(fd);
    return ntohs(a.sin_port);
  }
  bool Listening() const {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a = Loopback(port_);
    const bool up = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    return up;
  }

  int port_ = 0;
  pid_t pid_ = -1;
};

std::vector<std::string> CachedDebs(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir + "/archives")) {
    if (e.path().extension() == ".deb") names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST_CASE("Fetches that would take the cache past its cap or the host below its reserve are refused",
          "[stig][package_cache]") {
  testing::TestRepository repo;
  HttpMirror mirror(repo.dir() + "/debs");
  ::temper::testing::ScratchPath dir("capped");
  PackageCacheOptions o;
  o.dir = dir.path();
  o.sources = {mirror.Source()};

  // Two small .debs (temper-test-dep and what it depends on) do not fit 1000 bytes: nothing is fetched.
  o.max_bytes = 1000;
  auto tiny = PackageCache::Open(o);
  REQUIRE(tiny.ok());
  auto refused = tiny->Fetch("", {"temper-test-dep"});
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == StatusCode::kResourceExhausted);
  INFO(refused.status().message());
  CHECK_THAT(refused.status().message(), Catch::Contains("past its cap of 1000 bytes (package_cache.max_size"));
  CHECK_THAT(refused.status().message(), Catch::Contains("for temper-test-dep"));
  CHECK(CachedDebs(dir.path()).empty());

  // Under a cap that fits they are fetched; at a cap the cache has reached, only what it holds is served.
  o.max_bytes = 1 << 20;
  auto roomy = PackageCache::Open(o);
  REQUIRE(roomy.ok());
  auto fetched = roomy->Fetch("", {"temper-test-dep"});
  INFO(fetched.status().ToString());
  REQUIRE(fetched.ok());
  REQUIRE(CachedDebs(dir.path()) ==
          std::vector<std::string>{"temper-test-dep_1.0_all.deb", "temper-test-ok_1.0_all.deb"});
  o.max_bytes = fs::file_size(dir.path() + "/archives/temper-test-dep_1.0_all.deb") +
                fs::file_size(dir.path() + "/archives/temper-test-ok_1.0_all.deb");
  auto full = PackageCache::Open(o);
  REQUIRE(full.ok());
  CHECK(full->Fetch("", {"temper-test-ok"}).ok());
  CHECK(full->Fetch("", {"temper-test-service"}).status().code() == StatusCode::kResourceExhausted);

  // A host file system whose free space is all reserve for the state store takes no more.
  o.max_bytes = 1 << 20;
  o.host_reserve_bytes = std::uint64_t{1} << 62;
  auto reserved = PackageCache::Open(o);
  REQUIRE(reserved.ok());
  auto no_room = reserved->Fetch("", {"temper-test-service"});
  REQUIRE_FALSE(no_room.ok());
  CHECK(no_room.status().code() == StatusCode::kResourceExhausted);
  CHECK_THAT(no_room.status().message(), Catch::Contains("the file system holding " + dir.path()));
  CHECK(CachedDebs(dir.path()).size() == 2);
}

}  // namespace
}  // namespace temper::stig
