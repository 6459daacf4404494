#include "roles/prompt_sections.h"

#include <algorithm>

#include <fmt/format.h>

namespace temper {

std::vector<PromptSection> RuleSections(const RuleInfo& r) {
  std::vector<PromptSection> out;
  out.push_back({fmt::format("rule {}", r.id),
                 fmt::format("## Rule\nid: {}\ntitle: {}\nseverity: {}", r.id, r.title,
                             r.severity.empty() ? "unknown" : r.severity),
                 0, true});
  std::string details;
  if (!r.description.empty()) details += "### Description\n" + r.description + "\n";
  if (!r.rationale.empty()) details += "### Rationale\n" + r.rationale + "\n";
  if (!r.check_text.empty()) details += "### Check\n" + r.check_text + "\n";
  if (!r.fix_text.empty()) details += "### Fix (SCAP Security Guide)\n" + r.fix_text + "\n";
  if (!r.references.empty()) details += fmt::format("### References\n{}\n", fmt::join(r.references, ", "));
  if (!details.empty()) out.push_back({fmt::format("rule details {}", r.id), details, 900, false, true});
  return out;
}

PromptSection BatchSection(const BatchProgress& b, int priority) {
  std::string text = fmt::format("## Batch\n{} rules: {} passed, {} failed, {} escalated, {} skipped, {} pending",
                                 b.total, b.passed, b.failed, b.escalated, b.skipped, b.pending);
  if (!b.recent_events.empty()) text += "\nRecent:\n- " + fmt::format("{}", fmt::join(b.recent_events, "\n- "));
  return {"batch state", text, priority, false, true};
}

std::vector<PromptSection> LessonSections(const std::vector<Lesson>& lessons) {
  std::vector<PromptSection> out;
  for (size_t i = 0; i < lessons.size(); ++i) {
    const Lesson& l = lessons[i];
    int priority = (l.same_rule ? 700 : 500) + static_cast<int>(std::clamp(l.utility, 0.0, 1.0) * 100);
    // The provenance goes before the text, so a lesson that reads like an order is seen for what
    // it is: a note written after an attempt on some target.
    const std::string provenance = l.provenance.empty() ? "" : "Provenance: " + l.provenance + "\n";
    out.push_back({fmt::format("lesson {} ({})", i + 1, l.rule_id),
                   fmt::format("## Lesson ({}, utility {:.2f})\n{}{}",
                               l.same_rule ? "this rule" : "similar rule " + l.rule_id, l.utility, provenance, l.text),
                   priority, false, false});
  }
  return out;
}

std::vector<PromptSection> AttemptSections(const std::vector<PastAttempt>& attempts, int top_priority) {
  std::vector<PromptSection> out;
  for (size_t i = 0; i < attempts.size(); ++i) {
    const PastAttempt& a = attempts[i];
    std::string text = fmt::format("## Attempt {} — {}\nApproach: {}\n", a.number, a.verdict, a.approach);
    if (!a.lesson.empty()) text += "Lesson: " + a.lesson + "\n";
    if (!a.actions.empty()) text += "Actions:\n" + a.actions + "\n";
    if (!a.evidence.empty()) text += "Evaluator evidence:\n" + a.evidence + "\n";
    int priority = top_priority - static_cast<int>(attempts.size() - 1 - i);
    out.push_back({fmt::format("attempt {}", a.number), text, priority, false, true});
  }
  return out;
}

}  // namespace temper
