#include "orchestrator/store/episodic_memory.h"

#include <algorithm>

#include <fmt/format.h>

namespace temper {

Result<RecalledMemory> EpisodicMemory::Recall(const stig::RuleInfo& rule, int64_t current_batch) {
  RecalledMemory out;
  TEMPER_ASSIGN_OR_RETURN(RuleMemoryRecord own, store_.GetRuleMemory(rule.id, kSameRuleLessons, kEarlierAttempts * 4));
  for (const LessonRecord& l : own.lessons) {
    out.lessons.push_back({l.rule_id, l.text, std::clamp(l.utility, 0.0, 1.0), true});
    out.lesson_ids.push_back(l.id);
  }
  TEMPER_ASSIGN_OR_RETURN(std::vector<LessonRecord> group, store_.GroupLessons(rule.group_id, rule.id, kGroupLessons));
  for (const LessonRecord& l : group) {
    out.lessons.push_back({l.rule_id, l.text, std::clamp(l.utility, 0.0, 1.0), false});
    out.lesson_ids.push_back(l.id);
  }
  // This batch's attempts are the caller's (it holds them as they happen); memory adds the rest.
  for (const AttemptRecord& a : own.attempts) {
    if (a.batch_id == current_batch) continue;
    if (out.earlier_attempts.size() == kEarlierAttempts) break;
    out.earlier_attempts.push_back(ToPastAttempt(a));
  }
  std::reverse(out.earlier_attempts.begin(), out.earlier_attempts.end());
  return out;
}

RuleInfo ToRoleRule(const stig::RuleInfo& rule) {
  RuleInfo out;
  out.id = rule.id;
  out.title = rule.title;
  out.severity = rule.severity;
  out.description = rule.description;
  out.rationale = rule.rationale;
  out.check_text = rule.check_summary;
  if (!rule.check_criteria.empty()) out.check_text += "\nOpenSCAP passes the rule when:\n" + rule.check_criteria;
  out.fix_text = rule.fix_bash;
  for (const auto* refs : {&rule.stig_ids, &rule.ccis, &rule.srgs}) {
    out.references.insert(out.references.end(), refs->begin(), refs->end());
  }
  return out;
}

PastAttempt ToPastAttempt(const AttemptRecord& a) {
  PastAttempt out;
  out.number = static_cast<int>(a.number);
  out.approach = a.approach;
  out.actions = fmt::format("{}", fmt::join(a.commands, "\n"));
  out.verdict = fmt::format("{} ({})", AttemptOutcomeName(a.outcome), a.verdict);
  out.evidence = a.evidence;
  out.lesson = a.reflection;
  return out;
}

}  // namespace temper
