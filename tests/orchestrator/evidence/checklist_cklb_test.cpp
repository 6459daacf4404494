#include "orchestrator/evidence/checklist_cklb.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "orchestrator/evidence/checklist_ckl.h"
#include "orchestrator/evidence/checklist_fixtures.h"

namespace temper::evidence {
namespace {

using testing::ChecklistData;
using testing::ReadFileOrEmpty;

TEST_CASE("A CKLB checklist reads, and writes back to the same checklist", "[evidence][cklb]") {
  std::string text = ReadFileOrEmpty(ChecklistData("firefox_sample.cklb"));
  REQUIRE_FALSE(text.empty());
  auto read = ReadCklb(text, "firefox_sample.cklb");
  INFO(read.status().ToString());
  REQUIRE(read.ok());
  const Checklist& c = *read;
  CHECK(c.asset.target_key == "5446");
  REQUIRE(c.stigs.size() == 1);
  CHECK(AttributeOf(c.stigs[0].info, "stigid") == "MOZ_Firefox_STIG");
  CHECK(AttributeOf(c.stigs[0].info, "uuid") == "add7e8af-33db-420d-aeb6-923f648b0698");
  REQUIRE(c.stigs[0].vulns.size() == 2);
  const ChecklistVuln& v = c.stigs[0].vulns[0];
  CHECK(AttributeOf(v.data, "Vuln_Num") == "V-251545");
  CHECK(AttributeOf(v.data, "Rule_ID") == "SV-251545r1117151_rule");
  CHECK(AttributeOf(v.data, "Rule_Ver") == "FFOX-00-000001");
  CHECK(AttributeOf(v.data, "Check_Content_Ref") == "M");
  CHECK(AttributesOf(v.data, "CCI_REF") == std::vector<std::string>{"CCI-002605"});
  CHECK(v.status == ChecklistStatus::kOpen);
  CHECK(v.finding_details == "Installed Firefox version is end-of-life and unsupported.");
  CHECK(c.stigs[0].vulns[1].status == ChecklistStatus::kNotAFinding);

  std::string written = WriteCklb(c);
  auto again = ReadCklb(written, "written.cklb");
  REQUIRE(again.ok());
  CHECK(*again == c);
  CHECK(WriteCklb(*again) == written);  // the derived ids are stable

  // What STIG Viewer 3 looks for, checked with a JSON reader of its own.
  nlohmann::json doc = nlohmann::json::parse(written);
  for (const char* key : {"title", "id", "stigs", "active", "mode", "has_path", "target_data", "cklb_version"}) {
    CHECK(doc.contains(key));
  }
  const nlohmann::json& stig = doc["stigs"][0];
  for (const char* key : {"stig_name", "display_name", "stig_id", "release_info", "version", "uuid",
                          "reference_identifier", "size", "rules"}) {
    CHECK(stig.contains(key));
  }
  CHECK(stig["size"] == 2);
  CHECK(stig["display_name"] == "Mozilla Firefox");
  const nlohmann::json& rule = stig["rules"][0];
  for (const char* key : {"uuid",          "stig_uuid",         "group_id",   "group_id_src", "rule_id",
                          "rule_id_src",   "rule_version",      "severity",   "group_title",  "rule_title",
                          "check_content", "fix_text",          "discussion", "ccis",         "legacy_ids",
                          "group_tree",    "check_content_ref", "status",     "comments",     "finding_details",
                          "overrides"}) {
    INFO(key);
    CHECK(rule.contains(key));
  }
  CHECK(rule["rule_id"] == "SV-251545r1117151");
  CHECK(rule["stig_uuid"] == stig["uuid"]);
}

TEST_CASE("A checklist goes from CKL to CKLB and back with its statuses and findings", "[evidence][cklb][ckl]") {
  auto ckl = ReadCkl(ReadFileOrEmpty(ChecklistData("stig_viewer_2.17_sample.ckl")), "sample.ckl");
  REQUIRE(ckl.ok());
  auto via_cklb = ReadCklb(WriteCklb(*ckl), "converted.cklb");
  REQUIRE(via_cklb.ok());
  REQUIRE(via_cklb->stigs.size() == 1);
  REQUIRE(via_cklb->stigs[0].vulns.size() == ckl->stigs[0].vulns.size());
  for (size_t i = 0; i < ckl->stigs[0].vulns.size(); ++i) {
    const ChecklistVuln& a = ckl->stigs[0].vulns[i];
    const ChecklistVuln& b = via_cklb->stigs[0].vulns[i];
    INFO(AttributeOf(a.data, "Vuln_Num"));
    CHECK(b.status == a.status);
    CHECK(b.finding_details == a.finding_details);
    CHECK(b.comments == a.comments);
    for (const char* attribute : {"Vuln_Num", "Rule_ID", "Rule_Ver", "Severity", "Rule_Title", "Check_Content",
                                  "Fix_Text", "Vuln_Discuss", "Group_Title"}) {
      CHECK(AttributeOf(b.data, attribute) == AttributeOf(a.data, attribute));
    }
    CHECK(AttributesOf(b.data, "CCI_REF") == AttributesOf(a.data, "CCI_REF"));
  }
  CHECK(via_cklb->asset.host_name == ckl->asset.host_name);
  CHECK(via_cklb->asset.marking == ckl->asset.marking);
}

TEST_CASE("Malformed CKLB is refused with the JSON path named", "[evidence][cklb]") {
  auto error = [](const char* json) { return ReadCklb(json, "x.cklb").status().message(); };
  CHECK(error("{") == "x.cklb: not valid JSON");
  CHECK(error("[]") == "x.cklb: expected a JSON object");
  CHECK(error("{}") == "x.cklb: stigs: expected an array");
  CHECK(error(R"({"stigs":[{"rules":{}}]})") == "x.cklb: stigs[0].rules: expected an array");
  CHECK(error(R"({"stigs":[{"rules":[{"status":"fixed"}]}]})") ==
        "x.cklb: stigs[0].rules[0].status: \"fixed\" is not a checklist status (not_a_finding, open, not_applicable, "
        "not_reviewed)");
  CHECK(error(R"({"stigs":[{"rules":[{"status":"open","ccis":[1]}]}]})") ==
        "x.cklb: stigs[0].rules[0].ccis[0]: expected a string");
  CHECK(error(R"({"target_data":{"host_name":{}},"stigs":[]})") == "x.cklb: target_data.host_name: expected a string");
}

}  // namespace
}  // namespace temper::evidence
