#include "orchestrator/evidence/evidence_checklist.h"

#include <filesystem>
#include <map>

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

ChecklistStatus WorseStatus(ChecklistStatus a, ChecklistStatus b) {
  auto rank = [](ChecklistStatus s) {
    switch (s) {
      case ChecklistStatus::kOpen:
        return 3;
      case ChecklistStatus::kNotReviewed:
        return 2;
      case ChecklistStatus::kNotAFinding:
        return 1;
      case ChecklistStatus::kNotApplicable:
        return 0;
    }
    return 3;
  };
  return rank(a) >= rank(b) ? a : b;
}

namespace {

ChecklistAsset Asset(const BatchRecord& b) {
  ChecklistAsset asset;
  asset.host_name = b.target;
  asset.tech_area = "UNIX OS";
  asset.target_comment = fmt::format("temper batch {}{}", b.id, b.name.empty() ? "" : " (" + b.name + ")");
  return asset;
}

// The VULNs of SSG's ids: one per rule of the batch.
ChecklistStig SsgStig(const EvidenceReport& report) {
  const BatchRecord& b = report.batch;
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
  return stig;
}

// The VULNs of DISA's STIG: one per requirement, decided by the batch's rules that implement it.
ChecklistStig DisaChecklistStig(const EvidenceReport& report, const stig::DisaStig& disa,
                                std::vector<std::string>& unmatched_rules) {
  const BatchRecord& b = report.batch;
  std::map<std::string, std::vector<const RuleEvidence*>> by_stig_id;
  for (const RuleEvidence& r : report.rules) {
    bool matched = false;
    for (const std::string& id : r.info ? r.info->stig_ids : std::vector<std::string>()) {
      if (!disa.FindByStigId(id)) continue;
      by_stig_id[id].push_back(&r);
      matched = true;
    }
    if (!matched) unmatched_rules.push_back(ShortName(r.rule.rule_id));
  }
  ChecklistStig stig;
  std::string stig_uuid = DerivedUuid(fmt::format("{}|{}|{}", disa.benchmark_id, disa.RevisionName(), b.id));
  std::string stig_ref = fmt::format("{} :: Version {}, {}", disa.title, disa.version, disa.release_info);
  stig.info = {{"version", disa.version},
               {"classification", "UNCLASSIFIED"},
               {"customname", ""},
               {"stigid", disa.benchmark_id},
               {"description", disa.description},
               {"filename", std::filesystem::path(disa.source).filename().string()},
               {"releaseinfo", disa.release_info},
               {"title", disa.title},
               {"uuid", stig_uuid},
               {"notice", "terms-of-use"},
               {"source", "STIG.DOD.MIL"}};
  for (const stig::DisaStigRule& d : disa.rules) {
    ChecklistVuln v;
    auto add = [&](const char* name, std::string value) { v.data.emplace_back(name, std::move(value)); };
    add("Vuln_Num", d.vuln_id);
    add("Severity", d.severity);
    add("Group_Title", d.group_title);
    add("Rule_ID", d.rule_id);
    add("Rule_Ver", d.stig_id);
    add("Rule_Title", d.title);
    add("Vuln_Discuss", d.discussion);
    add("IA_Controls", d.ia_controls);
    add("Check_Content", d.check_content);
    add("Fix_Text", d.fix_text);
    add("False_Positives", d.false_positives);
    add("False_Negatives", d.false_negatives);
    add("Documentable", d.documentable.empty() ? "false" : d.documentable);
    add("Mitigations", d.mitigations);
    add("Potential_Impact", d.potential_impacts);
    add("Third_Party_Tools", d.third_party_tools);
    add("Mitigation_Control", d.mitigation_control);
    add("Responsibility", d.responsibility);
    add("Security_Override_Guidance", d.severity_override_guidance);
    add("Check_Content_Ref", d.check_content_ref.empty() ? "M" : d.check_content_ref);
    add("Weight", d.weight);
    add("Class", "Unclass");
    add("STIGRef", stig_ref);
    add("TargetKey", "");
    add("STIG_UUID", stig_uuid);
    for (const std::string& id : d.legacy_ids) add("LEGACY_ID", id);
    for (const std::string& cci : d.ccis) add("CCI_REF", cci);
    auto it = by_stig_id.find(d.stig_id);
    if (it == by_stig_id.end()) {
      v.status = ChecklistStatus::kNotReviewed;
      v.comments = fmt::format(
          "temper: no rule of batch {} implements {}: SCAP Security Guide's profile {} has no automated rule for it, "
          "or the batch did not select it. Review it manually.",
          b.id, d.stig_id, report.profile.id);
    } else {
      std::string details, comments;
      for (size_t i = 0; i < it->second.size(); ++i) {
        const RuleEvidence& r = *it->second[i];
        v.status = i == 0 ? ChecklistStatusOf(r) : WorseStatus(v.status, ChecklistStatusOf(r));
        std::string heading = fmt::format("{}SCAP Security Guide rule {} ({}):\n", i == 0 ? "" : "\n",
                                          ShortName(r.rule.rule_id), CklStatusName(ChecklistStatusOf(r)));
        details += heading + FindingDetails(r);
        comments += heading + Comments(r);
      }
      v.finding_details = CutText(details, kMaxChecklistText);
      v.comments = CutText(comments, kMaxChecklistText);
    }
    stig.vulns.push_back(std::move(v));
  }
  return stig;
}

}  // namespace

Checklist EvidenceChecklist(const EvidenceReport& report, const stig::DisaStig* disa) {
  Checklist c;
  c.asset = Asset(report.batch);
  if (!disa) {
    c.asset.target_comment +=
        ". Vuln_Num and Rule_ID are SCAP Security Guide's rule ids, not DISA's: give temperd DISA's STIG "
        "(disa_stigs: in temperd.yaml, or temper export --disa-stig FILE) for a checklist that merges with DISA's";
    c.stigs.push_back(SsgStig(report));
    return c;
  }
  std::vector<std::string> unmatched;
  c.stigs.push_back(DisaChecklistStig(report, *disa, unmatched));
  c.asset.target_comment += fmt::format(". DISA STIG {} {} ({})", disa->benchmark_id, disa->RevisionName(),
                                        std::filesystem::path(disa->source).filename().string());
  if (!unmatched.empty()) {
    c.asset.target_comment +=
        fmt::format("; {} rule{} of the batch implement{} no requirement of it: {}", unmatched.size(),
                    unmatched.size() == 1 ? "" : "s", unmatched.size() == 1 ? "s" : "", Joined(unmatched, ", "));
  }
  return c;
}

}  // namespace temper::evidence
