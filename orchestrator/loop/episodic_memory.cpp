#include "orchestrator/loop/episodic_memory.h"

#include <algorithm>

#include <fmt/format.h>

namespace temper {

LessonScope EpisodicMemory::ScopeFor(const MemoryTarget& target) {
  if (target.target_class == kSshTargetClass) return {{kSshTargetClass}, target.name};
  if (target.target_class == kRootfsTargetClass) return {{kRootfsTargetClass, kUnknownTargetClass}, std::nullopt};
  // A class this rule does not know recalls nothing but its own target's lessons of that class.
  return {{target.target_class}, target.name};
}

Result<RecalledMemory> EpisodicMemory::Recall(const stig::RuleInfo& rule, int64_t current_batch) {
  RecalledMemory out;
  const LessonScope scope = ScopeFor(target_);
  auto add = [&out](const LessonRecord& l, bool same_rule) {
    out.lessons.push_back({l.rule_id, l.text, std::clamp(l.utility, 0.0, 1.0), same_rule, LessonProvenance(l)});
    out.lesson_ids.push_back(l.id);
  };
  TEMPER_ASSIGN_OR_RETURN(std::vector<LessonRecord> own, store_.RuleLessons(rule.id, scope, kSameRuleLessons));
  for (const LessonRecord& l : own) add(l, true);
  TEMPER_ASSIGN_OR_RETURN(std::vector<LessonRecord> group,
                          store_.GroupLessons(rule.group_id, rule.id, scope, kGroupLessons));
  for (const LessonRecord& l : group) add(l, false);
  // This batch's attempts are the caller's (it holds them as they happen); memory adds the rest.
  TEMPER_ASSIGN_OR_RETURN(std::vector<AttemptRecord> attempts,
                          store_.RuleAttemptsOnTarget(rule.id, target_.name, kEarlierAttempts * 4));
  for (const AttemptRecord& a : attempts) {
    if (a.batch_id == current_batch) continue;
    if (out.earlier_attempts.size() == kEarlierAttempts) break;
    out.earlier_attempts.push_back(ToPastAttempt(a));
  }
  std::reverse(out.earlier_attempts.begin(), out.earlier_attempts.end());
  return out;
}

LessonRecord EpisodicMemory::NewLesson(const stig::RuleInfo& rule, int64_t batch_id, std::string text,
                                       std::string learnt_by) const {
  return LessonRecord{.rule_id = rule.id,
                      .group_id = rule.group_id,
                      .batch_id = batch_id,
                      .text = std::move(text),
                      .utility = kInitialUtility,
                      .target_class = target_.target_class,
                      .target = target_.name,
                      .learnt_by = std::move(learnt_by)};
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
  std::vector<std::string> risk;
  if (!rule.fix_metadata.disruption.empty()) risk.push_back("disruption " + rule.fix_metadata.disruption);
  if (rule.fix_metadata.reboot) risk.push_back("needs a reboot");
  out.risk = fmt::format("{}", fmt::join(risk, ", "));
  for (const auto* refs : {&rule.stig_ids, &rule.ccis, &rule.srgs}) {
    out.references.insert(out.references.end(), refs->begin(), refs->end());
  }
  return out;
}

RuleInfo ToRoleRule(const stig::RuleInfo& rule, const stig::Content& content) {
  RuleInfo out = ToRoleRule(rule);
  const std::string& path = content.datastream_path();
  out.reference_fix_source = fmt::format("{}, benchmark {}", path.substr(path.find_last_of('/') + 1),
                                         content.benchmark_id().empty() ? "unnamed" : content.benchmark_id());
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
