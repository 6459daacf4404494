#include "stig/baseline.h"

#include <filesystem>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "rootfs_fixture.h"

namespace temper::stig {
namespace {

using testing::ScopedTarget;

TEST_CASE("The SSG baseline scans, fixes, rescans and reports the fix rate", "[stig][baseline]") {
  static const Result<Content> content = Content::Load(kUbuntu2004Datastream, "stig");
  REQUIRE(content.ok());
  Logger log(LogLevel::kWarning);
  Evaluator ev(*content, {}, log);
  ScopedTarget t("baseline");
  BaselineOptions opts;
  opts.rule_ids = {"sshd_disable_root_login", "sshd_disable_empty_passwords", "package_sudo_installed",
                   "bios_enable_execution_restrictions"};
  opts.output_dir = t.dir() + "/baseline";
  auto r = RunBaseline(*t, ev, opts, log);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  INFO(r->ToText());
  REQUIRE(r->rules.size() == 4);
  CHECK(r->rules[0].before == Verdict::kFail);
  CHECK(r->rules[0].after == Verdict::kPass);
  CHECK(r->rules[0].fixed());
  CHECK(r->rules[2].before == Verdict::kPass);
  CHECK(r->rules[2].after == Verdict::kPass);
  // SSG ships no bash fix for the BIOS rule: it stays failing, and the report says why.
  CHECK_FALSE(r->rules[3].has_fix);
  CHECK(r->rules[3].after == Verdict::kFail);
  CHECK(r->FailingBefore() == 3);
  CHECK(r->Fixed() == 2);
  CHECK(r->Broken() == 0);
  CHECK(r->FixRate() == Approx(2.0 / 3));
  CHECK(r->health_after.BrokenSince(&r->health_before).empty());
  CHECK(r->ToText().find("fixed 2 of 3 failing rules (66.7%)") != std::string::npos);
  CHECK(r->ToText().find("bios_enable_execution_restrictions (no fix)") != std::string::npos);
  auto j = nlohmann::json::parse(r->ToJson());
  CHECK(j["fixed"] == 2);
  CHECK(j["rules"].size() == 4);
  CHECK(std::filesystem::exists(opts.output_dir + "/before/arf.xml"));
  CHECK(std::filesystem::exists(opts.output_dir + "/after/results.xml"));
  CHECK(std::filesystem::exists(opts.output_dir + "/fix.sh"));
  // The script ran inside the target and cleaned up after itself.
  CHECK(t->ReadFile("/tmp/temper-baseline-fix.sh", 10).status().code() == StatusCode::kNotFound);

  BaselineOptions no_dir;
  CHECK(RunBaseline(*t, ev, no_dir, log).status().code() == StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace temper::stig
