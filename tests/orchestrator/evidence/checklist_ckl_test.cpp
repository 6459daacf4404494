#include "orchestrator/evidence/checklist_ckl.h"

#include <catch2/catch.hpp>

#include "orchestrator/evidence/checklist_fixtures.h"

namespace temper::evidence {
namespace {

using testing::ChecklistData;
using testing::CklSchemaErrors;
using testing::ReadFileOrEmpty;

TEST_CASE("A checklist saved by STIG Viewer 2.17 reads, and writes back to the same checklist", "[evidence][ckl]") {
  std::string text = ReadFileOrEmpty(ChecklistData("stig_viewer_2.17_sample.ckl"));
  REQUIRE_FALSE(text.empty());
  REQUIRE(CklSchemaErrors(text).empty());
  // The schema check can fail: a status STIG Viewer does not know.
  std::string bad = text;
  bad.replace(bad.find("<STATUS>Not_Applicable</STATUS>"), 31, "<STATUS>Fixed</STATUS>");
  CHECK_THAT(CklSchemaErrors(bad), Catch::Contains("STATUS"));

  auto read = ReadCkl(text, "stig_viewer_2.17_sample.ckl");
  INFO(read.status().ToString());
  REQUIRE(read.ok());
  const Checklist& c = *read;
  CHECK(c.asset.role == "None");
  CHECK(c.asset.marking == "CUI");
  CHECK(c.asset.target_key == "5551");
  REQUIRE(c.stigs.size() == 1);
  CHECK(AttributeOf(c.stigs[0].info, "stigid") == "RHEL_9_STIG");
  CHECK(AttributeOf(c.stigs[0].info, "customname").empty());
  REQUIRE(c.stigs[0].vulns.size() == 11);
  const ChecklistVuln& first = c.stigs[0].vulns[0];
  CHECK(AttributeOf(first.data, "Vuln_Num") == "V-257777");
  CHECK(AttributeOf(first.data, "Rule_ID") == "SV-257777r925318_rule");
  CHECK(AttributeOf(first.data, "Rule_Ver") == "RHEL-09-211010");
  CHECK(AttributesOf(first.data, "CCI_REF") == std::vector<std::string>{"CCI-000366"});
  CHECK(AttributesOf(first.data, "LEGACY_ID").size() == 2);  // repeated attributes are kept
  CHECK(first.status == ChecklistStatus::kNotApplicable);
  CHECK(first.severity_override == "medium");
  CHECK(first.severity_justification == "Testing both N/A and overidden");

  std::string written = WriteCkl(c);
  CHECK(CklSchemaErrors(written).empty());
  auto again = ReadCkl(written, "written.ckl");
  REQUIRE(again.ok());
  CHECK(*again == c);
  CHECK(WriteCkl(*again) == written);
}

TEST_CASE("Text a checklist carries survives markup, control characters and invalid UTF-8", "[evidence][ckl]") {
  Checklist c;
  ChecklistStig stig;
  stig.info = {{"title", "T & <S>"}, {"customname", ""}};
  ChecklistVuln v;
  v.data = {{"Vuln_Num", "rule_1"}, {"Rule_Title", "a <script>alert(1)</script> & \"b\""}};
  v.status = ChecklistStatus::kOpen;
  v.finding_details = "line 1\r\nline 2\ttab ]]> end";
  v.comments = "bell \x07 and latin-1 caf\xE9";
  stig.vulns.push_back(v);
  c.stigs.push_back(stig);
  std::string xml = WriteCkl(c);
  CHECK(xml.find("<script>") == std::string::npos);
  CHECK(CklSchemaErrors(xml).empty());
  auto back = ReadCkl(xml, "escaped.ckl");
  REQUIRE(back.ok());
  const ChecklistVuln& r = back->stigs[0].vulns[0];
  CHECK(AttributeOf(r.data, "Rule_Title") == "a <script>alert(1)</script> & \"b\"");
  CHECK(r.finding_details == "line 1\r\nline 2\ttab ]]> end");
  CHECK(r.comments == "bell \xEF\xBF\xBD and latin-1 caf\xEF\xBF\xBD");  // replaced, so the file stays XML
  CHECK(AttributeOf(back->stigs[0].info, "title") == "T & <S>");
}

TEST_CASE("Malformed checklists are refused with the file and line named", "[evidence][ckl]") {
  auto broken = ReadCkl("<CHECKLIST>\n<ASSET>\n</CHECKLIST>", "broken.ckl");
  CHECK(broken.status().code() == StatusCode::kDataLoss);
  CHECK_THAT(broken.status().message(), Catch::StartsWith("broken.ckl:3: not well-formed XML"));
  CHECK_THAT(ReadCkl("<BENCHMARK/>", "other.xml").status().message(),
             Catch::Contains("the root element is not CHECKLIST"));
  auto status = ReadCkl(
      "<CHECKLIST><STIGS><iSTIG>\n<VULN><STIG_DATA><VULN_ATTRIBUTE>Vuln_Num</VULN_ATTRIBUTE><ATTRIBUTE_DATA>V-1"
      "</ATTRIBUTE_DATA></STIG_DATA><STATUS>Fixed</STATUS></VULN></iSTIG></STIGS></CHECKLIST>",
      "status.ckl");
  CHECK(status.status().code() == StatusCode::kDataLoss);
  CHECK_THAT(status.status().message(),
             Catch::Contains("status.ckl:2: VULN V-1: STATUS \"Fixed\" is not a checklist status"));
}

}  // namespace
}  // namespace temper::evidence
