#include "orchestrator/evidence/checklist_xccdf.h"

#include <ctime>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "orchestrator/evidence/markup_escape.h"
#include "stig/scap/disa_stig.h"

namespace temper::evidence {
namespace {

std::string XsDateTime(TimeMs ms) {
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}Z", fmt::gmtime(static_cast<std::time_t>(ms / 1000)));
}

std::string_view ResultOf(ChecklistStatus s) {
  switch (s) {
    case ChecklistStatus::kNotAFinding:
      return "pass";
    case ChecklistStatus::kOpen:
      return "fail";
    case ChecklistStatus::kNotApplicable:
      return "notapplicable";
    case ChecklistStatus::kNotReviewed:
      return "notchecked";
  }
  return "notchecked";
}

}  // namespace

std::string WriteXccdfResults(const Checklist& c, const XccdfResultsRun& run) {
  const ChecklistStig empty;
  const ChecklistStig& stig = c.stigs.empty() ? empty : c.stigs.front();
  auto e = [](std::string_view s) { return MarkupEscape(s); };
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += fmt::format(
      "<TestResult xmlns=\"http://checklists.nist.gov/xccdf/1.2\" id=\"xccdf_temper_testresult_{}\" "
      "start-time=\"{}\" end-time=\"{}\" test-system=\"cpe:/a:temper:temper:{}\" version=\"{}\">\n",
      e(run.test_result_id), XsDateTime(run.start_time), XsDateTime(run.end_time), TEMPER_VERSION,
      e(AttributeOf(stig.info, "version")));
  out += fmt::format("  <benchmark href=\"{}\" id=\"{}{}\"/>\n", e(AttributeOf(stig.info, "filename")),
                     stig::kDisaBenchmarkPrefix, e(AttributeOf(stig.info, "stigid")));
  out += fmt::format("  <title>{}</title>\n", e(run.title));
  if (!c.asset.target_comment.empty()) out += fmt::format("  <remark>{}</remark>\n", e(c.asset.target_comment));
  out += fmt::format("  <target>{}</target>\n", e(c.asset.host_name));
  out += "  <target-facts>\n";
  out += fmt::format("    <fact name=\"urn:xccdf:fact:asset:identifier:host_name\" type=\"string\">{}</fact>\n",
                     e(c.asset.host_name));
  if (!c.asset.host_fqdn.empty()) {
    out += fmt::format("    <fact name=\"urn:xccdf:fact:asset:identifier:fqdn\" type=\"string\">{}</fact>\n",
                       e(c.asset.host_fqdn));
  }
  out += "  </target-facts>\n";
  uint32_t pass = 0, fail = 0;
  for (const ChecklistVuln& v : stig.vulns) {
    pass += v.status == ChecklistStatus::kNotAFinding;
    fail += v.status == ChecklistStatus::kOpen;
    out += fmt::format("  <rule-result idref=\"{}{}\" time=\"{}\" severity=\"{}\" weight=\"{}\">\n",
                       stig::kDisaRulePrefix, e(AttributeOf(v.data, "Rule_ID")), XsDateTime(run.end_time),
                       e(AttributeOf(v.data, "Severity")), e(AttributeOf(v.data, "Weight")));
    out += fmt::format("    <result>{}</result>\n", ResultOf(v.status));
    for (const std::string& cci : AttributesOf(v.data, "CCI_REF")) {
      out += fmt::format("    <ident system=\"http://cyber.mil/cci\">{}</ident>\n", e(cci));
    }
    if (!v.finding_details.empty()) {
      out += fmt::format("    <message severity=\"info\">{}</message>\n", e(v.finding_details));
    }
    // check-content holds elements of other namespaces only; STIG Manager reads the local name.
    out += "    <check system=\"urn:temper:loop-evidence\">\n      <check-content>\n";
    out += fmt::format("        <comment xmlns=\"urn:temper:loop-evidence\">{}</comment>\n", e(v.comments));
    out += "      </check-content>\n    </check>\n";
    out += "  </rule-result>\n";
  }
  double score = pass + fail == 0 ? 0.0 : 100.0 * pass / (pass + fail);
  out += fmt::format("  <score system=\"urn:xccdf:scoring:default\" maximum=\"100\">{:.2f}</score>\n", score);
  out += "</TestResult>\n";
  return out;
}

}  // namespace temper::evidence
