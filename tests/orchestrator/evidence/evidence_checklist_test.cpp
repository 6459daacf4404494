#include "orchestrator/evidence/evidence_checklist.h"

#include <map>

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "orchestrator/daemon_process.h"
#include "orchestrator/evidence/checklist_ckl.h"
#include "orchestrator/evidence/checklist_cklb.h"
#include "orchestrator/evidence/checklist_fixtures.h"
#include "orchestrator/evidence/checklist_xccdf.h"
#include "orchestrator/evidence/evidence_fixture.h"
#include "orchestrator/evidence/export_html.h"
#include "orchestrator/evidence/results_redaction.h"
#include "orchestrator/temp_dir.h"
#include "platform/process.h"
#include "skip.h"

namespace temper::evidence {
namespace {

std::map<std::string, const ChecklistVuln*> ByVulnNum(const Checklist& c) {
  std::map<std::string, const ChecklistVuln*> out;
  for (const ChecklistVuln& v : c.stigs.at(0).vulns) out[AttributeOf(v.data, "Vuln_Num")] = &v;
  return out;
}

TEST_CASE("Checklist statuses never claim more than OpenSCAP and the loop showed", "[evidence][checklist]") {
  testing::EvidenceFixture f;
  Checklist c = EvidenceChecklist(f.report);
  auto v = ByVulnNum(c);
  REQUIRE(v.size() == f.report.rules.size());
  CHECK(v["accounts_tmout"]->status == ChecklistStatus::kNotAFinding);
  CHECK(v["no_duplicate_uids"]->status == ChecklistStatus::kNotAFinding);
  CHECK(v["is_fips_mode_enabled"]->status == ChecklistStatus::kOpen);
  CHECK(v["sshd_disable_root_login"]->status == ChecklistStatus::kOpen);  // waived: a risk accepted, not fixed
  CHECK(v["configure_user_data_backups"]->status == ChecklistStatus::kNotReviewed);
  CHECK(v["package_mcafeetp_installed"]->status == ChecklistStatus::kNotApplicable);

  // A waived or manual rule is never NotAFinding, even if OpenSCAP passed it.
  RuleEvidence r = f.report.rules[3];
  r.rule.after_verdict = "pass";
  CHECK(ChecklistStatusOf(r) == ChecklistStatus::kOpen);
  r.rule.state = RuleState::kManual;
  CHECK(ChecklistStatusOf(r) == ChecklistStatus::kNotReviewed);
  r.rule.state = RuleState::kRebootPending;
  r.rule.after_verdict = "fail";
  CHECK(ChecklistStatusOf(r) == ChecklistStatus::kOpen);
  r.rule.state = RuleState::kError;
  r.rule.after_verdict = "error";
  CHECK(ChecklistStatusOf(r) == ChecklistStatus::kNotReviewed);
  // Plan only: the fix was reverted with everything else, so the rule is as it was before.
  RuleEvidence planned = f.report.rules[0];
  CHECK(ChecklistStatusOf(planned) == ChecklistStatus::kNotAFinding);
  planned.plan_only = true;
  CHECK(ChecklistStatusOf(planned) == ChecklistStatus::kOpen);
  r.rule.state = RuleState::kPending;
  r.rule.after_verdict = "";
  r.rule.before_verdict = "";
  CHECK(ChecklistStatusOf(r) == ChecklistStatus::kNotReviewed);
}

TEST_CASE("Each VULN carries the rule's metadata, the evidence and the loop's account", "[evidence][checklist]") {
  testing::EvidenceFixture f;
  Checklist c = EvidenceChecklist(f.report);
  auto v = ByVulnNum(c);
  const ChecklistVuln& fixed = *v["accounts_tmout"];
  CHECK(AttributeOf(fixed.data, "Rule_ID") == std::string(stig::kRulePrefix) + "accounts_tmout");
  CHECK(AttributeOf(fixed.data, "Rule_Ver") == "UBTU-20-010000");
  CHECK(AttributeOf(fixed.data, "Severity") == "medium");
  CHECK(AttributeOf(fixed.data, "Group_Title") == "SRG-OS-000480-GPOS-00227");
  CHECK(AttributesOf(fixed.data, "CCI_REF") == std::vector<std::string>{"CCI-000366", "CCI-001384"});
  CHECK(AttributeOf(fixed.data, "Fix_Text") == "echo fix accounts_tmout");
  CHECK(AttributeOf(fixed.data, "Check_Content") == "Automated check by OpenSCAP: checks accounts_tmout");
  CHECK(AttributeOf(fixed.data, "Check_Content_Ref") == "oval:ssg-accounts_tmout:def:1");
  CHECK_THAT(fixed.finding_details, Catch::Contains("OpenSCAP verdict before: fail; after: pass"));
  CHECK_THAT(fixed.finding_details, Catch::Contains("Applied by temper (attempt 2): 1 file (1 added)"));
  CHECK_THAT(fixed.finding_details, Catch::Contains("+declare -xr TMOUT=600"));
  CHECK_THAT(fixed.finding_details, Catch::Contains("OVAL definition oval:ssg-accounts_tmout:def:1"));
  CHECK_THAT(fixed.comments, Catch::Contains("Attempt 1: reverted") && Catch::Contains("wrong variable"));

  CHECK_THAT(v["is_fips_mode_enabled"]->comments,
             Catch::Contains("temper: escalated: attempt budget spent: 3 attempts failed"));
  CHECK_THAT(v["sshd_disable_root_login"]->comments,
             Catch::Contains("Waiver (risk accepted by ops@example.com): jump host needs root"));

  // Both formats, checked by readers that are not ours: DISA's schema for CKL, a JSON parser for CKLB.
  std::string ckl = WriteCkl(c);
  CHECK(testing::CklSchemaErrors(ckl).empty());
  nlohmann::json cklb = nlohmann::json::parse(WriteCklb(c));
  CHECK(cklb["stigs"][0]["rules"].size() == f.report.rules.size());
  CHECK(cklb["target_data"]["host_name"] == "lab");

  // Long text is cut to what checklist tools keep.
  f.report.rules[0].attempts[1].changes.files[0].diff = std::string(100000, 'x');
  CHECK(EvidenceChecklist(f.report).stigs[0].vulns[0].finding_details.size() <= kMaxChecklistText);
}

// A DISA STIG of three requirements, in DISA's manual XCCDF form.
stig::DisaStig ThreeRequirementStig() {
  std::string groups;
  for (int n : {0, 1, 2}) {
    groups += fmt::format(
        R"(<Group id="V-{0}"><title>SRG-{0}</title><Rule id="SV-{0}r1_rule" severity="high" weight="10.0">)"
        R"(<version>UBTU-20-01000{0}</version><title>Requirement {0}</title>)"
        R"(<description>&lt;VulnDiscussion&gt;Why {0}.&lt;/VulnDiscussion&gt;&lt;Documentable&gt;false&lt;/Documentable&gt;</description>)"
        R"(<ident system="http://cyber.mil/cci">CCI-00{0}</ident><fixtext>Fix {0}.</fixtext>)"
        R"(<check system="C-{0}"><check-content-ref name="M"/><check-content>Check {0}.</check-content></check>)"
        R"(</Rule></Group>)",
        n);
  }
  auto stig = stig::ParseDisaStig(
      R"(<Benchmark xmlns="http://checklists.nist.gov/xccdf/1.1" id="Test_STIG"><title>Test STIG</title>)"
      R"(<plain-text id="release-info">Release: 4 Benchmark Date: 1 Jan 2026</plain-text><version>2</version>)" +
          groups + "</Benchmark>",
      "U_Test_STIG_V2R4_Manual-xccdf.xml");
  REQUIRE(stig.ok());
  return *stig;
}

TEST_CASE("With DISA's STIG the checklist is DISA's: its ids, every requirement, the worst status of its rules",
          "[evidence][checklist][disa]") {
  testing::EvidenceFixture f;
  // accounts_tmout, is_fips_mode_enabled, sshd_disable_root_login and banner_etc_issue_net keep
  // UBTU-20-010000; no_duplicate_uids (pass) and package_mcafeetp_installed (not applicable)
  // implement UBTU-20-010001; configure_user_data_backups implements nothing DISA lists.
  f.infos[1].stig_ids = {"UBTU-20-010001"};
  f.infos[5].stig_ids = {"UBTU-20-010001"};
  f.infos[4].stig_ids = {"UBTU-20-019999"};
  stig::DisaStig disa = ThreeRequirementStig();
  Checklist c = EvidenceChecklist(f.report, &disa);
  REQUIRE(c.stigs.size() == 1);
  CHECK(AttributeOf(c.stigs[0].info, "stigid") == "Test_STIG");
  CHECK(AttributeOf(c.stigs[0].info, "version") == "2");
  CHECK(AttributeOf(c.stigs[0].info, "releaseinfo") == "Release: 4 Benchmark Date: 1 Jan 2026");
  CHECK(AttributeOf(c.stigs[0].info, "filename") == "U_Test_STIG_V2R4_Manual-xccdf.xml");
  auto v = ByVulnNum(c);
  REQUIRE(v.size() == 3);
  const ChecklistVuln& first = *v["V-0"];
  CHECK(AttributeOf(first.data, "Rule_ID") == "SV-0r1_rule");
  CHECK(AttributeOf(first.data, "Rule_Ver") == "UBTU-20-010000");
  CHECK(AttributeOf(first.data, "Vuln_Discuss") == "Why 0.");
  CHECK(AttributeOf(first.data, "Check_Content") == "Check 0.");
  CHECK(AttributeOf(first.data, "STIGRef") == "Test STIG :: Version 2, Release: 4 Benchmark Date: 1 Jan 2026");
  CHECK(AttributesOf(first.data, "CCI_REF") == std::vector<std::string>{"CCI-000"});
  // STIG Viewer's attribute order.
  std::vector<std::string> names;
  for (const auto& [name, value] : first.data) names.push_back(name);
  CHECK(names == std::vector<std::string>{"Vuln_Num",
                                          "Severity",
                                          "Group_Title",
                                          "Rule_ID",
                                          "Rule_Ver",
                                          "Rule_Title",
                                          "Vuln_Discuss",
                                          "IA_Controls",
                                          "Check_Content",
                                          "Fix_Text",
                                          "False_Positives",
                                          "False_Negatives",
                                          "Documentable",
                                          "Mitigations",
                                          "Potential_Impact",
                                          "Third_Party_Tools",
                                          "Mitigation_Control",
                                          "Responsibility",
                                          "Security_Override_Guidance",
                                          "Check_Content_Ref",
                                          "Weight",
                                          "Class",
                                          "STIGRef",
                                          "TargetKey",
                                          "STIG_UUID",
                                          "CCI_REF"});
  // Fixed, escalated, waived and fixed: the escalated rule keeps the requirement open.
  CHECK(first.status == ChecklistStatus::kOpen);
  CHECK_THAT(first.finding_details, Catch::StartsWith("SCAP Security Guide rule accounts_tmout (NotAFinding):\n"));
  CHECK_THAT(first.comments,
             Catch::Contains("SCAP Security Guide rule is_fips_mode_enabled (Open):\ntemper: escalated"));
  // Passing and not applicable: not a finding.
  CHECK(v["V-1"]->status == ChecklistStatus::kNotAFinding);
  CHECK(v["V-2"]->status == ChecklistStatus::kNotReviewed);
  CHECK_THAT(v["V-2"]->comments, Catch::StartsWith("temper: no rule of batch 7 implements UBTU-20-010002"));
  CHECK_THAT(c.asset.target_comment,
             Catch::Contains("DISA STIG Test_STIG V2R4") &&
                 Catch::Contains("1 rule of the batch implements no requirement of it: configure_user_data_backups"));
  // Written and read back as CKL and CKLB unchanged.
  CHECK(*ReadCkl(WriteCkl(c), "c.ckl") == c);

  CHECK(WorseStatus(ChecklistStatus::kNotApplicable, ChecklistStatus::kNotAFinding) == ChecklistStatus::kNotAFinding);
  CHECK(WorseStatus(ChecklistStatus::kNotReviewed, ChecklistStatus::kNotAFinding) == ChecklistStatus::kNotReviewed);
  CHECK(WorseStatus(ChecklistStatus::kNotReviewed, ChecklistStatus::kOpen) == ChecklistStatus::kOpen);
}

TEST_CASE("Without DISA's STIG the checklist says its ids are SSG's", "[evidence][checklist][disa]") {
  testing::EvidenceFixture f;
  Checklist c = EvidenceChecklist(f.report);
  CHECK_THAT(c.asset.target_comment, Catch::Contains("Vuln_Num and Rule_ID are SCAP Security Guide's rule ids"));
}

TEST_CASE("XCCDF results carry DISA's benchmark and rule ids with each requirement's result",
          "[evidence][checklist][disa]") {
  testing::EvidenceFixture f;
  stig::DisaStig disa = ThreeRequirementStig();
  Checklist c = EvidenceChecklist(f.report, &disa);
  std::string xml = WriteXccdfResults(c, {"batch-7", "temper batch 7 (nightly)", 1'700'000'000'000, 1'700'000'060'000});
  CHECK_THAT(xml, Catch::Contains(R"(<benchmark href="U_Test_STIG_V2R4_Manual-xccdf.xml" )"
                                  R"(id="xccdf_mil.disa.stig_benchmark_Test_STIG"/>)"));
  CHECK_THAT(xml, Catch::Contains(R"(start-time="2023-11-14T22:13:20Z" end-time="2023-11-14T22:14:20Z")"));
  CHECK_THAT(xml, Catch::Contains("<target>lab</target>"));
  CHECK_THAT(xml, Catch::Contains(R"(<rule-result idref="xccdf_mil.disa.stig_rule_SV-0r1_rule")"));
  CHECK_THAT(xml, Catch::Contains("<result>fail</result>") && Catch::Contains("<result>notchecked</result>"));
  // Valid to the XCCDF 1.2 schema OpenSCAP ships.
  testing::TempDir dir;
  std::string path = dir.Write("results.xml", xml);
  testing::ProcessResult valid = testing::RunProcess({"/usr/bin/xmllint", "--noout", "--nonet", "--schema",
                                                      "/usr/share/openscap/schemas/xccdf/1.2/xccdf_1.2.xsd", path});
  INFO(valid.err);
  CHECK(valid.exit_code == 0);
}

TEST_CASE("No password hash of a shadow change reaches an export: HTML, CKL, CKLB or XCCDF",
          "[evidence][checklist][redaction]") {
  testing::EvidenceFixture f;
  // The kept attempt of accounts_tmout also changed /etc/shadow, as a password rule's fix does, and
  // its change set was stored with the hashes (as a store from before redaction holds it).
  const std::string sha512 = "$6$rounds=5000$saltsalt$" + std::string(86, 'A');
  const std::string yescrypt = "$y$j9T$salt$" + std::string(43, 'B');
  nlohmann::json stored = {
      {"files",
       {{{"path", "/etc/shadow"},
         {"change", "modified"},
         {"before", {{"type", "file"}, {"mode", "0640"}, {"uid", 0}, {"gid", 42}, {"size", 120}}},
         {"after", {{"type", "file"}, {"mode", "0640"}, {"uid", 0}, {"gid", 42}, {"size", 110}}},
         {"diff", "--- a/etc/shadow\n+++ b/etc/shadow\n@@ -1,2 +1,2 @@\n-root:" + sha512 +
                      ":19000:0:99999:7:::\n+root:" + yescrypt + ":19700:0:60:7:::\n games:*:19000:0:99999:7:::\n"},
         {"binary", false}}}}};
  auto changes = stig::ChangeSet::FromJson(stored.dump());
  REQUIRE(changes.ok());
  evidence::AttemptEvidence& kept = f.report.rules.front().attempts.back();
  kept.changes.files.insert(kept.changes.files.begin(), changes->files.front());

  Checklist c = EvidenceChecklist(f.report);
  const std::map<std::string, std::string> exports = {
      {"html", ExportHtml(f.report)},
      {"ckl", WriteCkl(c)},
      {"cklb", WriteCklb(c)},
      {"xccdf", WriteXccdfResults(c, {.test_result_id = "batch-7", .title = "t", .start_time = 1, .end_time = 2})}};
  for (const auto& [format, text] : exports) {
    INFO(format);
    CHECK(text.find("$6$") == std::string::npos);
    CHECK(text.find("$y$") == std::string::npos);
    CHECK(text.find(std::string(43, 'B')) == std::string::npos);
  }
  // What changed stays readable: the account, the algorithms and the aging fields.
  CHECK_THAT(exports.at("ckl"), Catch::Contains("root:&lt;yescrypt hash redacted&gt;:19700:0:60:7:::"));
  CHECK_THAT(exports.at("html"), Catch::Contains("sha512crypt hash redacted"));
}

// An OVAL definition whose shadow_object collects every account of /etc/shadow, as SSG's
// accounts_password_set_max_life_existing does.
constexpr const char* kShadowOval = R"(<?xml version="1.0" encoding="UTF-8"?>
<oval_definitions xmlns="http://oval.mitre.org/XMLSchema/oval-definitions-5"
    xmlns:oval="http://oval.mitre.org/XMLSchema/oval-common-5"
    xmlns:unix="http://oval.mitre.org/XMLSchema/oval-definitions-5#unix">
  <generator><oval:schema_version>5.11.2</oval:schema_version><oval:timestamp>2026-01-01T00:00:00</oval:timestamp></generator>
  <definitions><definition class="compliance" id="oval:t:def:1" version="1">
    <metadata><title>aging</title><description>d</description></metadata>
    <criteria><criterion test_ref="oval:t:tst:1"/></criteria></definition></definitions>
  <tests><unix:shadow_test check="all" check_existence="any_exist" comment="c" id="oval:t:tst:1" version="1">
    <unix:object object_ref="oval:t:obj:1"/></unix:shadow_test></tests>
  <objects><unix:shadow_object comment="c" id="oval:t:obj:1" version="1">
    <unix:username operation="pattern match">.*</unix:username></unix:shadow_object></objects>
</oval_definitions>
)";

TEST_CASE("OpenSCAP's shadow items keep no password hash in an export", "[evidence][redaction]") {
  // The real oscap, reading a shadow file of test accounts bound over /etc/shadow in a mount
  // namespace of its own (the host's file is untouched), as it reads a target's.
  testing::TempDir dir;
  const std::string shadow = dir.Write("shadow", "root:$6$salt$" + std::string(86, 'R') +
                                                     ":19000:0:99999:7:::\n"
                                                     "alice:!$y$j9T$salt$" +
                                                     std::string(43, 'Y') +
                                                     ":19000:0:60:7:::\n"
                                                     "daemon:*:19000:0:99999:7:::\n");
  const std::string oval = dir.Write("oval.xml", kShadowOval);
  temper::ProcessSpec p;
  p.argv = {"unshare",
            "-m",
            "--propagation",
            "private",
            "sh",
            "-c",
            "mount --bind \"$1\" /etc/shadow && exec oscap oval eval --results \"$2\" \"$3\"",
            "sh",
            shadow,
            dir / "results.xml",
            oval};
  p.timeout = std::chrono::seconds(120);
  auto ran = temper::RunProcess(p);
  REQUIRE(ran.ok());
  if (!ran->Succeeded()) TEMPER_SKIP("oscap in a mount namespace of its own cannot run here: " + ran->err);
  const std::string results = testing::ReadFileOrEmpty(dir / "results.xml");
  REQUIRE(results.find(std::string(86, 'R')) != std::string::npos);  // what OpenSCAP collects

  const std::string redacted = RedactPasswordElements(results);
  CHECK(redacted.find("$6$") == std::string::npos);
  CHECK(redacted.find("$y$") == std::string::npos);
  CHECK(redacted.find(std::string(43, 'Y')) == std::string::npos);
  CHECK_THAT(redacted, Catch::Contains(":password>&lt;sha512crypt hash redacted&gt;</"));
  CHECK_THAT(redacted, Catch::Contains(":password>!&lt;yescrypt hash redacted&gt;</"));
  CHECK_THAT(redacted, Catch::Contains(":password>*</"));  // not a hash: what the rules judge
  CHECK_THAT(redacted, Catch::Contains(">alice</"));
  CHECK(RedactPasswordElements(redacted) == redacted);

  // The OVAL evidence of the HTML and checklist exports, item fields as ReadOvalEvidence gives them.
  std::vector<stig::RuleEvidence> evidence(1);
  evidence[0].definitions.resize(1);
  evidence[0].definitions[0].tests.resize(1);
  evidence[0].definitions[0].tests[0].items.push_back(
      {.id = "1",
       .type = "shadow_item",
       .status = "exists",
       .result = "true",
       .fields = {{"username", "root"}, {"password", "$6$salt$" + std::string(86, 'R')}, {"chg_lst", "19000"}}});
  RedactPasswordFields(evidence);
  CHECK(evidence[0].definitions[0].tests[0].items[0].fields ==
        stig::OvalFields{{"username", "root"}, {"password", "<sha512crypt hash redacted>"}, {"chg_lst", "19000"}});
}

}  // namespace
}  // namespace temper::evidence
