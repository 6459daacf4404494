#include "orchestrator/evidence/export_html.h"

#include <cctype>

#include <fmt/format.h>

#include "orchestrator/evidence/evidence_checklist.h"
#include "orchestrator/evidence/markup_escape.h"

namespace temper::evidence {
namespace {

constexpr const char* kStyle = R"(
body { font-family: sans-serif; margin: 2em; color: #111; line-height: 1.4; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.3em; border-bottom: 1px solid #999; margin-top: 2em; }
h3 { font-size: 1.1em; margin-bottom: 0.3em; }
table { border-collapse: collapse; width: 100%; margin: 0.5em 0; }
th, td { border: 1px solid #bbb; padding: 0.25em 0.5em; text-align: left; vertical-align: top; font-size: 0.9em; }
th { background: #eee; }
pre { background: #f6f6f6; border: 1px solid #ddd; padding: 0.5em; white-space: pre-wrap; word-wrap: break-word;
      font-size: 0.8em; }
.score { font-size: 1.2em; }
.s-NotAFinding { background: #dfd; } .s-Open { background: #fdd; } .s-Not_Applicable { background: #eee; }
.s-Not_Reviewed { background: #ffd; }
.rule { border: 1px solid #ccc; padding: 0.5em 1em; margin: 1em 0; }
.meta { color: #444; font-size: 0.9em; }
@media print {
  body { margin: 0; }
  .rule { page-break-inside: avoid; }
  h2 { page-break-before: always; }
  h2.first { page-break-before: avoid; }
}
)";

std::string E(std::string_view s) { return MarkupEscape(s); }

std::string ScoreText(const Score& s) {
  std::optional<double> p = s.percent();
  return fmt::format("{} ({} pass, {} fail, {} other)", p ? fmt::format("{:.1f}%", *p) : std::string("n/a"), s.pass,
                     s.fail, s.other);
}

std::string Anchor(const std::string& rule_id) {
  std::string out = "r-";
  for (char c : rule_id) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
  return out;
}

std::string ShortName(const std::string& id) {
  size_t at = id.find(stig::kRulePrefix);
  return at == std::string::npos ? id : id.substr(at + stig::kRulePrefix.size());
}

void Pre(std::string& out, std::string_view text) {
  if (!text.empty()) out += "<pre>" + E(text) + "</pre>\n";
}

void Changes(std::string& out, const AttemptEvidence& a) {
  out += fmt::format("<p>Changes: {}</p>\n", E(a.changes.Summary()));
  if (!a.changes_error.empty())
    out += fmt::format("<p>The stored change set is unreadable: {}</p>\n", E(a.changes_error));
  if (a.changes.files.empty()) return;
  out += "<table><tr><th>path</th><th>change</th><th>before</th><th>after</th></tr>\n";
  auto state = [](const std::optional<stig::FileState>& s) {
    if (!s) return std::string("—");
    std::string text =
        fmt::format("{} {:04o} {}:{} {} bytes", stig::FileTypeName(s->type), s->mode, s->uid, s->gid, s->size);
    if (s->type == stig::FileType::kSymlink) text += " → " + s->link;
    return text;
  };
  for (const stig::FileChange& f : a.changes.files) {
    out += fmt::format("<tr><td>{}</td><td>{}{}</td><td>{}</td><td>{}</td></tr>\n", E(f.path),
                       stig::FileChangeKindName(f.change), f.binary ? " (binary)" : "", E(state(f.before)),
                       E(state(f.after)));
  }
  out += "</table>\n";
  for (const stig::FileChange& f : a.changes.files) {
    if (!f.diff.empty()) Pre(out, f.diff);
    if (!f.diff_skipped.empty()) out += fmt::format("<p>{}: no diff ({})</p>\n", E(f.path), E(f.diff_skipped));
  }
}

void Rule(std::string& out, const RuleEvidence& r) {
  const stig::RuleInfo* info = r.info;
  ChecklistStatus status = ChecklistStatusOf(r);
  out += fmt::format("<div class=\"rule\" id=\"{}\">\n<h3>{}</h3>\n", Anchor(r.rule.rule_id),
                     E(info ? info->title : r.rule.rule_id));
  out += fmt::format("<p class=\"meta\">{} · severity {} · DISA STIG {} · CCI {} · SRG {}</p>\n", E(r.rule.rule_id),
                     E(info ? info->severity : "unknown"),
                     E(info ? fmt::format("{}", fmt::join(info->stig_ids, ", ")) : ""),
                     E(info ? fmt::format("{}", fmt::join(info->ccis, ", ")) : ""),
                     E(info ? fmt::format("{}", fmt::join(info->srgs, ", ")) : ""));
  out += fmt::format(
      "<p>State: <b>{}</b>{} · OpenSCAP before: <b>{}</b> · after: <b>{}</b> · checklist: "
      "<span class=\"s-{}\">{}</span></p>\n",
      RuleStateName(r.rule.state), r.rule.detail.empty() ? "" : " — " + E(r.rule.detail),
      E(r.rule.before_verdict.empty() ? "—" : r.rule.before_verdict),
      E(r.rule.after_verdict.empty() ? "—" : r.rule.after_verdict), CklStatusName(status), CklStatusName(status));
  if (r.waiver) {
    out += fmt::format("<p>Waived: {} (risk accepted by {}{})</p>\n", E(r.waiver->reason), E(r.waiver->owner),
                       r.waiver->expires_at ? ", expires " + IsoTime(*r.waiver->expires_at) : "");
  }
  if (r.rule.state == RuleState::kEscalated && !r.attempts.empty() && !r.attempts.back().attempt.reflection.empty()) {
    out += "<p>Why temper gave up — the last attempt's reflection:</p>\n";
    Pre(out, r.attempts.back().attempt.reflection);
  }
  if (r.before && !r.before->definitions.empty()) {
    out += "<p>OpenSCAP's evidence before the batch:</p>\n";
    Pre(out, r.before->Text());
  }
  if (r.after && !r.after->definitions.empty()) {
    out += "<p>OpenSCAP's evidence after the batch:</p>\n";
    Pre(out, r.after->Text());
  }
  for (const AttemptEvidence& a : r.attempts) {
    out += fmt::format("<h4>Attempt {}: {} (OpenSCAP {})</h4>\n<p>Approach: {}</p>\n", a.attempt.number,
                       E(AttemptOutcomeName(a.attempt.outcome)), E(a.attempt.verdict), E(a.attempt.approach));
    if (!a.attempt.commands.empty()) {
      out += "<p>Commands:</p>\n";
      Pre(out, fmt::format("{}", fmt::join(a.attempt.commands, "\n")));
    }
    Changes(out, a);
    if (!a.attempt.evidence.empty() && a.attempt.outcome != AttemptOutcome::kKept) {
      out += "<p>Why it was rejected:</p>\n";
      Pre(out, a.attempt.evidence);
    }
    if (!a.attempt.reflection.empty()) {
      out += "<p>Reflection:</p>\n";
      Pre(out, a.attempt.reflection);
    }
  }
  if (info && !info->description.empty()) {
    out += "<p>Description:</p>\n";
    Pre(out, info->description);
  }
  out += "</div>\n";
}

}  // namespace

std::string ExportHtml(const EvidenceReport& report) {
  const BatchRecord& b = report.batch;
  std::string title = fmt::format("temper evidence: batch {} on {}", b.id, b.target);
  std::string out = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  out += fmt::format("<title>{}</title>\n<style>{}</style>\n</head>\n<body>\n", E(title), kStyle);
  out += fmt::format("<h1>{}</h1>\n", E(title));
  out += fmt::format(
      "<p class=\"meta\">Batch {}{} · profile {} ({}) · benchmark {} · datastream {} · state {} · created {} · "
      "updated {} · report generated {}</p>\n",
      b.id, b.name.empty() ? "" : " \"" + E(b.name) + "\"", E(report.profile.title), E(report.profile.id),
      E(report.benchmark_id), E(b.datastream), BatchStateName(b.state), IsoTime(b.created_at), IsoTime(b.updated_at),
      IsoTime(report.generated_at));
  if (!b.error.empty()) out += fmt::format("<p>The batch failed: {}</p>\n", E(b.error));
  if (b.options.plan_only) {
    out +=
        "<p><b>Plan only:</b> every change was reverted; the attempts show what temper would change, and the "
        "target still stands where it stood before.</p>\n";
  }
  out += fmt::format("<p class=\"score\">Score before: <b>{}</b> · after: <b>{}</b></p>\n", ScoreText(report.before),
                     ScoreText(report.after));
  out +=
      "<p class=\"meta\">Score: rules OpenSCAP passed out of those it passed or failed; rules not applicable, "
      "not checked or in error count as other. Waived and manual rules are never counted as passing.</p>\n";
  out +=
      "<h2 class=\"first\">Rules</h2>\n<table>\n<tr><th>rule</th><th>severity</th><th>DISA STIG</th><th>state</th>"
      "<th>before</th><th>after</th><th>attempts</th><th>checklist</th></tr>\n";
  for (const RuleEvidence& r : report.rules) {
    std::string_view status = CklStatusName(ChecklistStatusOf(r));
    out += fmt::format(
        "<tr><td><a href=\"#{}\">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
        "<td class=\"s-{}\">{}</td></tr>\n",
        Anchor(r.rule.rule_id), E(ShortName(r.rule.rule_id)), E(r.info ? r.info->severity : "unknown"),
        E(r.info ? fmt::format("{}", fmt::join(r.info->stig_ids, ", ")) : ""), RuleStateName(r.rule.state),
        E(r.rule.before_verdict), E(r.rule.after_verdict), r.attempts.size(), status, status);
  }
  out += "</table>\n<h2>Evidence per rule</h2>\n";
  for (const RuleEvidence& r : report.rules) Rule(out, r);
  out += fmt::format("<p class=\"meta\">OpenSCAP's own results: {}{}</p>\n",
                     report.before_arf.empty() ? "" : "before " + E(report.before_arf) + " ",
                     report.after_arf.empty() ? "" : "after " + E(report.after_arf));
  out += "</body>\n</html>\n";
  return out;
}

}  // namespace temper::evidence
