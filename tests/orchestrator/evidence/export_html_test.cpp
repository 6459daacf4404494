#include "orchestrator/evidence/export_html.h"

#include <regex>

#include <catch2/catch.hpp>

#include "orchestrator/evidence/evidence_fixture.h"

namespace temper::evidence {
namespace {

TEST_CASE("The HTML report stands alone and escapes what it did not write", "[evidence][html]") {
  testing::EvidenceFixture f;
  std::string html = ExportHtml(f.report);
  // No script, no external resource, no link leaving the page.
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;") != std::string::npos);
  CHECK(html.find("+&lt;script&gt;document.cookie&lt;/script&gt;") != std::string::npos);
  CHECK_FALSE(std::regex_search(html, std::regex(R"((src|href)\s*=\s*"(?!#))")));
  CHECK(html.find("<link") == std::string::npos);
  CHECK(html.find("@import") == std::string::npos);
  CHECK(html.find("<style>") != std::string::npos);
  CHECK(html.find("@media print") != std::string::npos);

  // The score, every rule in the table, and the evidence an assessor asks for.
  CHECK(html.find(
            "Score before: <b>16.7% (1 pass, 5 fail, 2 other)</b> · after: <b>60.0% (3 pass, 2 fail, 2 other)</b>") !=
        std::string::npos);
  for (const RuleEvidence& r : f.report.rules) {
    std::string name = r.rule.rule_id.substr(std::string(stig::kRulePrefix).size());
    CHECK(html.find(">" + name + "</a></td>") != std::string::npos);
  }
  CHECK(html.find("+declare -xr TMOUT=600") != std::string::npos);
  CHECK(html.find("Why temper gave up") != std::string::npos);
  CHECK(html.find("needs a kernel") != std::string::npos);
  CHECK(html.find("Waived: jump host needs root (risk accepted by ops@example.com)") != std::string::npos);
  CHECK(html.find("class=\"s-Not_Reviewed\">Not_Reviewed") != std::string::npos);
  CHECK(html.find("OVAL definition oval:ssg-accounts_tmout:def:1") != std::string::npos);
}

}  // namespace
}  // namespace temper::evidence
