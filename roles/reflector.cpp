#include "roles/reflector.h"

#include <algorithm>

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
  // Required fields are non-blank (minLength), the lesson within its length: what Parse checks.
  nlohmann::ordered_json schema = nlohmann::ordered_json::parse(R"({"type": "object",
    "properties": {"tried": {"type": "string", "minLength": 1}, "why_failed": {"type": "string", "minLength": 1},
                   "next": {"type": "string", "minLength": 1},
                   "never": {"type": "array", "items": {"type": "string"}},
                   "lesson": {"type": "string", "minLength": 1}},
    "required": ["tried", "why_failed", "next", "lesson"]})");
  schema["properties"]["lesson"]["maxLength"] = Reflector::kMaxLessonChars;
  return schema;
}

Result<Reflection> Reflector::Parse(const ChatResponse& response) const {
  TEMPER_ASSIGN_OR_RETURN(json answer, AnswerObject(response));
  Reflection r;
  TEMPER_ASSIGN_OR_RETURN(r.tried, RequiredString(answer, "tried"));
  TEMPER_ASSIGN_OR_RETURN(r.why_failed, RequiredString(answer, "why_failed"));
  TEMPER_ASSIGN_OR_RETURN(r.next, RequiredString(answer, "next"));
  TEMPER_ASSIGN_OR_RETURN(r.lesson, RequiredString(answer, "lesson"));
  // Characters, as the schema's maxLength counts them (UTF-8 continuation bytes are not counted).
  const size_t lesson_chars = static_cast<size_t>(std::count_if(
      r.lesson.begin(), r.lesson.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xc0) != 0x80; }));
  if (lesson_chars > kMaxLessonChars) {
    return Status::InvalidArgument(
        fmt::format("\"lesson\" has {} characters; keep it to at most {}", lesson_chars, kMaxLessonChars));
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
