// The paths a command names on an SSH host, and the guard for temper's own directory there.
#include "stig/ssh/host_paths.h"

#include <catch2/catch.hpp>

namespace temper::stig {
namespace {

std::vector<NamedPath> Named(std::string_view command) {
  auto r = PathsNamedBy(command);
  INFO(command);
  if (!r.ok()) FAIL(r.status().ToString());
  return *r;
}

std::string Risk(std::string_view command) {
  for (const NamedPath& n : Named(command)) {
    std::string why = HostDirRisk(n, "/var/lib/temper");
    if (!why.empty()) return why;
  }
  return "";
}

TEST_CASE("paths named by a command: arguments, redirections, literal cd and variables", "[stig][host_paths]") {
  auto named = Named("cd /etc && cat ssh/sshd_config > /tmp/out; D=/var/lib; rm -rf \"$D\"/x --file=/a/b ~/c rel");
  std::vector<std::pair<std::string, bool>> got;
  for (const NamedPath& n : named) got.push_back({n.path, n.changes});
  const std::vector<std::pair<std::string, bool>> want = {
      {"/etc", true},       {"/tmp/out", true}, {"/etc/ssh/sshd_config", false},
      {"/var/lib/x", true}, {"/a/b", true},     {"/etc/rel", true}};
  CHECK(got == want);
  CHECK(Named("rm -r /var")[0].recursive);
  CHECK_FALSE(Named("rm /var/x")[0].recursive);
  CHECK(Named("find /var -name '*.tar' -exec rm {} \\;")[0].recursive);
  CHECK_FALSE(Named("find / -perm -0002 -exec chmod o-w {} \\;")[0].recursive);
  CHECK_FALSE(PathsNamedBy("echo 'x").ok());
}

TEST_CASE("changes to temper's directory on the host are refused, reading it is not", "[stig][host_paths]") {
  for (const char* c :
       {"rm -rf /var/lib/temper/undo", "echo 1 > /var/lib/temper/undo/x/last_id", "cd /var/lib/temper && ls",
        "cd /var/lib && rm -rf temper", "mv /var/lib/temper /tmp", "find /var/lib -delete",
        "T=/var/lib/temper; rm -rf $T", "ln -s /var/lib/temper/undo /tmp/u", "tar -xf x.tar -C /var/lib/temper",
        "sudo -u root truncate -s0 /var/lib/temper/undo/x/last_id", "rm -r /var", "cp -r /tmp/x /var/lib/"}) {
    INFO(c);
    CHECK_THAT(Risk(c), Catch::Contains("temper's own directory"));
  }
  for (const char* c : {"cat /var/lib/temper/undo/x/last_id", "ls -l /var/lib/temper", "grep -r x /var/lib/temper",
                        "rm -rf /var/lib/temper2", "echo /var/lib/temper", "find / -xdev -perm -0002 -type f",
                        "chmod 0600 /var/lib/dpkg/x", "sha256sum /var/lib/temper/undo/x/snap.0/files.tar.gz"}) {
    INFO(c);
    CHECK(Risk(c).empty());
  }
}

}  // namespace
}  // namespace temper::stig
