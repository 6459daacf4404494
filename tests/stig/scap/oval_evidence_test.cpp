// OVAL evidence read from the ARF files of real evaluations: OpenSCAP evaluating rules on a rootfs
// target over the shared root, before and after a fix, with each result checked against the facts
// the test planted (a file's text, a missing package, a file's mode).
#include "stig/scap/oval_evidence.h"

#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>

#include "scratch_space.h"
#include "stig/rootfs_fixture.h"

namespace temper::stig {
namespace {

using testing::FullRuleId;
using testing::QuietLog;
using testing::ScopedTarget;
using testing::Ubuntu2004Stig;

std::string Field(const OvalFields& fields, const std::string& name) {
  for (const auto& [k, v] : fields) {
    if (k == name) return v;
  }
  return "";
}

const RuleEvidence& Of(const std::vector<RuleEvidence>& all, const std::string& rule) {
  for (const RuleEvidence& e : all) {
    if (e.rule_id == FullRuleId(rule)) return e;
  }
  FAIL("no evidence for " << rule);
  return all.front();
}

// Runs an evaluation with results files and reads its ARF back.
std::vector<RuleEvidence> Evaluated(RootfsTarget& t, const std::vector<std::string>& rules, const std::string& dir) {
  Evaluator ev(Ubuntu2004Stig(), {}, QuietLog());
  EvaluationRequest req;
  req.rule_ids = rules;
  req.output_dir = dir;
  auto e = t.Evaluate(ev, req);
  INFO(e.status().ToString());
  REQUIRE(e.ok());
  auto evidence = ReadOvalEvidence(e->arf_path);
  INFO(evidence.status().ToString());
  REQUIRE(evidence.ok());
  return *evidence;
}

TEST_CASE("OVAL evidence names what OpenSCAP found, before and after a fix", "[stig][oval_evidence]") {
  ScopedTarget t("oval-evidence");
  std::string dir = t.dir() + "/results";
  SandboxLimits limits;
  limits.timeout = std::chrono::seconds(60);
  REQUIRE(t->Run("chmod 0644 /etc/shadow", limits)->Succeeded());
  const std::vector<std::string> rules = {"accounts_tmout", "package_aide_installed", "file_permissions_etc_shadow",
                                          "banner_etc_issue_net"};
  std::vector<RuleEvidence> before = Evaluated(*t, rules, dir + "/before");
  // Only the rules asked for, in the TestResult's order, each with the result the evaluator gave.
  REQUIRE(before.size() == rules.size());

  const RuleEvidence& tmout = Of(before, "accounts_tmout");
  CHECK(tmout.result == "fail");
  REQUIRE_FALSE(tmout.definitions.empty());
  const OvalDefinition& def = tmout.definitions.front();
  CHECK(def.id == "oval:ssg-accounts_tmout:def:1");
  CHECK(def.result == "false");
  CHECK_FALSE(def.title.empty());
  REQUIRE(def.tests.size() >= 2);
  for (const OvalTest& test : def.tests) {
    INFO(test.id);
    CHECK(test.type == "textfilecontent54_test");
    CHECK(test.result == "false");
    CHECK(test.object_flag == "does not exist");  // no TMOUT line anywhere: nothing collected
    CHECK(test.items.empty());
    CHECK_FALSE(Field(test.object, "pattern").empty());
  }
  // The profile's value the check compared against.
  bool has_600 = false;
  for (const OvalTest& test : def.tests) {
    for (const auto& [id, value] : test.variables) has_600 = has_600 || value == "600";
  }
  CHECK(has_600);

  const RuleEvidence& aide = Of(before, "package_aide_installed");
  CHECK(aide.result == "fail");
  REQUIRE_FALSE(aide.definitions.empty());
  REQUIRE_FALSE(aide.definitions.front().tests.empty());
  const OvalTest& aide_test = aide.definitions.front().tests.front();
  CHECK(aide_test.type == "dpkginfo_test");
  CHECK(Field(aide_test.object, "name") == "aide");
  CHECK(aide_test.object_flag == "does not exist");

  // A mode too open: the file item that failed the test, with the permission bits OpenSCAP read.
  const RuleEvidence& shadow = Of(before, "file_permissions_etc_shadow");
  CHECK(shadow.result == "fail");
  REQUIRE_FALSE(shadow.definitions.empty());
  REQUIRE_FALSE(shadow.definitions.front().tests.empty());
  const OvalTest& mode_test = shadow.definitions.front().tests.front();
  CHECK(mode_test.type == "file_test");
  CHECK(mode_test.check_existence == "none_exist");
  CHECK(mode_test.object_flag == "complete");
  CHECK_THAT(Field(mode_test.object, "filter"), Catch::Contains("items where"));
  REQUIRE(mode_test.items.size() == 1);
  const OvalItem& shadow_item = mode_test.items.front();
  CHECK(shadow_item.type == "file_item");
  CHECK(Field(shadow_item.fields, "filepath") == "/etc/shadow");
  CHECK(Field(shadow_item.fields, "uread") == "true");
  CHECK(Field(shadow_item.fields, "oread") == "true");
  CHECK(Field(shadow_item.fields, "owrite") == "false");

  // The fix, then the evidence that it took: the item found and the text it matched.
  REQUIRE(t->WriteFile("/etc/profile.d/tmout.sh", "declare -xr TMOUT=600\n", 0644).ok());
  REQUIRE(t->WriteFile("/etc/issue.net", "Authorized <use> only & \"monitored\".\n", 0644).ok());
  REQUIRE(t->Run("chmod 0640 /etc/shadow", limits)->Succeeded());
  std::vector<RuleEvidence> after = Evaluated(*t, rules, dir + "/after");
  const RuleEvidence& fixed = Of(after, "accounts_tmout");
  CHECK(fixed.result == "pass");
  bool matched = false;
  for (const OvalTest& test : fixed.definitions.front().tests) {
    for (const OvalItem& item : test.items) {
      if (Field(item.fields, "filepath") != "/etc/profile.d/tmout.sh") continue;
      matched = true;
      CHECK(item.type == "textfilecontent_item");
      CHECK(item.status == "exists");
      CHECK(Field(item.fields, "text") == "declare -xr TMOUT=600");
      CHECK(Field(item.fields, "subexpression") == "600");
    }
  }
  CHECK(matched);
  // Text collected from the target arrives as it was, markup characters included.
  std::string text = Of(after, "banner_etc_issue_net").Text();
  CHECK(text.find("Authorized <use> only & \"monitored\".") != std::string::npos);
  CHECK(Of(after, "file_permissions_etc_shadow").result == "pass");
  CHECK(Of(after, "file_permissions_etc_shadow").definitions.front().tests.front().object_flag == "does not exist");
  CHECK(fixed.Text().find("item ") != std::string::npos);
  CHECK(fixed.Text().find("text: declare -xr TMOUT=600") != std::string::npos);

  // Selecting rules; and every evaluated rule when none are named.
  auto one = ReadOvalEvidence(dir + "/after/arf.xml", {FullRuleId("accounts_tmout")});
  REQUIRE(one.ok());
  CHECK(one->size() == 1);
  auto all = ReadOvalEvidence(dir + "/after/arf.xml");
  REQUIRE(all.ok());
  CHECK(all->size() == rules.size());
}

TEST_CASE("Files that are not ARF are refused with the file named", "[stig][oval_evidence]") {
  const ::temper::testing::ScratchPath scratch("oval-evidence-bad");
  const std::string& dir = scratch.path();
  std::filesystem::create_directories(dir);
  CHECK(ReadOvalEvidence(dir + "/missing.xml").status().code() == StatusCode::kNotFound);
  std::ofstream(dir + "/broken.xml") << "<arf:asset-report-collection xmlns:arf=\"x\">\n<unclosed>";
  auto broken = ReadOvalEvidence(dir + "/broken.xml");
  CHECK(broken.status().code() == StatusCode::kDataLoss);
  CHECK_THAT(broken.status().message(), Catch::Contains("broken.xml:2") && Catch::Contains("not well-formed"));
  std::ofstream(dir + "/other.xml") << "<checklist/>";
  auto other = ReadOvalEvidence(dir + "/other.xml");
  CHECK(other.status().code() == StatusCode::kDataLoss);
  CHECK_THAT(other.status().message(), Catch::Contains("not an ARF file"));
  // An entity that would read a host file is never expanded.
  std::ofstream(dir + "/xxe.xml") << "<?xml version=\"1.0\"?><!DOCTYPE r [<!ENTITY e SYSTEM \"file:///etc/passwd\">]>"
                                     "<arf:asset-report-collection xmlns:arf=\"http://scap.nist.gov/schema/"
                                     "asset-reporting-format/1.1\"><arf:reports>&e;</arf:reports>"
                                     "</arf:asset-report-collection>";
  auto xxe = ReadOvalEvidence(dir + "/xxe.xml");
  CHECK(xxe.status().code() == StatusCode::kDataLoss);
  CHECK_THAT(xxe.status().message(), Catch::Contains("no XCCDF 1.2 TestResult"));
}

}  // namespace
}  // namespace temper::stig
