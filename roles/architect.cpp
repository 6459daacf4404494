#include "roles/architect.h"

#include <fmt/format.h>

#include "common/closest_match.h"
#include "roles/tool_call_parser.h"

namespace temper {

using nlohmann::json;

Result<json> AnswerObject(const ChatResponse& response) {
  TEMPER_ASSIGN_OR_RETURN(std::string text, ExtractJsonObject(response.text));
  return json::parse(text);  // ExtractJsonObject only returns text that parses
}

Result<std::string> RequiredString(const json& answer, const char* key) {
  auto it = answer.find(key);
  if (it == answer.end()) return Status::InvalidArgument(fmt::format("the answer lacks the field \"{}\"", key));
  if (!it->is_string()) return Status::InvalidArgument(fmt::format("the field \"{}\" must be a string", key));
  std::string v = it->get<std::string>();
  const size_t first = v.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return Status::InvalidArgument(fmt::format("the field \"{}\" is empty", key));
  // A small model copies the prompt's example answer, placeholders and all ("<plan for the
  // Worker>", "<one sentence, at most 200 characters, for memory>"): found on the real Gemma 3
  // 270M, whose Reflector stored such lessons in the episodic memory. One bracketed placeholder
  // says nothing, so it is refused like an empty field.
  const size_t last = v.find_last_not_of(" \t\r\n");
  if (v[first] == '<' && v[last] == '>' && v.find('>', first) == last) {
    return Status::InvalidArgument(
        fmt::format("the field \"{}\" is {}, a placeholder copied from the prompt: write what it stands for", key,
                    v.substr(first, last - first + 1)));
  }
  return v;
}

Result<RolePrompt> AssembleRolePrompt(const RoleConfig& config, const TokenEstimator& estimator,
                                      const std::string& system, std::vector<PromptSection> sections) {
  const size_t window =
      config.context_tokens > config.max_output_tokens ? config.context_tokens - config.max_output_tokens : 0;
  const size_t system_tokens = estimator.Count(system) + estimator.Count(kPromptFraming);
  if (system_tokens >= window) {
    return Status::ResourceExhausted(
        fmt::format("the {} instructions alone need {} tokens but the prompt budget is {} (context_tokens {} − "
                    "max_output_tokens {})",
                    config.role, system_tokens, window, config.context_tokens, config.max_output_tokens));
  }
  auto assembled = AssemblePrompt(sections, window - system_tokens, estimator);
  if (!assembled.ok()) return assembled.status().WithContext(fmt::format("building the {} prompt", config.role));
  RolePrompt p;
  p.request.role_name = config.role;
  p.request.sampling = config.sampling;
  p.request.max_tokens = config.max_output_tokens;
  p.request.messages = {{ChatRole::kSystem, system}, {ChatRole::kUser, assembled->text}};
  p.trimmed = std::move(assembled->trimmed);
  return p;
}

Result<RolePrompt> Architect::Assemble(const std::string& system, std::vector<PromptSection> sections) const {
  return AssembleRolePrompt(config_, estimator_, system, std::move(sections));
}

nlohmann::ordered_json PickSchema(const std::vector<RuleInfo>& candidates) {
  nlohmann::ordered_json ids = nlohmann::ordered_json::array();
  for (const RuleInfo& r : candidates) ids.push_back(r.id);
  auto answer = [&](const char* decision, const char* text) {
    return nlohmann::ordered_json{{"type", "object"},
                                  {"properties",
                                   {{"decision", {{"const", decision}}},
                                    {"rule_id", {{"enum", ids}}},
                                    {text, {{"type", "string"}, {"minLength", 1}}}}},
                                  {"required", {"decision", "rule_id", text}}};
  };
  return {{"anyOf", {answer("attempt", "approach"), answer("skip", "reason")}}};
}

nlohmann::ordered_json ReengageSchema() {
  return nlohmann::ordered_json::parse(R"({"anyOf": [
    {"type": "object",
     "properties": {"verdict": {"const": "PIVOT"}, "reasoning": {"type": "string", "minLength": 1},
                    "plan": {"type": "string", "minLength": 1}},
     "required": ["verdict", "reasoning", "plan"]},
    {"type": "object",
     "properties": {"verdict": {"enum": ["CONTINUE", "ESCALATE"]}, "reasoning": {"type": "string", "minLength": 1},
                    "plan": {"type": "string"}},
     "required": ["verdict", "reasoning"]}]})");
}

namespace {

// One line a candidate, so the pick prompt stays small whatever the batch: the Architect orders the
// work and names an approach; the Worker's prompt carries the rule's full details. Everything that
// changes between picks (the batch's progress) comes last, after what a server can keep cached.
std::string CandidateLine(const RuleInfo& r, const std::map<std::string, int>& attempts_so_far) {
  std::string line = fmt::format("- {} ({}): {}", r.id, r.severity.empty() ? "unknown" : r.severity, r.title);
  if (!r.risk.empty()) line += " | risk: " + r.risk;
  if (r.fix_text.empty()) line += " | no reference fix";
  if (auto it = attempts_so_far.find(r.id); it != attempts_so_far.end() && it->second > 0)
    line += fmt::format(" | {} earlier attempt{}", it->second, it->second == 1 ? "" : "s");
  return line + "\n";
}

}  // namespace

Result<RolePrompt> Architect::BuildPick(const ArchitectInput& input) const {
  if (input.candidates.empty()) return Status::InvalidArgument("the Architect needs at least one candidate rule");
  TEMPER_ASSIGN_OR_RETURN(std::string system, prompts_.Render("architect"));
  std::vector<PromptSection> sections;
  std::string ids = "## Candidate rules\n";
  for (const RuleInfo& r : input.candidates) ids += CandidateLine(r, input.attempts_so_far);
  sections.push_back({"candidate list", ids, 0, true});
  for (PromptSection& s : LessonSections(input.lessons)) sections.push_back(std::move(s));
  for (PromptSection& s : AttemptSections(input.prior_attempts, 400)) sections.push_back(std::move(s));
  sections.push_back(BatchSection(input.batch, 950));
  TEMPER_ASSIGN_OR_RETURN(RolePrompt prompt, Assemble(system, std::move(sections)));
  prompt.request.answer_schema = PickSchema(input.candidates);
  return prompt;
}

Result<ArchitectPick> Architect::ParsePick(const ChatResponse& response, const ArchitectInput& input) const {
  TEMPER_ASSIGN_OR_RETURN(json answer, AnswerObject(response));
  TEMPER_ASSIGN_OR_RETURN(std::string decision, RequiredString(answer, "decision"));
  TEMPER_ASSIGN_OR_RETURN(std::string rule_id, RequiredString(answer, "rule_id"));
  std::vector<std::string> ids;
  bool known = false;
  for (const RuleInfo& r : input.candidates) {
    ids.push_back(r.id);
    known = known || r.id == rule_id;
  }
  if (!known) {
    return Status::InvalidArgument(fmt::format("\"rule_id\" '{}' is not a candidate{}; the candidates are {}", rule_id,
                                               DidYouMean(rule_id, ids), fmt::join(ids, ", ")));
  }
  ArchitectPick pick;
  pick.rule_id = rule_id;
  if (decision == "attempt") {
    pick.kind = ArchitectPick::Kind::kAttempt;
    TEMPER_ASSIGN_OR_RETURN(pick.approach, RequiredString(answer, "approach"));
  } else if (decision == "skip") {
    pick.kind = ArchitectPick::Kind::kSkip;
    TEMPER_ASSIGN_OR_RETURN(pick.reason, RequiredString(answer, "reason"));
  } else {
    return Status::InvalidArgument(fmt::format("\"decision\" must be \"attempt\" or \"skip\", not \"{}\"", decision));
  }
  return pick;
}

Result<RolePrompt> Architect::BuildReengage(const RuleInfo& rule, const std::string& current_plan,
                                            const std::vector<PastAttempt>& attempts,
                                            const std::vector<Lesson>& lessons) const {
  TEMPER_ASSIGN_OR_RETURN(std::string system, prompts_.Render("architect_reengage"));
  std::vector<PromptSection> sections = RuleSections(rule);
  sections.push_back({"current plan", "## Current plan\n" + current_plan, 0, true});
  for (PromptSection& s : AttemptSections(attempts, 880)) sections.push_back(std::move(s));
  for (PromptSection& s : LessonSections(lessons)) sections.push_back(std::move(s));
  TEMPER_ASSIGN_OR_RETURN(RolePrompt prompt, Assemble(system, std::move(sections)));
  prompt.request.answer_schema = ReengageSchema();
  return prompt;
}

Result<ReengageDecision> Architect::ParseReengage(const ChatResponse& response) const {
  TEMPER_ASSIGN_OR_RETURN(json answer, AnswerObject(response));
  TEMPER_ASSIGN_OR_RETURN(std::string verdict, RequiredString(answer, "verdict"));
  ReengageDecision d;
  TEMPER_ASSIGN_OR_RETURN(d.reasoning, RequiredString(answer, "reasoning"));
  std::string v;
  for (char c : verdict) v.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  if (v == "CONTINUE") {
    d.verdict = ReengageVerdict::kContinue;
  } else if (v == "PIVOT") {
    d.verdict = ReengageVerdict::kPivot;
    TEMPER_ASSIGN_OR_RETURN(d.plan, RequiredString(answer, "plan"));
  } else if (v == "ESCALATE") {
    d.verdict = ReengageVerdict::kEscalate;
  } else {
    return Status::InvalidArgument(fmt::format("\"verdict\" must be CONTINUE, PIVOT or ESCALATE, not \"{}\"{}", verdict,
                                               DidYouMean(v, {"CONTINUE", "PIVOT", "ESCALATE"})));
  }
  if (d.verdict != ReengageVerdict::kPivot) {
    if (auto p = answer.find("plan"); p != answer.end() && p->is_string()) d.plan = p->get<std::string>();
  }
  return d;
}

}  // namespace temper
