// Who may change the library of proven fixes: retiring an entry takes a proven fix away from every
// target that would reuse it, so an operator may retire only entries proven on a target its grant
// lists (as it may revert only there). The attack runs the real `temper` as another user against the
// real temperd, over entries recorded in its store as the loop records them.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include <catch2/catch.hpp>

#include "orchestrator/daemon_process.h"
#include "orchestrator/library/fix_library.h"
#include "skip.h"

namespace temper::testing {
namespace {

constexpr int kNobody = 65534;
constexpr int kNogroup = 65534;
constexpr const char* kRule = "xccdf_org.ssgproject.content_rule_banner_etc_issue_net";

NewFix ProvenOn(const std::string& target) {
  NewFix fix;
  fix.rule_id = kRule;
  fix.content_id = "xccdf_org.ssgproject.content_benchmark_UBUNTU_20-04 0.1.65";
  fix.platform.os = "ubuntu";
  fix.platform.version = "20.04";
  fix.platform.arch = "amd64";
  stig::BundleFile issue;
  issue.path = "/etc/issue.net";
  stig::FileImage after;
  after.state.mode = 0644;
  after.content = "Authorized uses only.\n";
  after.state.size = after.content.size();
  after.sha256 = stig::ContentSha256(after.content);
  issue.after = after;
  fix.bundle.files = {issue};
  fix.source_target = target;
  fix.evidence = "pass on " + target;
  return fix;
}

TEST_CASE("an operator retires library entries proven on its targets only") {
  if (geteuid() != 0) TEMPER_SKIP("needs root to run clients as other users");
  TempDir dir;
  const std::string client = CopyForOtherUsers(dir, TemperBinary());
  std::filesystem::create_directories(dir / "roots/other");
  DaemonProcess daemon(dir, {.unix_group = "nogroup",
                             .more_targets = {{"other", dir / "roots/other"}},
                             .extra_yaml = "access:\n  - {unix_group: nogroup, role: operator, targets: [other]}\n"});
  REQUIRE(daemon.Start().ok());
  chmod((dir / "run").c_str(), 0755);
  {
    auto store = StateStore::Open(dir / "state/temper.db");
    REQUIRE(store.ok());
    FixLibrary library(**store);
    REQUIRE(library.Record(ProvenOn("lab")).value() == 1);
    NewFix other = ProvenOn("other");
    other.bundle.files[0].after->content = "Other banner.\n";
    other.bundle.files[0].after->state.size = other.bundle.files[0].after->content.size();
    other.bundle.files[0].after->sha256 = stig::ContentSha256(other.bundle.files[0].after->content);
    REQUIRE(library.Record(other).value() == 2);
  }
  auto op = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {client, "--socket", daemon.socket_path()});
    return RunProcess(args, kNobody, kNogroup);
  };

  ProcessResult list = op({"library", "list"});
  INFO(list.err);
  CHECK(list.exit_code == 0);  // reading the library is a viewer's right
  ProcessResult lab = op({"library", "retire", "1", "--reason", "not mine to take"});
  CHECK(lab.exit_code != 0);
  CHECK(lab.err.find("nobody (uid 65534) may not call RetireFix on target lab: its grant in temperd.yaml "
                     "`access:` lists other") != std::string::npos);
  ProcessResult other = op({"library", "retire", "2", "--reason", "superseded on other"});
  INFO(other.err);
  CHECK(other.exit_code == 0);

  auto store = StateStore::Open(dir / "state/temper.db");
  REQUIRE(store.ok());
  FixLibrary library(**store);
  CHECK_FALSE(library.Get(1)->retired_at.has_value());  // the refused retire changed nothing
  CHECK(library.Get(2)->retired_reason == "superseded on other");
  CHECK(daemon.Stop() == 0);
}

// Fixes carried whole hold the target's files as the fix left them (a fix to /etc/shadow carries its
// hashes): a viewer, or an operator of another target, reads none of them, whether through the
// library's export or a batch's Ansible or sh export. Verdicts and redacted diffs stay a viewer's.
TEST_CASE("the files a fix carries whole are read only by an operator of the fix's target") {
  if (geteuid() != 0) TEMPER_SKIP("needs root to run clients as other users");
  TempDir dir;
  const std::string client = CopyForOtherUsers(dir, TemperBinary());
  std::filesystem::create_directories(dir / "roots/other");
  DaemonProcess daemon(dir, {.unix_group = "nogroup",
                             .more_targets = {{"other", dir / "roots/other"}},
                             .extra_yaml = "access:\n  - {unix_group: nogroup, role: operator, targets: [other]}\n"});
  REQUIRE(daemon.Start().ok());
  chmod((dir / "run").c_str(), 0755);
  int64_t lab_batch = 0;
  {
    auto store = StateStore::Open(dir / "state/temper.db");
    REQUIRE(store.ok());
    FixLibrary library(**store);
    REQUIRE(library.Record(ProvenOn("lab")).ok());
    NewBatch batch;
    batch.target = "lab";
    batch.datastream = "/nonexistent/ds.xml";
    batch.profile = "stig";
    batch.rule_ids = {kRule};
    auto submitted = (*store)->SubmitBatch(batch);
    REQUIRE(submitted.ok());
    lab_batch = submitted->batch.id;
  }
  auto op = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {client, "--socket", daemon.socket_path()});
    return RunProcess(args, kNobody, kNogroup);
  };

  ProcessResult library = op({"library", "export", "-o", "-"});
  CHECK(library.exit_code != 0);
  CHECK(library.err.find("may not read the library's fixes from target lab") != std::string::npos);
  CHECK(library.out.find("Authorized uses only.") == std::string::npos);
  for (const char* format : {"ansible", "sh"}) {
    INFO(format);
    ProcessResult exported = op({"export", std::to_string(lab_batch), "--format", format, "-o", "-"});
    CHECK(exported.exit_code != 0);
    CHECK(exported.err.find("may not read batch " + std::to_string(lab_batch) + " as " + format +
                            " from target lab") != std::string::npos);
  }
  CHECK(daemon.Stop() == 0);
}

}  // namespace
}  // namespace temper::testing
