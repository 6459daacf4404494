// Attacks on an SSH host's own safeguards (issue 20): the lock-out guard, which read literal paths
// while writes follow symlinks, and temper's undo journal on the host, which nothing protected.
// Each case runs against a real sshd in a network namespace (tests/stig/ssh/netns_ssh_host.h) through
// the real SshTarget, and checks the host's files afterwards.
#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>

#include "stig/ssh/ssh_target.h"
#include "stig/ssh/ssh_test_support.h"

namespace temper::testing {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

struct AttackedHost {
  std::unique_ptr<NetnsSshHost> host;
  ScopedControlDir control;
  std::unique_ptr<stig::SshTarget> target;

  explicit AttackedHost(const std::string& name) : host(StartHost(name)) {
    stig::SshTargetOptions o;
    o.name = name;
    o.ssh = TestSshOptions(host->Endpoint("root"), TestRoot().client_key, AcceptedKnownHosts(*host), control.path());
    o.reconnect_tries = 2;
    o.reconnect_pause = std::chrono::seconds(1);
    auto t = stig::SshTarget::Open(o, QuietSshLog());
    INFO(t.status().ToString());
    REQUIRE(t.ok());
    target = std::move(*t);
  }
  std::string Tree(const std::string& path) const { return host->tree() + path; }
  // The journal's directory on the host.
  std::string Journal() const { return "/var/lib/temper/undo/" + target->name(); }

  void CheckCommandRefused(const std::string& command) {
    auto r = target->Run(command, Limits());
    INFO(command << " → " << (r.ok() ? "ran, exit " + std::to_string(r->exit_code) : r.status().ToString()));
    CHECK(r.status().code() == StatusCode::kPermissionDenied);
  }
  void CheckWriteRefused(const std::string& path) {
    Status s = target->WriteFile(path, "planted\n", 0644);
    INFO(path << " → " << s.ToString());
    CHECK(s.code() == StatusCode::kPermissionDenied);
  }
};

TEST_CASE("a write through a symlink reaches authorized_keys past the lock-out guard", "[security][ssh]") {
  TEMPER_SKIP_WITHOUT_SSH_HOSTS();
  AttackedHost h("atk-keys-link");
  const std::string keys = Slurp(h.Tree("/root/.ssh/authorized_keys"));
  REQUIRE_FALSE(keys.empty());
  fs::create_symlink("/root/.ssh/authorized_keys", h.Tree("/tmp/keys"));
  fs::create_symlink("/root/.ssh", h.Tree("/tmp/sshdir"));
  fs::create_symlink("/root", h.Tree("/tmp/home"));

  h.CheckWriteRefused("/tmp/keys");
  h.CheckWriteRefused("/tmp/sshdir/authorized_keys");
  h.CheckWriteRefused("/tmp/home/.ssh/authorized_keys");
  h.CheckWriteRefused("/tmp/../root/.ssh/authorized_keys");
  h.CheckCommandRefused("echo > /tmp/keys");
  h.CheckCommandRefused("cp /dev/null /tmp/sshdir/authorized_keys");
  h.CheckCommandRefused("truncate -s 0 /tmp/keys");
  CHECK(Slurp(h.Tree("/root/.ssh/authorized_keys")) == keys);
  // The guard still lets through what only reads, and writes that do not land on the keys.
  CHECK(h.target->Run("cat /tmp/keys > /dev/null", Limits()).ok());
  CHECK(h.target->WriteFile("/tmp/plain", "fine\n", 0644).ok());
}

TEST_CASE("write_file changes temper's undo journal on the host", "[security][ssh]") {
  TEMPER_SKIP_WITHOUT_SSH_HOSTS();
  AttackedHost h("atk-journal-write");
  const std::string last_id = Slurp(h.Tree(h.Journal() + "/last_id"));
  REQUIRE_FALSE(last_id.empty());
  h.CheckWriteRefused(h.Journal() + "/last_id");
  h.CheckWriteRefused(h.Journal() + "/snap.0/manifest.find");
  h.CheckWriteRefused("/var/lib/temper/planted");
  h.CheckWriteRefused("/var/lib/../lib/temper/undo/x");
  CHECK(Slurp(h.Tree(h.Journal() + "/last_id")) == last_id);
  CHECK_FALSE(fs::exists(h.Tree("/var/lib/temper/planted")));
}

TEST_CASE("commands change temper's undo journal on the host", "[security][ssh]") {
  TEMPER_SKIP_WITHOUT_SSH_HOSTS();
  AttackedHost h("atk-journal-cmd");
  auto id = h.target->Snapshot();
  REQUIRE(id.ok());
  h.CheckCommandRefused("rm -rf /var/lib/temper/undo");
  h.CheckCommandRefused("echo 9 > " + h.Journal() + "/last_id");
  h.CheckCommandRefused("find /var/lib/temper -delete");
  h.CheckCommandRefused("cd /var/lib/temper && rm -rf undo");
  h.CheckCommandRefused("mv /var/lib/temper /var/lib/temper.old");
  h.CheckCommandRefused("tar -xf /tmp/x.tar -C /var/lib/temper");
  h.CheckCommandRefused("sed -i s/0/9/ " + h.Journal() + "/last_id");
  h.CheckCommandRefused("bash -c 'rm -rf /var/lib/temper/undo'");
  CHECK(fs::exists(h.Tree(h.Journal() + "/snap.0/manifest.find")));
  // The journal still reverts the host.
  REQUIRE(h.target->Run("echo changed > /etc/issue", Limits()).ok());
  REQUIRE(h.target->Revert(*id).ok());
  CHECK(Slurp(h.Tree("/etc/issue")) != "changed\n");
}

TEST_CASE("a write through a symlink changes temper's undo journal", "[security][ssh]") {
  TEMPER_SKIP_WITHOUT_SSH_HOSTS();
  AttackedHost h("atk-journal-link");
  const std::string last_id = Slurp(h.Tree(h.Journal() + "/last_id"));
  fs::create_symlink(h.Journal() + "/last_id", h.Tree("/tmp/j"));
  fs::create_symlink("/var/lib/temper", h.Tree("/tmp/jd"));
  fs::create_symlink("/var/lib", h.Tree("/tmp/vl"));
  h.CheckWriteRefused("/tmp/j");
  h.CheckWriteRefused("/tmp/jd/undo/planted");
  h.CheckCommandRefused("echo 9 > /tmp/j");
  h.CheckCommandRefused("rm -rf /tmp/jd/undo");
  h.CheckCommandRefused("rm -rf /tmp/vl/temper");
  h.CheckCommandRefused("cp /etc/hostname /tmp/j");
  CHECK(Slurp(h.Tree(h.Journal() + "/last_id")) == last_id);
  CHECK(fs::exists(h.Tree(h.Journal() + "/snap.0/manifest.find")));
}

}  // namespace
}  // namespace temper::testing
