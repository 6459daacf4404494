#include "orchestrator/evidence/evidence_checklist.h"

#include <filesystem>

#include <fmt/format.h>

#include "orchestrator/evidence/markup_escape.h"
#include "stig/verdict.h"

namespace temper::evidence {
namespace {

std::string ShortName(const std::string& id) {
  size_t at = id.find(stig::kRulePrefix);
  return at == std::string::npos ? id : id.substr(at + stig::kRulePrefix.size());
}

std::string Joined(const std::vector<std::string>& v, std::string_view sep) {
  return fmt::format("{}", fmt::join(v, sep));
}

std::string FindingDetails(const RuleEvidence& r) {
  std::string out = fmt::format("OpenSCAP verdict before: {}; after: {}\n",
                                r.rule.before_verdict.empty() ? "not evaluated" : r.rule.before_verdict,
                                r.rule.after_verdict.empty() ? "not evaluated" : r.rule.after_verdict);
  if (const AttemptEvidence* kept = r.kept()) {
    out += fmt::format("\nApplied by temper (attempt {}): {}\n", kept->attempt.number, kept->changes.Summary());
    for (const stig::FileChange& f : kept->changes.files) {
      out += fmt::format("{} {}\n", stig::FileChangeKindName(f.change), f.path);
      if (!f.diff.empty()) out += f.diff;
    }
  }
  const std::optional<stig::RuleEvidence>& evidence = r.after ? r.after : r.before;
  if (evidence && !evidence->definitions.empty()) {
    out += fmt::format("\nOpenSCAP evidence ({}):\n{}", r.after ? "after the batch" : "before the batch",
                       evidence->Text());
  }
  return CutText(out, kMaxChecklistText);
}

std::string Comments(const RuleEvidence& r) {
  std::string out =
      r.plan_only ? "temper (plan only: every change was reverted; this is what it would do): " : "temper: ";
  out += RuleStateName(r.rule.state);
  if (!r.rule.detail.empty()) out += ": " + r.rule.detail;
  out += "\n";
  if (r.waiver) {
    out += fmt::format(
        "Waiver (risk accepted by {}): {}{}\n", r.waiver->owner, r.waiver->reason,
        r.waiver->expires_at ? fmt::format(" (expires {})", IsoTime(*r.waiver->expires_at)) : std::string());
  }
  for (const AttemptEvidence& a : r.attempts) {
    out += fmt::format("\nAttempt {}: {} (OpenSCAP {})\nApproach: {}\n", a.attempt.number,
                       AttemptOutcomeName(a.attempt.outcome), a.attempt.verdict, a.attempt.approach);
    if (!a.attempt.commands.empty()) out += "Commands:\n  " + Joined(a.attempt.commands, "\n  ") + "\n";
    out += "Changes: " + a.changes.Summary() + "\n";
    if (!a.attempt.reflection.empty()) out += "Reflection: " + a.attempt.reflection + "\n";
  }
  return CutText(out, kMaxChecklistText);
}

}  // namespace

ChecklistStatus ChecklistStatusOf(const RuleEvidence& r) {
  const std::string& v = r.latest_verdict();
  switch (r.rule.state) {
    case RuleState::kManual:
      return ChecklistStatus::kNotReviewed;
    case RuleState::kWaived:
      return v == "notapplicable" ? ChecklistStatus::kNotApplicable : ChecklistStatus::kOpen;
    case RuleState::kEscalated:
    case RuleState::kRebootPending:
    case RuleState::kHeld:
      return v == "notapplicable" ? ChecklistStatus::kNotApplicable : ChecklistStatus::kOpen;
    default:
      break;
  }
  if (v == "pass" || v == "fixed") return ChecklistStatus::kNotAFinding;
  if (v == "fail") return ChecklistStatus::kOpen;
  if (v == "notapplicable") return ChecklistStatus::kNotApplicable;
  return ChecklistStatus::kNotReviewed;
}

Checklist EvidenceChecklist(const EvidenceReport& report) {
  const BatchRecord& b = report.batch;
  Checklist c;
  c.asset.host_name = b.target;
  c.asset.tech_area = "UNIX OS";
  c.asset.target_comment = fmt::format("temper batch {}{}", b.id, b.name.empty() ? "" : " (" + b.name + ")");
  ChecklistStig stig;
  std::string stig_uuid = DerivedUuid(fmt::format("{}|{}|{}", report.benchmark_id, report.profile.id, b.id));
  std::string stig_ref = fmt::format("{} :: {}", report.profile.title, report.benchmark_id);
  stig.info = {{"version", ""},
               {"classification", "UNCLASSIFIED"},
               {"customname", ""},
               {"stigid", report.benchmark_id},
               {"description", report.profile.description},
               {"filename", std::filesystem::path(b.datastream).filename().string()},
               {"releaseinfo", fmt::format("SCAP Security Guide profile {}", report.profile.id)},
               {"title", report.profile.title},
               {"uuid", stig_uuid},
               {"notice", "terms-of-use"},
               {"source", "SCAP Security Guide"}};
  for (const RuleEvidence& r : report.rules) {
    const stig::RuleInfo* info = r.info;
    ChecklistVuln v;
    auto add = [&](const char* name, std::string value) { v.data.emplace_back(name, std::move(value)); };
    add("Vuln_Num", ShortName(r.rule.rule_id));
    add("Severity", info ? info->severity : "unknown");
    add("Group_Title", info && !info->srgs.empty() ? info->srgs.front() : info ? info->group_id : "");
    add("Rule_ID", r.rule.rule_id);
    add("Rule_Ver", info ? Joined(info->stig_ids, ", ") : "");
    add("Rule_Title", info ? info->title : r.rule.rule_id);
    add("Vuln_Discuss",
        info ? (info->rationale.empty() ? info->description : info->description + "\n\n" + info->rationale) : "");
    add("IA_Controls", "");
    add("Check_Content", info && !info->oval_definition_id.empty()
                             ? "Automated check by OpenSCAP: " + info->check_summary
                             : "No automated check: review manually.");
    add("Fix_Text", info ? info->fix_bash : "");
    for (const char* empty : {"False_Positives", "False_Negatives"}) add(empty, "");
    add("Documentable", "false");
    for (const char* empty : {"Mitigations", "Potential_Impact", "Third_Party_Tools", "Mitigation_Control",
                              "Responsibility", "Security_Override_Guidance"}) {
      add(empty, "");
    }
    add("Check_Content_Ref", info && !info->oval_definition_id.empty() ? info->oval_definition_id : "M");
    add("Weight", "10.0");
    add("Class", "Unclass");
    add("STIGRef", stig_ref);
    add("TargetKey", "");
    add("STIG_UUID", stig_uuid);
    if (info) {
      for (const std::string& cci : info->ccis) add("CCI_REF", cci);
    }
    v.status = ChecklistStatusOf(r);
    v.finding_details = FindingDetails(r);
    v.comments = Comments(r);
    stig.vulns.push_back(std::move(v));
  }
  c.stigs.push_back(std::move(stig));
  return c;
}

}  // namespace temper::evidence
