#include "stig/ssh/ssh_connection.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include <catch2/catch.hpp>

#include "stig/ssh/ssh_known_hosts.h"
#include "stig/ssh/ssh_test_support.h"

namespace temper::testing {
namespace {

using stig::SshConnection;
using stig::SshEndpoint;

std::unique_ptr<SshConnection> Connect(const NetnsSshHost& host, const std::string& user,
                                       const std::string& known_hosts, const ScopedControlDir& control,
                                       const std::string& key = "") {
  auto c = SshConnection::Open(
      TestSshOptions(host.Endpoint(user), key.empty() ? TestRoot().client_key : key, known_hosts, control.path()),
      QuietSshLog());
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  return std::move(*c);
}

Status OpenStatus(const NetnsSshHost& host, const std::string& user, const std::string& known_hosts,
                  const ScopedControlDir& control, const std::string& key) {
  return SshConnection::Open(TestSshOptions(host.Endpoint(user), key, known_hosts, control.path()), QuietSshLog())
      .status();
}

TEST_CASE("SshEndpoint parses user@host[:port]", "[ssh][ssh_connection]") {
  auto a = SshEndpoint::Parse("root@web1.example.org");
  REQUIRE(a.ok());
  CHECK(a->user == "root");
  CHECK(a->host == "web1.example.org");
  CHECK(a->port == 22);
  CHECK(a->KnownHostsName() == "web1.example.org");
  auto b = SshEndpoint::Parse("admin@10.0.0.5:2222");
  REQUIRE(b.ok());
  CHECK(b->port == 2222);
  CHECK(b->KnownHostsName() == "[10.0.0.5]:2222");
  CHECK(b->ToString() == "admin@10.0.0.5:2222");
  auto c = SshEndpoint::Parse("ops@[fd00::5]:22");
  REQUIRE(c.ok());
  CHECK(c->host == "fd00::5");
  CHECK(c->ToString() == "ops@[fd00::5]:22");
  for (const char* bad : {"web1", "@web1", "root@", "root@web1:0", "root@web1:70000",
                          "root@web1:", "root@-oProxyCommand=x", "ro ot@web1", "root@fd00::5", "root@[fd00::5"}) {
    INFO(bad);
    auto e = SshEndpoint::Parse(bad);
    CHECK(e.status().code() == StatusCode::kInvalidArgument);
  }
}

TEST_CASE("Commands over SSH keep stdout, stderr, exit codes and stdin exact", "[ssh][ssh_connection]") {
  TEMPER_SKIP_WITHOUT_SSH_HOSTS();
  auto host = StartHost("run");
  ScopedControlDir control;
  auto c = Connect(*host, "root", AcceptedKnownHosts(*host), control);

  auto r = c->Exec({"/bin/sh", "-c", "printf 'out\\n'; printf 'err' >&2; exit 7"}, {}, Limits());
  REQUIRE(r.ok());
  CHECK(r->out == "out\n");
  CHECK(r->err == "err");
  CHECK(r->exit_code == 7);
  // Arguments reach the program as they are, whatever the shell would make of them.
  auto args = c->Exec({"printf", "%s|", "a b", "'q'", "$HOME", "*", ""}, {}, Limits());
  REQUIRE(args.ok());
  CHECK(args->out == "a b|'q'|$HOME|*||");
  // The command's own 255 is its exit code, not a lost connection.
  auto own = c->Exec({"/bin/sh", "-c", "exit 255"}, {}, Limits());
  REQUIRE(own.ok());
  CHECK(own->exit_code == 255);
  // stdin carries every byte value.
  std::string bytes;
  for (int i = 0; i < 256; ++i) bytes += static_cast<char>(i);
  auto echoed = c->Exec({"cat"}, bytes, Limits());
  REQUIRE(echoed.ok());
  CHECK(echoed->out == bytes);
  // The limit stops the command on the host, and says so.
  auto slow = c->Exec({"sleep", "30"}, {}, Limits(1));
  REQUIRE(slow.ok());
  CHECK(slow->timed_out);
  CHECK(slow->seconds < 20);
  auto id = c->Exec({"id", "-u"}, {}, Limits());
  REQUIRE(id.ok());
  CHECK(id->out == "0\n");
}

TEST_CASE("Files move over SSH byte for byte, bounded in size", "[ssh][ssh_connection]") {
  TEMPER_SKIP_WITHOUT_SSH_HOSTS();
  auto host = StartHost("files");
  ScopedControlDir control;
  auto c = Connect(*host, "root", AcceptedKnownHosts(*host), control);

  std::string bytes;
  for (int i = 0; i < 70000; ++i) bytes += static_cast<char>((i * 7) & 255);
  REQUIRE(stig::RemoteWriteFile(*c, "/etc/temper-blob", bytes, 0640).ok());
  struct stat st;
  REQUIRE(::stat((host->tree() + "/etc/temper-blob").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0640);
  CHECK(st.st_uid == 0);
  CHECK(static_cast<std::size_t>(st.st_size) == bytes.size());
  auto back = stig::RemoteReadFile(*c, "/etc/temper-blob", bytes.size());
  REQUIRE(back.ok());
  CHECK(*back == bytes);

  CHECK(stig::RemoteReadFile(*c, "/etc/temper-blob", bytes.size() - 1).status().code() == StatusCode::kOutOfRange);
  CHECK(stig::RemoteReadFile(*c, "/etc/no-such-file", 100).status().code() == StatusCode::kNotFound);
  CHECK(stig::RemoteReadFile(*c, "/etc", 100).status().code() == StatusCode::kInvalidArgument);
  CHECK(stig::RemoteWriteFile(*c, "/no-such-dir/x", "x", 0644).code() == StatusCode::kNotFound);
  CHECK(stig::RemoteWriteFile(*c, "/etc", "x", 0644).code() == StatusCode::kInvalidArgument);
  CHECK(stig::RemoteWriteFile(*c, "relative", "x", 0644).code() == StatusCode::kInvalidArgument);
  // Writing through a symlink replaces its target, as a write inside a rootfs target does.
  std::filesystem::create_symlink("temper-blob", host->tree() + "/etc/temper-link");
  REQUIRE(stig::RemoteWriteFile(*c, "/etc/temper-link", "new", 0600).ok());
  CHECK(std::filesystem::is_symlink(host->tree() + "/etc/temper-link"));
  auto through = stig::RemoteReadFile(*c, "/etc/temper-blob", 100);
  REQUIRE(through.ok());
  CHECK(*through == "new");
}

TEST_CASE("A login that is not root runs commands through sudo -n", "[ssh][ssh_connection]") {
  TEMPER_SKIP_WITHOUT_SSH_HOSTS();
  auto host = StartHost("sudo");
  ScopedControlDir control;
  const std::string known = AcceptedKnownHosts(*host);
  auto admin = Connect(*host, "admin", known, control);
  auto id = admin->Exec({"id", "-u"}, {}, Limits());
  REQUIRE(id.ok());
  CHECK(id->out == "0\n");
  CHECK(admin->CheckFreshLogin().ok());

  // clerk's sudo wants a password: refused at once, never prompted.
  Status clerk = OpenStatus(*host, "clerk", known, control, TestRoot().client_key);
  CHECK(clerk.code() == StatusCode::kPermissionDenied);
  CHECK_THAT(clerk.message(), Catch::Contains("\"sudo needs a password\""));
}

TEST_CASE("Each way a connection is refused has its named error", "[ssh][ssh_connection]") {
  TEMPER_SKIP_WITHOUT_SSH_HOSTS();
  auto host = StartHost("refusals");
  ScopedControlDir control;
  const std::string& key = TestRoot().client_key;

  SECTION("no known_hosts file at all") {
    Status s = OpenStatus(*host, "root", host->dir() + "/files/none", control, key);
    CHECK(s.code() == StatusCode::kFailedPrecondition);
    CHECK_THAT(s.message(), Catch::Contains("does not exist"));
  }
  SECTION("unknown host key") {
    const std::string empty = host->dir() + "/files/empty_known_hosts";
    std::ofstream(empty).close();
    Status s = OpenStatus(*host, "root", empty, control, key);
    CHECK(s.code() == StatusCode::kFailedPrecondition);
    CHECK_THAT(s.message(), Catch::Contains("\"host key unknown\""));
    // Nothing was learnt behind the operator's back.
    auto recorded = stig::RecordedHostKeys(empty, host->Endpoint("root"));
    REQUIRE(recorded.ok());
    CHECK(recorded->empty());
  }
  SECTION("host key changed") {
    const std::string known = AcceptedKnownHosts(*host);
    REQUIRE(host->ReplaceHostKey().ok());
    REQUIRE(host->StartSshd().ok());
    Status s = OpenStatus(*host, "root", known, control, key);
    CHECK(s.code() == StatusCode::kPermissionDenied);
    CHECK_THAT(s.message(), Catch::Contains("\"host key CHANGED\""));
    // Accepting the new fingerprint (checked out of band) lets it in again.
    auto accepted = stig::AcceptHostKey(known, host->Endpoint("root"), host->fingerprint(), std::chrono::seconds(5));
    REQUIRE(accepted.ok());
    CHECK(OpenStatus(*host, "root", known, control, key).ok());
  }
  SECTION("wrong key") {
    Status s = OpenStatus(*host, "root", AcceptedKnownHosts(*host), control, TestRoot().wrong_key);
    CHECK(s.code() == StatusCode::kUnauthenticated);
    CHECK_THAT(s.message(), Catch::Contains("\"authentication refused\""));
  }
  SECTION("nothing listening") {
    const std::string known = AcceptedKnownHosts(*host);
    host->StopSshd();
    Status s = OpenStatus(*host, "root", known, control, key);
    CHECK(s.code() == StatusCode::kUnavailable);
    CHECK_THAT(s.message(), Catch::Contains("\"connection refused\""));
  }
}

TEST_CASE("Host keys enter known_hosts only with the fingerprint the operator approved", "[ssh][ssh_known_hosts]") {
  TEMPER_SKIP_WITHOUT_SSH_HOSTS();
  auto host = StartHost("accept");
  const std::string known = host->dir() + "/files/kh/known_hosts";
  auto offered = stig::ScanHostKeys(host->Endpoint("root"), std::chrono::seconds(5));
  REQUIRE(offered.ok());
  REQUIRE(offered->size() == 1);
  CHECK((*offered)[0].fingerprint == host->fingerprint());
  CHECK((*offered)[0].type == "ssh-ed25519");

  auto wrong = stig::AcceptHostKey(known, host->Endpoint("root"), "SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
                                   std::chrono::seconds(5));
  CHECK(wrong.status().code() == StatusCode::kNotFound);
  CHECK_THAT(wrong.status().message(), Catch::Contains(host->fingerprint()));
  CHECK_FALSE(std::filesystem::exists(known));
  CHECK(stig::AcceptHostKey(known, host->Endpoint("root"), "MD5:xx", std::chrono::seconds(5)).status().code() ==
        StatusCode::kInvalidArgument);

  auto accepted = stig::AcceptHostKey(known, host->Endpoint("root"), host->fingerprint(), std::chrono::seconds(5));
  REQUIRE(accepted.ok());
  auto recorded = stig::RecordedHostKeys(known, host->Endpoint("root"));
  REQUIRE(recorded.ok());
  REQUIRE(recorded->size() == 1);
  CHECK((*recorded)[0].fingerprint == host->fingerprint());
  struct stat st;
  REQUIRE(::stat(known.c_str(), &st) == 0);
  CHECK((st.st_mode & 077) == 0);
  // Accepting again replaces, never duplicates.
  REQUIRE(stig::AcceptHostKey(known, host->Endpoint("root"), host->fingerprint(), std::chrono::seconds(5)).ok());
  CHECK(stig::RecordedHostKeys(known, host->Endpoint("root"))->size() == 1);
}

TEST_CASE("sshd killed mid-command is a lost connection, a fresh one works after it restarts",
          "[ssh][ssh_connection]") {
  TEMPER_SKIP_WITHOUT_SSH_HOSTS();
  auto host = StartHost("lost");
  ScopedControlDir control;
  auto c = Connect(*host, "root", AcceptedKnownHosts(*host), control);
  REQUIRE(c->MasterAlive());

  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    host->StopSshd();
  });
  auto r = c->Exec({"sleep", "30"}, {}, Limits());
  killer.join();
  CHECK(r.status().code() == StatusCode::kAborted);
  CHECK_THAT(r.status().message(), Catch::Contains("\"connection lost\""));
  CHECK_FALSE(c->MasterAlive());
  // No silent reconnection behind the caller's back.
  CHECK(c->Exec({"true"}, {}, Limits()).status().code() == StatusCode::kAborted);

  REQUIRE(host->StartSshd().ok());
  REQUIRE(c->Reconnect().ok());
  auto again = c->Exec({"echo", "back"}, {}, Limits());
  REQUIRE(again.ok());
  CHECK(again->out == "back\n");
}

}  // namespace
}  // namespace temper::testing
