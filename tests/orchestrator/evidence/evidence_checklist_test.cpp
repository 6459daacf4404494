#include "orchestrator/evidence/evidence_checklist.h"

#include <map>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "orchestrator/evidence/checklist_ckl.h"
#include "orchestrator/evidence/checklist_cklb.h"
#include "orchestrator/evidence/checklist_fixtures.h"
#include "orchestrator/evidence/evidence_fixture.h"

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

}  // namespace
}  // namespace temper::evidence
