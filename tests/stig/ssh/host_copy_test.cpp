#include "stig/ssh/host_copy.h"

#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>

#include "platform/process.h"
#include "scratch_space.h"
#include "stig/ssh/ssh_test_support.h"
#include "stig/ssh/tar_stream_filter.h"
#include "stig/ssh/tar_test_archive.h"

namespace temper::testing {
namespace {

namespace fs = std::filesystem;

std::unique_ptr<stig::SshConnection> ConnectRoot(const NetnsSshHost& host, const ScopedControlDir& control) {
  auto c = stig::SshConnection::Open(
      TestSshOptions(host.Endpoint("root"), TestRoot().client_key, AcceptedKnownHosts(host), control.path()),
      QuietSshLog());
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  return std::move(*c);
}

void WriteFile(const std::string& path, const std::string& text, mode_t mode = 0644) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
  REQUIRE(::chmod(path.c_str(), mode) == 0);
}

std::string Xattr(const std::string& path, const char* name) {
  char buf[4096];
  ssize_t n = ::lgetxattr(path.c_str(), name, buf, sizeof buf);
  return n < 0 ? std::string() : std::string(buf, static_cast<std::size_t>(n));
}

bool EmptyOrAbsent(const std::string& dir) {
  std::error_code ec;
  return !fs::exists(dir, ec) || fs::is_empty(dir, ec);
}

void RunOnHost(stig::SshConnection& ssh, const std::vector<std::string>& argv) {
  auto r = ssh.Exec(argv, {}, Limits());
  INFO(argv[0] << ": " << (r.ok() ? r->Describe() + " " + r->err : r.status().ToString()));
  REQUIRE(r.ok());
  REQUIRE(r->Succeeded());
}

TEST_CASE("TarStreamFilter drops device nodes and FIFOs and passes the rest byte for byte", "[host_copy]") {
  TarTestArchive kept;
  kept.Add('5', "./etc/", "", "", 0755).Add('0', "./etc/motd", "hello\n").Add('2', "./etc/link", "", "motd");
  TarTestArchive mixed;
  mixed.Add('5', "./etc/", "", "", 0755)
      .Add('x', "./PaxHeaders/null", "17 path=./dev/zz\n")
      .Add('3', "./dev/null")
      .Add('0', "./etc/motd", "hello\n")
      .Add('6', "./etc/fifo")
      .Add('2', "./etc/link", "", "motd");
  std::string archive = mixed.Finish();
  stig::TarStreamFilter filter;
  std::string out;
  // Fed in odd pieces, as a pipe delivers it.
  for (std::size_t at = 0; at < archive.size(); at += 77) {
    REQUIRE(filter.Feed(std::string_view(archive).substr(at, 77), out).ok());
  }
  REQUIRE(filter.Finish().ok());
  CHECK(out == kept.Finish());
  CHECK(filter.members() == 3);
  CHECK(filter.skipped_special() == 2);

  SECTION("a header with a bad checksum is refused with its offset") {
    std::string bad = archive;
    bad[512 * 0 + 10] ^= 1;
    stig::TarStreamFilter f;
    std::string o;
    Status s = f.Feed(bad, o);
    CHECK(s.code() == StatusCode::kInvalidArgument);
    CHECK(s.message().find("byte 0") != std::string::npos);
  }
  SECTION("an archive cut short is refused") {
    stig::TarStreamFilter f;
    std::string o;
    REQUIRE(f.Feed(std::string_view(archive).substr(0, 512 * 6 + 3), o).ok());
    CHECK(f.Finish().code() == StatusCode::kInvalidArgument);
  }
}

TEST_CASE("MountPointsBelowRoot lists every mount point but the root, escapes decoded", "[host_copy]") {
  auto points = stig::MountPointsBelowRoot(
      "overlay / overlay rw 0 0\nproc /proc proc rw 0 0\n/dev/sda2 /srv/my\\040data ext4 rw 0 0\n"
      "tmpfs /run tmpfs rw 0 0\n/dev/sda1 /srv/bind ext4 rw 0 0\n");
  CHECK(points == std::vector<std::string>{"/proc", "/run", "/srv/bind", "/srv/my data"});
}

TEST_CASE("A host's root is copied with owners, modes, xattrs, ACLs and capabilities, less what is left out",
          "[ssh][host_copy]") {
  TEMPER_SKIP_WITHOUT_SSH_HOSTS();
  auto host = StartHost("twin-copy");
  ScopedControlDir control;
  auto ssh = ConnectRoot(*host, control);
  const std::string tree = host->tree();

  WriteFile(tree + "/srv/twin/owned", "owned\n", 0640);
  REQUIRE(::lchown((tree + "/srv/twin/owned").c_str(), 1234, 2345) == 0);
  WriteFile(tree + "/srv/twin/setuid", "#!/bin/sh\n", 0755);
  REQUIRE(::chmod((tree + "/srv/twin/setuid").c_str(), 04755) == 0);
  WriteFile(tree + "/srv/twin/xattr", "x\n");
  REQUIRE(::setxattr((tree + "/srv/twin/xattr").c_str(), "user.temper", "kept", 4, 0) == 0);
  WriteFile(tree + "/srv/twin/acl", "acl\n", 0640);
  RunOnHost(*ssh, {"setfacl", "-m", "u:1234:r", "/srv/twin/acl"});
  fs::create_symlink("/etc/hostname", tree + "/srv/twin/link");
  WriteFile(tree + "/srv/twin/capable", "cap\n", 0755);
  // The capability is set on the host when its root has setcap, else from this machine onto the
  // host's tree (the same xattr either way).
  auto has_setcap = ssh->Exec({"/bin/sh", "-c", "command -v setcap"}, {}, Limits());
  REQUIRE(has_setcap.ok());
  bool setcap = has_setcap->Succeeded();
  if (setcap) {
    RunOnHost(*ssh, {"setcap", "cap_net_raw+ep", "/srv/twin/capable"});
  } else if (::access("/usr/sbin/setcap", X_OK) == 0) {
    ProcessSpec spec;
    spec.argv = {"/usr/sbin/setcap", "cap_net_raw+ep", tree + "/srv/twin/capable"};
    auto r = RunProcess(spec);
    REQUIRE(r.ok());
    setcap = r->Succeeded();
  }
  const bool fifo = ::mkfifo((tree + "/srv/twin/fifo").c_str(), 0600) == 0;
  WriteFile(tree + "/var/lib/temper/undo/host/entry", "journal\n");
  WriteFile(tree + "/srv/data/big", std::string(1 << 20, 'b'));
  WriteFile(tree + "/run/planted", "run\n");

  ScratchPath dest("twin-copy-root");
  stig::HostCopyOptions options;
  options.destination = dest.path();
  options.exclude = {"/srv/data/"};
  auto record = stig::CopyHostRoot(*ssh, options, QuietSshLog());
  INFO(record.status().ToString());
  REQUIRE(record.ok());
  const std::string copy = dest.path();

  struct stat st;
  REQUIRE(::lstat((copy + "/srv/twin/owned").c_str(), &st) == 0);
  CHECK(st.st_uid == 1234);
  CHECK(st.st_gid == 2345);
  CHECK((st.st_mode & 07777) == 0640);
  REQUIRE(::lstat((copy + "/srv/twin/setuid").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 04755);
  CHECK(Xattr(copy + "/srv/twin/xattr", "user.temper") == "kept");
  CHECK_FALSE(Xattr(copy + "/srv/twin/acl", "system.posix_acl_access").empty());
  CHECK(Xattr(copy + "/srv/twin/acl", "system.posix_acl_access") ==
        Xattr(tree + "/srv/twin/acl", "system.posix_acl_access"));
  if (setcap) {
    CHECK_FALSE(Xattr(copy + "/srv/twin/capable", "security.capability").empty());
    CHECK(Xattr(copy + "/srv/twin/capable", "security.capability") ==
          Xattr(tree + "/srv/twin/capable", "security.capability"));
  } else {
    WARN("neither the SSH test root nor this machine has setcap: the file capability assertion is skipped");
  }
  CHECK(fs::is_symlink(copy + "/srv/twin/link"));
  CHECK(fs::read_symlink(copy + "/srv/twin/link") == "/etc/hostname");
  CHECK(fs::is_regular_file(copy + "/etc/os-release"));
  // Left out: the virtual file systems (recreated empty), temper's journal, the exclude list.
  for (const char* dir : {"/proc", "/sys", "/dev", "/run"}) {
    INFO(dir);
    CHECK(EmptyOrAbsent(copy + dir));
  }
  CHECK_FALSE(fs::exists(copy + "/var/lib/temper"));
  CHECK_FALSE(fs::exists(copy + "/srv/data"));
  if (fifo) {
    CHECK_FALSE(fs::exists(fs::symlink_status(copy + "/srv/twin/fifo")));
    CHECK(record->skipped_special_files >= 1);
  }

  CHECK(record->host == ssh->host_name());
  CHECK(record->login == "root");
  CHECK(record->bytes > 0);
  CHECK(record->files > 100);
  CHECK(std::find(record->excluded.begin(), record->excluded.end(), "/srv/data") != record->excluded.end());
  CHECK(std::find(record->excluded.begin(), record->excluded.end(), "/var/lib/temper") != record->excluded.end());
  CHECK(record->packages.count("openssh-server") == 1);
  CHECK(record->os_release.find("ID=") != std::string::npos);
}

TEST_CASE("A copy over max_bytes is refused and leaves nothing behind", "[ssh][host_copy]") {
  TEMPER_SKIP_WITHOUT_SSH_HOSTS();
  auto host = StartHost("twin-limit");
  ScopedControlDir control;
  auto ssh = ConnectRoot(*host, control);
  ScratchPath dest("twin-limit-root");
  stig::HostCopyOptions options;
  options.destination = dest.path();
  options.max_bytes = 4 << 20;

  SECTION("the host's du -x estimate refuses it before anything moves") {
    auto record = stig::CopyHostRoot(*ssh, options, QuietSshLog());
    CHECK(record.status().code() == StatusCode::kResourceExhausted);
    CHECK(record.status().message().find("du -x") != std::string::npos);
    CHECK(record.status().message().find(ssh->host_name()) != std::string::npos);
    CHECK_FALSE(fs::exists(dest.path()));
  }
  SECTION("a host whose du lies is stopped by the bytes streamed") {
    WriteFile(host->tree() + "/usr/bin/du", "#!/bin/sh\nprintf '1\\t%s\\n' \"$3\"\n", 0755);
    auto record = stig::CopyHostRoot(*ssh, options, QuietSshLog());
    CHECK(record.status().code() == StatusCode::kResourceExhausted);
    CHECK(record.status().message().find("4194304") != std::string::npos);
    CHECK(record.status().message().find(ssh->host_name()) != std::string::npos);
    CHECK_FALSE(fs::exists(dest.path()));
  }
}

TEST_CASE("A login other than root copies the host as root through sudo -n", "[ssh][host_copy]") {
  TEMPER_SKIP_WITHOUT_SSH_HOSTS();
  auto host = StartHost("twin-sudo");
  ScopedControlDir control;
  auto ssh = stig::SshConnection::Open(
      TestSshOptions(host->Endpoint("admin"), TestRoot().client_key, AcceptedKnownHosts(*host), control.path()),
      QuietSshLog());
  INFO(ssh.status().ToString());
  REQUIRE(ssh.ok());
  ScratchPath dest("twin-sudo-root");
  stig::HostCopyOptions options;
  options.destination = dest.path();
  options.exclude = {"/usr"};  // the rest is enough to see root's files come across
  auto record = stig::CopyHostRoot(**ssh, options, QuietSshLog());
  INFO(record.status().ToString());
  REQUIRE(record.ok());
  CHECK(record->login == "admin");
  // /etc/shadow is root's alone: only a root tar reads it.
  struct stat copied, original;
  REQUIRE(::lstat((dest.path() + "/etc/shadow").c_str(), &copied) == 0);
  REQUIRE(::lstat((host->tree() + "/etc/shadow").c_str(), &original) == 0);
  CHECK(copied.st_uid == 0);
  CHECK((copied.st_mode & 07777) == (original.st_mode & 07777));
  CHECK(copied.st_size == original.st_size);
  CHECK_FALSE(fs::exists(dest.path() + "/usr"));
}

}  // namespace
}  // namespace temper::testing
