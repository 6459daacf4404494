// Attacks through fix bundles (issue 50): a bundle is replayed on other machines, so what a target's
// author planted in the fix (a FIFO, a link to a host file) must not hang or leak through capture,
// and what a bundle names (paths built to break out of a shell's quoting) or what a target holds at
// its paths (a link to /etc/shadow where the fix wrote a file) must not turn a replay into a write
// anywhere else. Real rootfs targets over the shared root; each trap planted from inside the sandbox.
#include <filesystem>

#include <catch2/catch.hpp>

#include "security/security_b_support.h"
#include "stig/fix_replay.h"
#include "stig/rootfs_fixture.h"

namespace temper {
namespace {

using security::CallWithin;
using security::OpenBothEnds;
using stig::testing::ScopedTarget;
using namespace std::chrono_literals;

std::string Sandboxed(stig::RootfsTarget& t, const std::string& command) {
  auto r = t.Run(command, temper::SandboxLimits{});
  REQUIRE(r.ok());
  INFO(command << ": " << r->err);
  REQUIRE(r->Succeeded());
  return r->out;
}

TEST_CASE("A FIFO the fix made fails its capture by name, without blocking", "[security][fix_bundle]") {
  ScopedTarget target("bundle-fifo");
  REQUIRE(target->Snapshot().ok());
  Sandboxed(*target, "mkfifo /etc/trap");
  auto captured = CallWithin(
      10000ms, [&] { return target->FixSinceSnapshot(); }, [&] { OpenBothEnds(target->root() + "/etc/trap"); });
  REQUIRE_FALSE(captured.value.ok());
  CHECK(captured.value.status().code() == StatusCode::kFailedPrecondition);
  CHECK(captured.value.status().message().find("/etc/trap") != std::string::npos);
}

TEST_CASE("A link the fix made to a host file is carried as a link, never as the host file's bytes",
          "[security][fix_bundle]") {
  ScopedTarget target("bundle-link");
  REQUIRE(target->Snapshot().ok());
  Sandboxed(*target, "ln -s /etc/shadow /etc/leak; ln -s ../../../../../../etc/shadow /etc/leak2");
  auto captured = target->FixSinceSnapshot();
  INFO(captured.status().ToString());
  REQUIRE(captured.ok());
  REQUIRE(captured->files.size() == 2);
  for (const stig::BundleFile& f : captured->files) {
    CHECK(f.after->state.type == stig::FileType::kSymlink);
    CHECK(f.after->content.empty());
  }
}

TEST_CASE("Paths built to break a replay's shell quoting are written as named, and run nothing",
          "[security][fix_replay]") {
  ScopedTarget target("bundle-quoting");
  const std::vector<std::string> names = {"/etc/q'; touch pwned1; '", "/etc/q$(touch pwned2)", "/etc/q`touch pwned3`",
                                          "/etc/q\"; touch pwned4; \"", "/etc/q\nline"};
  stig::FixBundle bundle;
  for (const std::string& name : names) {
    stig::FileImage after{.state = {.type = stig::FileType::kFile, .mode = 0640, .size = 2}, .content = "x\n"};
    after.sha256 = stig::ContentSha256(after.content);
    bundle.files.push_back({.path = name, .after = after});
  }
  bundle.files.push_back(
      {.path = "/etc/qlink",
       .after = stig::FileImage{
           .state = {.type = stig::FileType::kSymlink, .mode = 0777, .size = 16, .link = "$(touch /pwned5)"}}});
  std::sort(bundle.files.begin(), bundle.files.end(),
            [](const stig::BundleFile& a, const stig::BundleFile& b) { return a.path < b.path; });
  auto parsed = stig::FixBundle::FromJson(bundle.ToJson());
  INFO(parsed.status().ToString());
  REQUIRE(parsed.ok());
  auto replayed = stig::ReplayFix(*target, *parsed);
  INFO(replayed.status().ToString());
  REQUIRE(replayed.ok());
  CHECK(replayed->ok());
  for (const std::string& name : names) {
    INFO(name);
    CHECK(std::filesystem::is_regular_file(target->root() + name));
  }
  CHECK(std::filesystem::read_symlink(target->root() + "/etc/qlink") == "$(touch /pwned5)");
  // Whatever directory a command ran in, nothing made a "pwned" file anywhere in the target.
  CHECK(Sandboxed(*target, "find / -xdev -name 'pwned*'") == "");
}

TEST_CASE("A link planted where a fix writes a file is a conflict, and nothing is written through it",
          "[security][fix_replay]") {
  ScopedTarget twin("bundle-planted-a");
  REQUIRE(twin->Snapshot().ok());
  Sandboxed(*twin, "printf 'Authorized use only\\n' > /etc/issue.net; printf 'new\\n' > /etc/fresh");
  auto fix = twin->FixSinceSnapshot();
  REQUIRE(fix.ok());

  ScopedTarget host("bundle-planted-b");
  const std::string shadow = Sandboxed(*host, "cat /etc/shadow");
  Sandboxed(*host, "ln -sf /etc/shadow /etc/issue.net; ln -s /etc/shadow /etc/fresh");
  REQUIRE(host->Snapshot().ok());
  auto replayed = stig::ReplayFix(*host, *fix);
  INFO(replayed.status().ToString());
  REQUIRE(replayed.ok());
  REQUIRE(replayed->conflicts.size() == 2);
  CHECK(replayed->conflicts[0].path == "/etc/fresh");
  CHECK(replayed->conflicts[1].path == "/etc/issue.net");
  CHECK(Sandboxed(*host, "cat /etc/shadow") == shadow);
  auto changed = host->UnsnapshottedPaths();
  REQUIRE(changed.ok());
  CHECK(changed->empty());
}

}  // namespace
}  // namespace temper
