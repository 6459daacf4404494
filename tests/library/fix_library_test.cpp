// FixLibrary (orchestrator/library/fix_library.h): what is recorded of a kept fix, and which targets
// a recorded fix matches: same rule, content, OS, version and architecture, and every package the
// fix touches at the version it was proven with, except that a package the fix installs may be
// absent. Retired entries never match, duplicates are stored once, and reuses are counted.
#include "orchestrator/library/fix_library.h"

#include <filesystem>

#include <catch2/catch.hpp>

#include "scratch_space.h"

namespace temper {
namespace {

constexpr const char* kRule = "xccdf_org.ssgproject.content_rule_package_aide_installed";
constexpr const char* kContent = "xccdf_org.ssgproject.content_benchmark_UBUNTU_20-04 0.1.65";

stig::FileImage RegularFile(const std::string& content, uint32_t mode = 0644) {
  stig::FileImage image;
  image.state.type = stig::FileType::kFile;
  image.state.mode = mode;
  image.state.size = content.size();
  image.content = content;
  image.sha256 = stig::ContentSha256(content);
  return image;
}

// The fix of package_aide_installed as a twin proves it: aide installed, its configuration changed
// after the install (a package's file), and a cron file written.
stig::FixBundle AideBundle() {
  stig::FixBundle bundle;
  stig::BundleFile config;
  config.path = "/etc/aide/aide.conf";
  config.after = RegularFile("database_in=file:/var/lib/aide/aide.db\n");
  config.package = "aide-common";
  config.package_md5 = "0123456789abcdef0123456789abcdef";
  stig::BundleFile cron;
  cron.path = "/etc/cron.daily/aide";
  cron.after = RegularFile("#!/bin/sh\n/usr/bin/aide --check\n", 0755);
  bundle.files = {config, cron};
  bundle.packages.installed = {"aide 0.16.1-1build2"};
  bundle.packages.upgraded = {"libc6 2.31-0ubuntu9.9 -> 2.31-0ubuntu9.14"};
  return bundle;
}

// The twin the fix was proven on, read after the fix: aide is installed there.
stig::TargetPlatform Twin() {
  stig::TargetPlatform p;
  p.os = "ubuntu";
  p.version = "20.04";
  p.arch = "amd64";
  p.packages = {{"aide", "0.16.1-1build2"},
                {"aide-common", "0.16.1-1build2"},
                {"libc6", "2.31-0ubuntu9.9"},
                {"openssh-server", "1:8.2p1-4ubuntu0.5"},
                {"vim", "2:8.1.2269-1ubuntu5"}};
  return p;
}

NewFix AideFix() {
  NewFix fix;
  fix.rule_id = kRule;
  fix.content_id = kContent;
  fix.platform = Twin();
  fix.bundle = AideBundle();
  fix.evidence = "pass: package aide is installed";
  fix.source_batch = 3;
  fix.source_attempt = 11;
  fix.source_target = "twin-web";
  fix.model_tokens = 5400;
  return fix;
}

class Library {
 public:
  Library() : scratch_("library") {
    std::filesystem::create_directories(scratch_.path());
    auto opened = StateStore::Open(scratch_.path() + "/t.db");
    REQUIRE(opened.ok());
    store_ = std::move(*opened);
    library_ = std::make_unique<FixLibrary>(*store_);
  }
  FixLibrary* operator->() { return library_.get(); }
  StateStore& store() { return *store_; }

 private:
  testing::ScratchPath scratch_;
  std::unique_ptr<StateStore> store_;
  std::unique_ptr<FixLibrary> library_;
};

std::optional<int64_t> Matched(Library& library, const stig::TargetPlatform& target,
                               const std::string& content = kContent, const std::string& rule = kRule) {
  auto match = library->Match(rule, content, target);
  INFO(match.status().ToString());
  REQUIRE(match.ok());
  if (!*match) return std::nullopt;
  return (*match)->id;
}

TEST_CASE("a recorded fix keeps only the packages it touches and matches the same platform") {
  Library library;
  auto id = library->Record(AideFix());
  REQUIRE(id.ok());
  auto entry = library->Get(*id);
  REQUIRE(entry.ok());
  auto platform = stig::TargetPlatform::FromJson(entry->platform_json);
  REQUIRE(platform.ok());
  // aide (installed), libc6 (upgraded) and aide-common (a package's file it changed): not vim or ssh.
  CHECK(platform->packages == std::map<std::string, std::string>{{"aide", "0.16.1-1build2"},
                                                                 {"aide-common", "0.16.1-1build2"},
                                                                 {"libc6", "2.31-0ubuntu9.9"}});
  CHECK(platform->Label() == "ubuntu 20.04 amd64");
  auto bundle = stig::FixBundle::FromJson(entry->bundle_json);
  REQUIRE(bundle.ok());
  CHECK(*bundle == AideBundle());
  CHECK(entry->evidence == "pass: package aide is installed");
  CHECK(entry->source_batch == 3);
  CHECK(entry->source_attempt == 11);
  CHECK(entry->source_target == "twin-web");
  CHECK(entry->model_tokens == 5400);
  CHECK(entry->uses == 0);

  CHECK(Matched(library, Twin()) == *id);
  stig::TargetPlatform other_tools = Twin();
  other_tools.packages["vim"] = "2:9.0";  // a package the fix does not touch differs
  other_tools.packages.erase("openssh-server");
  CHECK(Matched(library, other_tools) == *id);
}

TEST_CASE("a fix never matches another OS, version, architecture, package version, rule or content") {
  Library library;
  REQUIRE(library->Record(AideFix()).ok());
  stig::TargetPlatform target = Twin();
  SECTION("os") { target.os = "debian"; }
  SECTION("version") { target.version = "22.04"; }
  SECTION("arch") { target.arch = "arm64"; }
  SECTION("a package it touches at another version") { target.packages["libc6"] = "2.31-0ubuntu9.14"; }
  SECTION("a package whose file it changed, absent") { target.packages.erase("aide-common"); }
  SECTION("a package it upgrades, absent") { target.packages.erase("libc6"); }
  SECTION("a package it installs, at another version") { target.packages["aide"] = "0.17.4-1"; }
  SECTION("an unknown platform") { target = stig::TargetPlatform{}; }
  CHECK_FALSE(Matched(library, target).has_value());
  CHECK_FALSE(Matched(library, Twin(), "xccdf_org.ssgproject.content_benchmark_UBUNTU_20-04 0.1.66").has_value());
  CHECK_FALSE(Matched(library, Twin(), kContent, "xccdf_org.ssgproject.content_rule_aide_build_database").has_value());
}

TEST_CASE("a package the fix installs may be absent on the target: the replay installs it") {
  Library library;
  auto id = library->Record(AideFix());
  REQUIRE(id.ok());
  stig::TargetPlatform fresh = Twin();
  fresh.packages.erase("aide");  // a host that never had aide, as the twin before the fix
  CHECK(Matched(library, fresh) == *id);
}

TEST_CASE("the newest matching entry wins and a retired one never matches") {
  Library library;
  auto older = library->Record(AideFix());
  REQUIRE(older.ok());
  NewFix newer_fix = AideFix();
  newer_fix.bundle.files[1].after = RegularFile("#!/bin/sh\n/usr/bin/aide.wrapper --check\n", 0755);
  newer_fix.source_batch = 4;
  auto newer = library->Record(newer_fix);
  REQUIRE(newer.ok());
  CHECK(*newer != *older);
  CHECK(Matched(library, Twin()) == *newer);

  auto retired = library->Retire(*newer, "the wrapper is gone in 0.17");
  REQUIRE(retired.ok());
  CHECK(retired->retired_reason == "the wrapper is gone in 0.17");
  CHECK(Matched(library, Twin()) == *older);
  REQUIRE(library->Retire(*older, "superseded").ok());
  CHECK_FALSE(Matched(library, Twin()).has_value());

  CHECK(library->Retire(*older, "again").status().code() == StatusCode::kFailedPrecondition);
  CHECK(library->Retire(999, "x").status().code() == StatusCode::kNotFound);
  CHECK(library->Retire(*older, "").status().code() == StatusCode::kInvalidArgument);
  auto live = library->List("", false, 10);
  REQUIRE(live.ok());
  CHECK(live->empty());
  auto all = library->List(kRule, true, 10);
  REQUIRE(all.ok());
  REQUIRE(all->size() == 2);
  CHECK(all->front().id == *newer);  // newest first
}

TEST_CASE("the same fix recorded twice is one entry, whatever else the platform has installed") {
  Library library;
  auto first = library->Record(AideFix());
  REQUIRE(first.ok());
  NewFix again = AideFix();
  again.platform.packages["htop"] = "2.2.0-2build1";  // not a package the fix touches
  again.source_batch = 9;
  auto second = library->Record(again);
  REQUIRE(second.ok());
  CHECK(*second == *first);
  auto all = library->List("", true, 10);
  REQUIRE(all.ok());
  CHECK(all->size() == 1);
}

TEST_CASE("Record refuses an entry that could never be matched or replayed, naming the field") {
  Library library;
  auto refused = [&](NewFix fix, std::string_view field) {
    auto r = library->Record(fix);
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK(r.status().message().find(field) != std::string::npos);
  };
  NewFix fix = AideFix();
  fix.rule_id.clear();
  refused(fix, "rule_id");
  fix = AideFix();
  fix.content_id.clear();
  refused(fix, "content_id");
  fix = AideFix();
  fix.bundle = stig::FixBundle{};
  refused(fix, "bundle");
  fix = AideFix();
  fix.platform.os.clear();
  refused(fix, "platform.os");
  auto all = library->List("", true, 10);
  REQUIRE(all.ok());
  CHECK(all->empty());
}

TEST_CASE("reuses are counted: kept adds a use and the tokens saved, a failure says which batch and why") {
  Library library;
  auto id = library->Record(AideFix());
  REQUIRE(id.ok());
  REQUIRE(library->NoteOutcome(*id, 5, true, "").ok());
  REQUIRE(library->NoteOutcome(*id, 6, true, "").ok());
  REQUIRE(library->NoteOutcome(*id, 7, false, "/etc/aide/aide.conf had drifted and did not merge").ok());
  auto entry = library->Get(*id);
  REQUIRE(entry.ok());
  CHECK(entry->uses == 2);
  CHECK(entry->tokens_saved == 2 * 5400);
  CHECK(entry->failures == 1);
  CHECK(entry->last_failure == "batch 7: /etc/aide/aide.conf had drifted and did not merge");
  CHECK(library->NoteOutcome(999, 5, true, "").code() == StatusCode::kNotFound);
  CHECK(library->Get(999).status().code() == StatusCode::kNotFound);
}

}  // namespace
}  // namespace temper
