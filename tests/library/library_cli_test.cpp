// `temper library` as users run it: the real binary against a real temperd, over entries recorded
// through FixLibrary in the daemon's own state store (as the loop records kept fixes): list, show,
// export and retire, their errors, and ListFixes' pages over the RPC.
#include <filesystem>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "orchestrator/daemon_process.h"
#include "orchestrator/library/fix_library.h"

namespace temper::testing {
namespace {

constexpr const char* kBanner = "xccdf_org.ssgproject.content_rule_banner_etc_issue_net";
constexpr const char* kAide = "xccdf_org.ssgproject.content_rule_package_aide_installed";
constexpr const char* kContent = "xccdf_org.ssgproject.content_benchmark_UBUNTU_20-04 0.1.65";
const std::string kNewBanner = "Authorized uses only. All activity may be monitored and reported.\n";

ProcessResult Cli(const DaemonProcess& daemon, std::vector<std::string> args) {
  args.insert(args.begin(), {TemperBinary(), "--socket", daemon.socket_path()});
  return RunProcess(args);
}

stig::FileImage RegularFile(const std::string& content, uint32_t mode) {
  stig::FileImage image;
  image.state.type = stig::FileType::kFile;
  image.state.mode = mode;
  image.state.size = content.size();
  image.content = content;
  image.sha256 = stig::ContentSha256(content);
  return image;
}

stig::TargetPlatform Ubuntu() {
  stig::TargetPlatform p;
  p.os = "ubuntu";
  p.version = "20.04";
  p.arch = "amd64";
  p.packages = {{"aide", "0.16.1-1build2"}, {"vim", "2:8.1.2269-1ubuntu5"}};
  return p;
}

NewFix BannerFix() {
  NewFix fix;
  fix.rule_id = kBanner;
  fix.content_id = kContent;
  fix.platform = Ubuntu();
  stig::BundleFile issue;
  issue.path = "/etc/issue.net";
  issue.before = RegularFile("Ubuntu 20.04 LTS\n", 0644);
  issue.after = RegularFile(kNewBanner, 0644);
  fix.bundle.files = {issue};
  fix.evidence = "pass: /etc/issue.net holds the DoD banner";
  fix.source_batch = 1;
  fix.source_attempt = 2;
  fix.source_target = "lab";
  fix.model_tokens = 4200;
  return fix;
}

NewFix AideFix() {
  NewFix fix = BannerFix();
  fix.rule_id = kAide;
  fix.bundle = stig::FixBundle{};
  fix.bundle.packages.installed = {"aide 0.16.1-1build2"};
  fix.evidence = "pass: package aide is installed";
  fix.source_attempt = 3;
  fix.model_tokens = 900;
  return fix;
}

// Records `fixes` in the running daemon's state store, as the loop does.
std::vector<int64_t> Record(const TempDir& dir, const std::vector<NewFix>& fixes) {
  auto store = StateStore::Open(dir / "state/temper.db");
  REQUIRE(store.ok());
  FixLibrary library(**store);
  std::vector<int64_t> ids;
  for (const NewFix& fix : fixes) {
    auto id = library.Record(fix);
    INFO(id.status().ToString());
    REQUIRE(id.ok());
    ids.push_back(*id);
  }
  return ids;
}

TEST_CASE("temper library lists, shows, exports and retires the library's entries") {
  TempDir dir;
  DaemonProcess daemon(dir);
  REQUIRE(daemon.Start().ok());

  ProcessResult empty = Cli(daemon, {"library"});
  CHECK(empty.exit_code == 0);
  CHECK(empty.out == "no live entries (temper library list --all shows retired ones)\n");

  std::vector<int64_t> ids = Record(dir, {BannerFix(), AideFix()});
  REQUIRE(ids == std::vector<int64_t>{1, 2});
  {
    auto store = StateStore::Open(dir / "state/temper.db");
    REQUIRE(store.ok());
    FixLibrary library(**store);
    REQUIRE(library.NoteOutcome(1, 5, true, "").ok());
    REQUIRE(library.NoteOutcome(1, 6, false, "/etc/issue.net had drifted and did not merge").ok());
  }

  ProcessResult list = Cli(daemon, {"library", "list"});
  INFO(list.err);
  REQUIRE(list.exit_code == 0);
  CHECK(list.out.rfind("ID  RULE                    PLATFORM            CONTENT", 0) == 0);
  CHECK(list.out.find("\n2   package_aide_installed  ubuntu 20.04 amd64  " + std::string(kContent) + "  0     0") !=
        std::string::npos);
  CHECK(list.out.find("\n1   banner_etc_issue_net    ubuntu 20.04 amd64  " + std::string(kContent) +
                      "  1     1         4200          batch 1 on lab") != std::string::npos);
  CHECK(list.out.find("live") != std::string::npos);
  CHECK(list.out.find("\n2 entries, 1 reuse kept, 4200 model tokens saved\n") != std::string::npos);

  ProcessResult by_rule = Cli(daemon, {"library", "list", "--rule", kAide, "--json"});
  REQUIRE(by_rule.exit_code == 0);
  nlohmann::json listed = nlohmann::json::parse(by_rule.out);
  REQUIRE(listed["fixes"].size() == 1);
  CHECK(listed["fixes"][0]["rule_id"] == kAide);
  CHECK(listed["fixes"][0]["packages"]["aide"] == "0.16.1-1build2");
  CHECK_FALSE(listed["fixes"][0]["packages"].contains("vim"));  // not a package the fix touches

  ProcessResult show = Cli(daemon, {"library", "show", "1"});
  INFO(show.err);
  REQUIRE(show.exit_code == 0);
  CHECK(show.out.rfind("library entry 1: " + std::string(kBanner) + "\n", 0) == 0);
  CHECK(show.out.find("  platform:     ubuntu 20.04 amd64\n") != std::string::npos);
  CHECK(show.out.find("  proven by:    batch 1 on lab, attempt 2, ") != std::string::npos);
  CHECK(show.out.find("  reused:       1 kept, 1 failed; 4200 model tokens saved (4200 to find it)\n") !=
        std::string::npos);
  CHECK(show.out.find("  last failure: batch 6: /etc/issue.net had drifted and did not merge\n") != std::string::npos);
  CHECK(show.out.find("files (1):\n  /etc/issue.net\n    before: file 0644 sha256 " +
                      stig::ContentSha256("Ubuntu 20.04 LTS\n") + "\n    after:  file 0644 sha256 " +
                      stig::ContentSha256(kNewBanner) + "\n") != std::string::npos);
  CHECK(show.out.find("evidence:\npass: /etc/issue.net holds the DoD banner\n") != std::string::npos);
  ProcessResult show_aide = Cli(daemon, {"library", "show", "2"});
  CHECK(show_aide.out.find("packages installed: aide 0.16.1-1build2\n") != std::string::npos);
  CHECK(show_aide.out.find("  depends on:   aide 0.16.1-1build2\n") != std::string::npos);

  std::string exported = dir / "library.json";
  ProcessResult export_file = Cli(daemon, {"library", "export", "-o", exported});
  INFO(export_file.err);
  REQUIRE(export_file.exit_code == 0);
  CHECK_FALSE(std::filesystem::exists(exported + ".part"));
  nlohmann::json document = nlohmann::json::parse(ReadFileOrEmpty(exported));
  REQUIRE(document["fixes"].size() == 2);
  const nlohmann::json& banner = document["fixes"][1];
  CHECK(banner["id"] == 1);
  CHECK(banner["rule_id"] == kBanner);
  CHECK(banner["platform"]["os"] == "ubuntu");
  CHECK(banner["source"]["target"] == "lab");
  CHECK(banner["tokens_saved"] == 4200);
  CHECK(banner["retired_at"].is_null());
  // The bundle whole: what another temperd or a fleet tool replays.
  auto bundle = stig::FixBundle::FromJson(banner["bundle"].dump());
  REQUIRE(bundle.ok());
  CHECK(*bundle == BannerFix().bundle);
  ProcessResult export_stdout = Cli(daemon, {"library", "export", "--rule", kAide});
  REQUIRE(export_stdout.exit_code == 0);
  CHECK(nlohmann::json::parse(export_stdout.out)["fixes"].size() == 1);

  ProcessResult retire = Cli(daemon, {"library", "retire", "1", "--reason", "SSG 0.1.66 words the banner anew"});
  INFO(retire.err);
  REQUIRE(retire.exit_code == 0);
  CHECK(retire.out == "library entry 1 (banner_etc_issue_net) retired: it is never reused again\n");
  ProcessResult live = Cli(daemon, {"library"});
  CHECK(live.out.find("banner_etc_issue_net") == std::string::npos);
  CHECK(live.out.find("\n2   package_aide_installed") != std::string::npos);
  CHECK(live.out.find("\n1 entry, 0 reuses kept, 0 model tokens saved\n") != std::string::npos);
  ProcessResult all = Cli(daemon, {"library", "list", "--all"});
  CHECK(all.out.find("\n1   banner_etc_issue_net") != std::string::npos);
  CHECK(all.out.find("retired ") != std::string::npos);
  ProcessResult retired_show = Cli(daemon, {"library", "show", "1"});
  CHECK(retired_show.out.find(": SSG 0.1.66 words the banner anew\n") != std::string::npos);
  CHECK(nlohmann::json::parse(Cli(daemon, {"library", "export"}).out)["fixes"].size() == 1);
  CHECK(nlohmann::json::parse(Cli(daemon, {"library", "export", "--all"}).out)["fixes"].size() == 2);
  {
    auto store = StateStore::Open(dir / "state/temper.db");
    REQUIRE(store.ok());
    FixLibrary library(**store);
    auto match = library.Match(kBanner, kContent, Ubuntu());
    REQUIRE(match.ok());
    CHECK_FALSE(match->has_value());  // retired through the CLI: never matched again
  }

  ProcessResult again = Cli(daemon, {"library", "retire", "1", "--reason", "twice"});
  CHECK(again.exit_code != 0);
  CHECK(again.err.find("library entry 1 was already retired at ") != std::string::npos);
  CHECK(again.err.find(": SSG 0.1.66 words the banner anew") != std::string::npos);
  ProcessResult unknown = Cli(daemon, {"library", "show", "99"});
  CHECK(unknown.exit_code != 0);
  CHECK(unknown.err.find("library entry 99 does not exist") != std::string::npos);
  ProcessResult bad_id = Cli(daemon, {"library", "show", "abc"});
  CHECK(bad_id.exit_code != 0);
  CHECK(bad_id.err.find("fix_id: 'abc' is not a library entry id") != std::string::npos);
  ProcessResult no_reason = Cli(daemon, {"library", "retire", "2"});
  CHECK(no_reason.exit_code != 0);
  CHECK(no_reason.err.find("--reason is required") != std::string::npos);
  ProcessResult empty_reason = Cli(daemon, {"library", "retire", "2", "--reason", ""});
  CHECK(empty_reason.exit_code != 0);
  CHECK(empty_reason.err.find("reason: empty") != std::string::npos);
}

TEST_CASE("ListFixes pages newest first and says where the next page starts") {
  TempDir dir;
  DaemonProcess daemon(dir);
  REQUIRE(daemon.Start().ok());
  NewFix third = BannerFix();
  third.bundle.files[0].after = RegularFile("Third banner.\n", 0644);
  REQUIRE(Record(dir, {BannerFix(), AideFix(), third}).size() == 3);

  auto stub = daemon.Stub();
  temper::v1::ListFixesRequest request;
  request.set_page_size(2);
  temper::v1::ListFixesResponse first;
  REQUIRE(stub->ListFixes(CallContext().get(), request, &first).ok());
  REQUIRE(first.fixes_size() == 2);
  CHECK(first.fixes(0).id() == "3");
  CHECK(first.fixes(1).id() == "2");
  CHECK(first.fixes(0).evidence().empty());  // a listing carries no evidence or files: GetFix does
  CHECK(first.fixes(0).files_size() == 0);
  REQUIRE(first.next_page_token() == "2");
  request.set_page_token(first.next_page_token());
  temper::v1::ListFixesResponse second;
  REQUIRE(stub->ListFixes(CallContext().get(), request, &second).ok());
  REQUIRE(second.fixes_size() == 1);
  CHECK(second.fixes(0).id() == "1");
  CHECK(second.next_page_token().empty());

  request.set_page_size(1001);
  temper::v1::ListFixesResponse refused;
  grpc::Status too_big = stub->ListFixes(CallContext().get(), request, &refused);
  CHECK(too_big.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(too_big.error_message() == "page_size: 1001 is above the maximum 1000");
  temper::v1::RetireFixRequest long_reason;
  long_reason.set_fix_id("1");
  long_reason.set_reason(std::string(1001, 'x'));
  temper::v1::Fix fix;
  CHECK(stub->RetireFix(CallContext().get(), long_reason, &fix).error_code() == grpc::StatusCode::INVALID_ARGUMENT);
}

}  // namespace
}  // namespace temper::testing
