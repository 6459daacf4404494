#include "stig/ssh/undo_journal.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <optional>

#include <catch2/catch.hpp>

#include "platform/fault_env.h"
#include "stig/ssh/ssh_test_support.h"
#include "stig/tree_listing.h"

namespace temper::testing {
namespace {

using stig::UndoJournal;

struct JournalHost {
  std::unique_ptr<NetnsSshHost> host = StartHost("undo");
  ScopedControlDir control;
  std::unique_ptr<stig::SshConnection> connection;

  JournalHost() {
    auto c = stig::SshConnection::Open(
        TestSshOptions(host->Endpoint("root"), TestRoot().client_key, AcceptedKnownHosts(*host), control.path()),
        QuietSshLog());
    INFO(c.status().ToString());
    REQUIRE(c.ok());
    connection = std::move(*c);
  }
  UndoJournal Open(std::uint32_t keep = 8) {
    auto j =
        UndoJournal::Open(*connection, {"/var/lib/temper/undo/test", stig::DefaultUndoRoots(), keep}, QuietSshLog());
    INFO(j.status().ToString());
    REQUIRE(j.ok());
    return std::move(*j);
  }
  void Sh(const std::string& script) {
    auto r = connection->Exec({"/bin/sh", "-c", script}, {}, Limits(120));
    INFO(script);
    REQUIRE(r.ok());
    INFO(r->out + r->err);
    REQUIRE(r->Succeeded());
  }
  // Every journal root as the test sees the tree: owners, modes, xattrs, links, content digests.
  std::map<std::string, std::string> Listing() const {
    std::map<std::string, std::string> all;
    for (const std::string& root : stig::DefaultUndoRoots()) {
      std::string dir = host->tree() + root;
      struct stat st;
      if (::lstat(dir.c_str(), &st) != 0) continue;
      if (!S_ISDIR(st.st_mode)) {
        all[root] = fmt::format("mode={:o} uid={} gid={} size={} {} xattr={}", st.st_mode, st.st_uid, st.st_gid,
                                st.st_size, stig::testing::ContentDigest(dir), stig::testing::Xattrs(dir));
        continue;
      }
      for (auto& [path, desc] : stig::testing::TreeListing(dir)) all[root + "/" + path] = desc;
    }
    return all;
  }
};

TEST_CASE("An undo revert restores owners, modes, xattrs, ACLs, links and content exactly", "[ssh][undo_journal]") {
  TEMPER_SKIP_WITHOUT_SSH_HOSTS();
  JournalHost h;
  UndoJournal journal = h.Open();
  CHECK(journal.depth() == 0);  // snapshot 0: the host as temper found it
  CHECK(journal.xattrs_checked());
  struct stat st;
  REQUIRE(::stat((h.host->tree() + "/var/lib/temper/undo/test").c_str(), &st) == 0);
  CHECK((st.st_mode & 077) == 0);  // root only

  auto id = journal.Snapshot();
  REQUIRE(id.ok());
  CHECK(*id == 1);
  const auto before = h.Listing();
  h.Sh(R"(set -e
echo 'PASS_MAX_DAYS 60' >> /etc/login.defs
chmod 0600 /etc/issue
chown 1000:1000 /etc/motd
setfattr -n user.temper -v changed /etc/hostname
setfacl -m u:admin:r /etc/shells
setfattr -n user.dir -v added /etc/default
setfacl -d -m u:admin:rx /etc/apt
chmod 0700 /etc/default
chown 1000 /etc/apt
mkdir -p /etc/temper-new/sub && echo x > /etc/temper-new/sub/file
rm /etc/issue.net
rm /etc/debian_version && ln -s /etc/hostname /etc/debian_version
rm -rf /etc/cron.d && echo 'now a file' > /etc/cron.d
mkdir /root/.ssh/extra
ln /etc/login.defs /etc/login.defs.hardlink
)");
  const auto changed = h.Listing();
  REQUIRE(changed != before);

  auto reverted = journal.Revert(1);
  INFO(reverted.status().ToString());
  REQUIRE(reverted.ok());
  CHECK(reverted->paths_removed >= 4);
  const auto after = h.Listing();
  for (const auto& [path, desc] : before) {
    auto it = after.find(path);
    INFO(path);
    REQUIRE(it != after.end());
    CHECK(it->second == desc);
  }
  for (const auto& [path, desc] : after) {
    INFO(path);
    CHECK(before.count(path) == 1);
  }
  CHECK(after == before);
}

TEST_CASE("The undo journal keeps snapshot 0 and the newest ones, drops those after a revert, and never reuses an id",
          "[ssh][undo_journal]") {
  TEMPER_SKIP_WITHOUT_SSH_HOSTS();
  JournalHost h;
  UndoJournal journal = h.Open(/*keep=*/2);
  for (int i = 1; i <= 4; ++i) {
    h.Sh("echo " + std::to_string(i) + " > /etc/temper-step");
    auto id = journal.Snapshot();
    REQUIRE(id.ok());
    CHECK(*id == static_cast<std::uint32_t>(i));
  }
  CHECK(journal.snapshots() == std::vector<std::uint32_t>{0, 3, 4});
  CHECK(journal.Revert(2).status().code() == StatusCode::kNotFound);
  CHECK(journal.Revert(9).status().code() == StatusCode::kOutOfRange);

  REQUIRE(journal.Revert(3).ok());
  std::ifstream step(h.host->tree() + "/etc/temper-step");
  std::string text;
  std::getline(step, text);
  CHECK(text == "3");
  CHECK(journal.snapshots() == std::vector<std::uint32_t>{0, 3});
  CHECK(journal.depth() == 3);

  REQUIRE(journal.Revert(0).ok());
  CHECK_FALSE(std::filesystem::exists(h.host->tree() + "/etc/temper-step"));
  CHECK(journal.snapshots() == std::vector<std::uint32_t>{0});

  // Ids are never reused, also across a reopen: a stored id always names the same state.
  h.Sh("echo again > /etc/temper-step");
  auto fifth = journal.Snapshot();
  REQUIRE(fifth.ok());
  CHECK(*fifth == 5);
  UndoJournal reopened = h.Open(2);
  CHECK(reopened.snapshots() == std::vector<std::uint32_t>{0, 5});
  auto sixth = reopened.Snapshot();
  REQUIRE(sixth.ok());
  CHECK(*sixth == 6);
  REQUIRE(reopened.Revert(0).ok());
  CHECK_FALSE(std::filesystem::exists(h.host->tree() + "/etc/temper-step"));
}

TEST_CASE("Paths outside the roots are journalled once tracked", "[ssh][undo_journal]") {
  TEMPER_SKIP_WITHOUT_SSH_HOSTS();
  JournalHost h;
  UndoJournal journal = h.Open();
  h.Sh("mkdir -p /opt/tool && echo original > /opt/tool/existing.conf");
  REQUIRE(journal.Snapshot().ok());
  CHECK_FALSE(journal.Covers("/opt/tool/existing.conf"));
  CHECK(journal.Covers("/etc/ssh/sshd_config"));
  REQUIRE(journal.Track("/opt/tool/existing.conf").ok());
  REQUIRE(journal.Track("/opt/tool/new.conf").ok());
  CHECK(journal.Covers("/opt/tool/new.conf"));
  h.Sh("echo changed > /opt/tool/existing.conf && chmod 0600 /opt/tool/existing.conf && echo new > /opt/tool/new.conf");

  REQUIRE(journal.Revert(1).ok());
  std::ifstream existing(h.host->tree() + "/opt/tool/existing.conf");
  std::string text;
  std::getline(existing, text);
  CHECK(text == "original");
  struct stat st;
  REQUIRE(::stat((h.host->tree() + "/opt/tool/existing.conf").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0644);
  CHECK_FALSE(std::filesystem::exists(h.host->tree() + "/opt/tool/new.conf"));
  // Snapshot 0 predates the tracking; the path's state then is the one recorded when tracked.
  h.Sh("echo later > /opt/tool/existing.conf");
  REQUIRE(journal.Revert(0).ok());
  std::ifstream again(h.host->tree() + "/opt/tool/existing.conf");
  std::getline(again, text);
  CHECK(text == "original");
}

TEST_CASE("Packages installed since a snapshot are purged, removed ones put back", "[ssh][undo_journal]") {
  TEMPER_SKIP_WITHOUT_SSH_HOSTS();
  JournalHost h;
  UndoJournal journal = h.Open();
  const std::string status = h.host->tree() + "/var/lib/dpkg/status";
  auto dpkg_list = [&] {
    auto r = h.connection->Exec({"dpkg-query", "-W", "-f", "${binary:Package} ${Version} ${db:Status-Abbrev}\\n"}, {},
                                Limits());
    REQUIRE(r.ok());
    return r->out;
  };
  REQUIRE(journal.Snapshot().ok());
  const std::string packages_before = dpkg_list();
  const auto files_before = h.Listing();

  // vlock's .deb is in the root's apt cache, so both directions work offline.
  h.Sh("DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-download vlock");
  REQUIRE(std::filesystem::exists(h.host->tree() + "/usr/bin/vlock"));
  auto reverted = journal.Revert(1);
  INFO(reverted.status().ToString());
  REQUIRE(reverted.ok());
  CHECK(reverted->packages_purged == std::vector<std::string>{"vlock"});
  CHECK_FALSE(std::filesystem::exists(h.host->tree() + "/usr/bin/vlock"));
  CHECK(dpkg_list() == packages_before);
  CHECK(h.Listing() == files_before);

  // Installed at the snapshot, removed since: reinstalled at the snapshot's version.
  h.Sh("DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-download vlock");
  REQUIRE(journal.Snapshot().ok());
  const std::string with_vlock = dpkg_list();
  h.Sh("DEBIAN_FRONTEND=noninteractive apt-get purge -y -q vlock");
  auto back = journal.Revert(2);
  INFO(back.status().ToString());
  REQUIRE(back.ok());
  REQUIRE(back->packages_installed.size() == 1);
  CHECK(back->packages_installed[0].starts_with("vlock="));
  CHECK(std::filesystem::exists(h.host->tree() + "/usr/bin/vlock"));
  CHECK(dpkg_list() == with_vlock);
}

TEST_CASE("A revert that cannot be exact fails and names what is left", "[ssh][undo_journal]") {
  TEMPER_SKIP_WITHOUT_SSH_HOSTS();
  JournalHost h;
  UndoJournal journal = h.Open();
  REQUIRE(journal.Snapshot().ok());
  // apt-utils is not in the root's apt cache and the host has no network: it cannot come back.
  h.Sh("DEBIAN_FRONTEND=noninteractive apt-get remove -y -q apt-utils && echo 'x' >> /etc/motd");
  auto reverted = journal.Revert(1);
  CHECK(reverted.status().code() == StatusCode::kDataLoss);
  CHECK_THAT(reverted.status().message(), Catch::Contains("package apt-utils: was"));
  CHECK_THAT(reverted.status().message(), Catch::Contains("needs a human"));
  // What could be restored was: the files under the roots are back.
  std::ifstream motd(h.host->tree() + "/etc/motd");
  std::string all((std::istreambuf_iterator<char>(motd)), std::istreambuf_iterator<char>());
  CHECK(all.find("x\n") == std::string::npos);
}

TEST_CASE(
    "Failing the Nth process start, at every N of two snapshots and a revert, loses no snapshot and the journal "
    "still undoes",
    "[ssh][undo_journal][faults]") {
  TEMPER_SKIP_WITHOUT_SSH_HOSTS();
  JournalHost h;  // its own connection, with the real Env, prepares and inspects the host
  const std::map<std::string, std::string> before = h.Listing();
  std::uint64_t n = 1;
  for (;; ++n) {
    INFO("N = " << n);
    temper::FaultEnv env;
    env.FailNth(temper::FaultEnv::Op::kProcessStart, n);
    ScopedControlDir control;
    const stig::SshOptions options =
        TestSshOptions(h.host->Endpoint("root"), TestRoot().client_key, AcceptedKnownHosts(*h.host), control.path());
    const stig::UndoJournalOptions journal_options{fmt::format("/var/lib/temper/undo/faults-{}", n),
                                                   stig::DefaultUndoRoots(), /*keep_recent=*/1};
    // Each step as the daemon would take it: a call that fails is made again (the fault is spent).
    auto connection = stig::SshConnection::Open(options, QuietSshLog(), env);
    if (!connection.ok()) connection = stig::SshConnection::Open(options, QuietSshLog(), env);
    INFO(connection.status().ToString());
    REQUIRE(connection.ok());
    auto journal = UndoJournal::Open(**connection, journal_options, QuietSshLog(), env);
    if (!journal.ok()) journal = UndoJournal::Open(**connection, journal_options, QuietSshLog(), env);
    INFO(journal.status().ToString());
    REQUIRE(journal.ok());
    std::vector<std::uint32_t> returned;
    for (int i = 0; i < 2; ++i) {  // the second drops the first (keep_recent 1)
      auto id = journal->Snapshot();
      if (!id.ok()) {
        CHECK_THAT(id.status().message(), Catch::Contains("injected fault"));
        id = journal->Snapshot();
      }
      INFO(id.status().ToString());
      REQUIRE(id.ok());
      CHECK((returned.empty() || *id > returned.back()));  // never reused, even after a failure
      returned.push_back(*id);
    }
    h.Sh(fmt::format(R"(set -e
echo 'PASS_MAX_DAYS 45' >> /etc/login.defs
chmod 0604 /etc/issue
mkdir -p /etc/temper-fault/{} && echo x > /etc/temper-fault/{}/file
rm /etc/issue.net
)",
                     n, n));
    auto reverted = journal->Revert(returned.back());
    if (!reverted.ok()) {
      CHECK_THAT(reverted.status().message(), Catch::Contains("injected fault"));
      reverted = journal->Revert(returned.back());  // finishes what the failed one began
    }
    INFO(reverted.status().ToString());
    REQUIRE(reverted.ok());
    CHECK(h.Listing() == before);
    const bool fired = env.fired();
    env.FailNth(temper::FaultEnv::Op::kProcessStart, 0);  // what follows checks; it is not the work
    // A restarted daemon finds the snapshot it was given, and nothing changed since it.
    auto reopened = UndoJournal::Open(**connection, journal_options, QuietSshLog());
    INFO(reopened.status().ToString());
    REQUIRE(reopened.ok());
    CHECK(reopened->depth() == returned.back());
    CHECK(reopened->snapshots() == std::vector<std::uint32_t>{0, returned.back()});
    auto changed = reopened->ChangedSince(returned.back());
    REQUIRE(changed.ok());
    CHECK(changed->empty());
    connection->reset();
    h.Sh(fmt::format("rm -rf /var/lib/temper/undo/faults-{}", n));
    if (!fired) break;
    REQUIRE(n < 200);
  }
  WARN("the snapshots and the revert start " << n - 1 << " processes; each was failed in turn");
  CHECK(n > 10);
}

}  // namespace
}  // namespace temper::testing
