#include "roles/reflector.h"

#include <fmt/format.h>

#include "roles/architect.h"

namespace temper {

using nlohmann::json;

Result<RolePrompt> Reflector::Build(const RuleInfo& rule, const PastAttempt& failed,
                                    const std::vector<PastAttempt>& earlier, const std::vector<Lesson>& lessons) const {
  TEMPER_ASSIGN_OR_RETURN(std::string system, prompts_.Render("reflector"));
  std::vector<PromptSection> sections = RuleSections(rule);
  // The failed attempt is what the lesson is about: its approach and verdict are required, its
  // actions and evidence may be truncated but outrank everything else.
  sections.push_back({"failed attempt",
                      fmt::format("## The failed attempt ({})\nApproach: {}\nVerdict: {}", failed.number,
                                  failed.approach, failed.verdict),
                      0, true});
  if (!failed.evidence.empty()) {
    sections.push_back({"evaluator evidence", "### Evaluator evidence\n" + failed.evidence, 990, false, true});
  }
  if (!failed.actions.empty()) {
    sections.push_back({"worker actions", "### What the Worker did\n" + failed.actions, 980, false, true});
  }
  for (PromptSection& s : AttemptSections(earlier, 700)) sections.push_back(std::move(s));
  for (PromptSection& s : LessonSections(lessons)) sections.push_back(std::move(s));
  TEMPER_ASSIGN_OR_RETURN(RolePrompt prompt, AssembleRolePrompt(config_, estimator_, system, std::move(sections)));
  prompt.request.answer_schema = ReflectionSchema();
  return prompt;
}

nlohmann::ordered_json ReflectionSchema() {
  return nlohmann::ordered_json::parse(R"({"type": "object",
    "properties": {"tried": {"type": "string"}, "why_failed": {"type": "string"}, "next": {"type": "string"},
                   "never": {"type": "array", "items": {"type": "string"}}, "lesson": {"type": "string"}},
    "required": ["tried", "why_failed", "next", "lesson"]})");
}

Result<Reflection> Reflector::Parse(const ChatResponse& response) const {
  TEMPER_ASSIGN_OR_RETURN(json answer, AnswerObject(response));
  Reflection r;
  TEMPER_ASSIGN_OR_RETURN(r.tried, RequiredString(answer, "tried"));
  TEMPER_ASSIGN_OR_RETURN(r.why_failed, RequiredString(answer, "why_failed"));
  TEMPER_ASSIGN_OR_RETURN(r.next, RequiredString(answer, "next"));
  TEMPER_ASSIGN_OR_RETURN(r.lesson, RequiredString(answer, "lesson"));
  if (r.lesson.size() > kMaxLessonChars) {
    return Status::InvalidArgument(
        fmt::format("\"lesson\" has {} characters; keep it to at most {}", r.lesson.size(), kMaxLessonChars));
  }
  if (auto n = answer.find("never"); n != answer.end() && !n->is_null()) {
    if (n->is_string()) {
      r.never.push_back(n->get<std::string>());
    } else if (n->is_array()) {
      for (const json& item : *n) {
        if (!item.is_string()) return Status::InvalidArgument("\"never\" must be a list of strings");
        r.never.push_back(item.get<std::string>());
      }
    } else {
      return Status::InvalidArgument("\"never\" must be a list of strings");
    }
  }
  return r;
}

}  // namespace temper
