// A library entry as clients see it (orchestrator/library/fix_wire.h): the Fix message stays within
// one chunk however many files the bundle lists, saying how many it left out, and a stored entry
// that no longer parses is DataLoss naming it, in the message and in the export.
#include "orchestrator/library/fix_wire.h"

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "orchestrator/message_chunks.h"
#include "stig/fix_bundle.h"
#include "stig/platform_id.h"

namespace temper {
namespace {

FixRecord Entry(const stig::FixBundle& bundle) {
  stig::TargetPlatform platform;
  platform.os = "ubuntu";
  platform.version = "20.04";
  platform.arch = "amd64";
  FixRecord fix;
  fix.id = 7;
  fix.rule_id = "xccdf_org.ssgproject.content_rule_file_permissions_etc_audit_rulesd";
  fix.content_id = "xccdf_org.ssgproject.content_benchmark_UBUNTU_20-04 0.1.65";
  fix.platform_json = platform.ToJson();
  fix.bundle_json = bundle.ToJson();
  fix.created_at = 1'764'457'200'000;
  return fix;
}

TEST_CASE("an entry's message lists as many files as fit one chunk and counts the rest") {
  stig::FixBundle bundle;
  const std::string dir = "/etc/audit/rules.d/" + std::string(200, 'd') + "/";
  for (int i = 0; i < 4000; ++i) {
    stig::BundleFile file;
    file.path = dir + fmt::format("{:04}.rules", i);
    stig::FileImage after;
    after.state.mode = 0640;
    after.content = "-w /etc/shadow -p wa\n";
    after.state.size = after.content.size();
    after.sha256 = stig::ContentSha256(after.content);
    file.after = after;
    bundle.files.push_back(file);
  }
  FixRecord fix = Entry(bundle);
  temper::v1::Fix summary;
  REQUIRE(FixToProto(fix, /*details=*/false, &summary).ok());
  CHECK(summary.files_size() == 0);
  CHECK(summary.platform_label() == "ubuntu 20.04 amd64");

  temper::v1::Fix details;
  REQUIRE(FixToProto(fix, /*details=*/true, &details).ok());
  CHECK(details.files_size() > 0);
  CHECK(details.files_left_out() > 0);
  CHECK(static_cast<int>(details.files_left_out()) + details.files_size() == 4000);
  CHECK(details.ByteSizeLong() <= kChunkBytes + 64);
  CHECK(details.files(0).path() == dir + "0000.rules");
  CHECK(details.files(0).after_type() == "file");
  CHECK(details.files(0).after_mode() == 0640);
  CHECK(details.files(0).before_type().empty());  // nothing was there before

  auto json = FixesExportJson({fix});
  REQUIRE(json.ok());
  nlohmann::json exported = nlohmann::json::parse(*json);
  CHECK(exported["fixes"][0]["bundle"]["files"].size() == 4000);  // the export has them all
  CHECK(exported["fixes"][0]["created_at"] == "2025-11-29T23:00:00Z");
}

TEST_CASE("a stored entry that no longer parses is DataLoss naming it") {
  FixRecord fix = Entry(stig::FixBundle{});
  fix.platform_json = "{}";
  temper::v1::Fix out;
  Status bad_platform = FixToProto(fix, /*details=*/false, &out);
  CHECK(bad_platform.code() == StatusCode::kDataLoss);
  CHECK(bad_platform.message().find("library entry 7: stored platform: platform.os: missing") != std::string::npos);
  fix = Entry(stig::FixBundle{});
  fix.bundle_json = "[]";
  CHECK(FixToProto(fix, /*details=*/false, &out).ok());  // a listing does not read the bundle
  CHECK(FixToProto(fix, /*details=*/true, &out).code() == StatusCode::kDataLoss);
  auto json = FixesExportJson({fix});
  CHECK(json.status().code() == StatusCode::kDataLoss);
  CHECK(json.status().message().find("library entry 7: stored bundle") != std::string::npos);
}

}  // namespace
}  // namespace temper
