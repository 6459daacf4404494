#include "scripted_model/scripted_answers.h"

#include <algorithm>

#include <fmt/format.h>

namespace temper::scripted {

// Keys in the order a model writes them ("decision" before "approach").
using json = nlohmann::ordered_json;

namespace {

// At most `max` bytes of `s`, cut at a UTF-8 character boundary.
std::string Cut(std::string_view s, size_t max) {
  if (s.size() <= max) return std::string(s);
  size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return std::string(s.substr(0, n));
}

// The first line of `text` that is not blank (and, with skip_comments, not a shell comment).
std::string FirstMeaningfulLine(std::string_view text, bool skip_comments) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    std::string_view line = text.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos);
    size_t first = line.find_first_not_of(" \t\r");
    if (first != std::string_view::npos && !(skip_comments && line[first] == '#')) {
      std::string_view trimmed = line.substr(first);
      while (!trimmed.empty() && (trimmed.back() == ' ' || trimmed.back() == '\r')) trimmed.remove_suffix(1);
      return std::string(trimmed);
    }
    if (end == std::string_view::npos) break;
    pos = end + 1;
  }
  return "";
}

bool FixIsUsable(const PromptRule& rule) { return !rule.fix_text.empty() && !rule.fix_truncated; }

std::string JsonText(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

ScriptedAnswer ObjectAnswer(const json& object) { return {JsonText(object), {}, "stop"}; }

ScriptedAnswer ArchitectPick(const ReadRequest& r, const ModelScript& script) {
  const PromptRule& c = r.candidates.front();
  const std::string short_name = ShortRuleName(c.id);
  if (script.For(c.id).skip) {
    return ObjectAnswer({{"decision", "skip"},
                         {"rule_id", c.id},
                         {"reason", fmt::format("{} is left to a human: its fix needs decisions the loop must not "
                                                "make on its own (the model script marks it skip).",
                                                short_name)}});
  }
  // The candidate line says only whether SSG ships a fix; the Worker, whose prompt holds it,
  // decides whether it can be run as is.
  const std::string approach =
      c.no_reference_fix
          ? fmt::format("{} ({}) has no reference fix: change nothing and finish saying what a human must decide.",
                        short_name, c.title)
          : fmt::format(
                "Apply the SCAP Security Guide reference fix for {} ({}) as written, check its exit status, "
                "then finish.",
                short_name, c.title);
  return ObjectAnswer({{"decision", "attempt"}, {"rule_id", c.id}, {"approach", approach}});
}

ScriptedAnswer ArchitectReengage(const ReadRequest& r, const ModelScript& script) {
  const RuleScript rs = script.For(r.rule.id);
  const std::string short_name = ShortRuleName(r.rule.id);
  Reengage verdict = script.reengage;
  if (rs.reengage) verdict = *rs.reengage;
  else if (rs.unfixable || !FixIsUsable(r.rule)) verdict = Reengage::kEscalate;
  const std::string last = r.last_verdict.empty() ? "fail" : r.last_verdict;
  json answer = {{"verdict", std::string(ReengageName(verdict))}};
  switch (verdict) {
    case Reengage::kEscalate:
      answer["reasoning"] =
          FixIsUsable(r.rule)
              ? fmt::format(
                    "{} attempts at {} have failed (last verdict: {}) and they do not converge on a "
                    "passing state; a human should take over.",
                    r.attempt, short_name, last)
              : fmt::format("The SCAP Security Guide ships no usable fix text for {}; a human must decide the fix.",
                            short_name);
      break;
    case Reengage::kPivot:
      answer["reasoning"] = fmt::format(
          "{} attempts at {} failed (last verdict: {}); the Worker improvised instead of "
          "applying the fix as written.",
          r.attempt, short_name, last);
      answer["plan"] = fmt::format(
          "Apply the SCAP Security Guide fix script exactly: write it to {}, run it with "
          "bash, and change nothing else.",
          FixScriptPath(r.rule.id));
      break;
    case Reengage::kContinue:
      answer["reasoning"] = fmt::format(
          "{} attempts at {} failed (last verdict: {}), but applying the SCAP Security "
          "Guide fix is the right plan; the failures were execution slips.",
          r.attempt, short_name, last);
      break;
  }
  return ObjectAnswer(answer);
}

ScriptedAnswer Reflect(const ReadRequest& r) {
  const std::string verdict = r.last_verdict.empty() ? "fail" : r.last_verdict;
  std::string tried = FirstMeaningfulLine(r.actions, false);
  if (tried.empty()) tried = FirstMeaningfulLine(r.approach, false);
  if (tried.empty()) tried = "an attempt with no recorded actions";
  tried = Cut(tried, 200);
  const std::string quote = Cut(FirstMeaningfulLine(r.evidence, false), 160);
  const std::string why = quote.empty() ? fmt::format("The verdict was {} and the evaluator gave no evidence.", verdict)
                                        : fmt::format("The evaluator reported \"{}\" (verdict {}).", quote, verdict);
  const std::string marker = LessonMarker(r.rule.id, r.attempt);
  const std::string lesson =
      Cut(fmt::format("{}: attempt {} ended {}; apply the SSG fix script exactly and change nothing else.", marker,
                      r.attempt, verdict),
          200);
  return ObjectAnswer({{"tried", tried},
                       {"why_failed", why},
                       {"next", fmt::format("Apply the SCAP Security Guide fix script exactly as given (write it to {} "
                                            "and run it with bash), change nothing else, and keep the health checks "
                                            "passing.",
                                            FixScriptPath(r.rule.id))},
                       {"never", json::array({tried})},
                       {"lesson", lesson}});
}

// The Worker's tool that runs the rule's own SSG fix (roles/worker_tool_names.h).
constexpr const char* kApplyReferenceFix = "apply_reference_fix";

// One Worker turn: a tool call, and the sentence a model would say before it.
struct Step {
  std::string name;
  json arguments;
  std::string intent;
};

std::string RunScriptCommand(const std::string& path) {
  return fmt::format("bash {0}; status=$?; rm -f {0}; exit $status", path);
}

// The result's first line ("exit status 0"), or a note that there was none.
std::string ResultLine(const ReadRequest& r, size_t call_index) {
  if (call_index >= r.calls.size() || !r.calls[call_index].answered) return "no result was shown";
  return Cut(FirstMeaningfulLine(r.calls[call_index].result, false), 200);
}

std::vector<Step> WorkerPlan(const ReadRequest& r, const ModelScript& script) {
  const std::string& id = r.rule.id;
  const std::string short_name = ShortRuleName(id);
  // The tool runs the rule's whole fix from the content, so a fix the prompt budget cut short can
  // still be run by name; only a model that must retype it needs the whole text in its prompt.
  const bool by_name = std::find(r.tools.begin(), r.tools.end(), kApplyReferenceFix) != r.tools.end();
  if (!by_name && !FixIsUsable(r.rule)) {
    const std::string why = r.rule.fix_text.empty()
                                ? "the prompt has no SCAP Security Guide fix text"
                                : "the SCAP Security Guide fix text was cut short by the prompt budget";
    return {{"finish",
             {{"summary", fmt::format("No fix applied to {}: {}, so I changed nothing. A human has to decide how to "
                                      "fix this rule.",
                                      short_name, why)}},
             "I cannot find a fix I can run."}};
  }
  const AttemptKind kind = script.KindOf(id, r.attempt);
  if (kind == AttemptKind::kWrong) {
    const std::string note = WrongNotePath(id);
    return {
        {"run_command",
         {{"command", fmt::format("echo '# {}: attempt {} leaves the checked setting unchanged' >> {}", short_name,
                                  r.attempt, note)}},
         "I will record the change I intend first."},
        {"finish",
         {{"summary", fmt::format("Attempt {} on {}: wrote a note to {} instead of applying the fix (a deliberately "
                                  "wrong attempt by the scripted model); nothing the rule checks was changed.",
                                  r.attempt, short_name, note)}},
         "Done."}};
  }
  // The fix text is what this model would type: where the Worker offers the rule's reference fix
  // by name, it calls that instead of retyping it.
  std::vector<Step> plan;
  std::string summary;
  if (by_name) {
    plan = {{kApplyReferenceFix, json::object(), "The SCAP Security Guide fix fits this target; I run it as it is."}};
    summary = fmt::format("Applied the SCAP Security Guide fix for {} with {} ({}).", short_name, kApplyReferenceFix,
                          ResultLine(r, 0));
  } else {
    const std::string path = FixScriptPath(id);
    plan = {{"write_file",
             {{"path", path}, {"content", r.rule.fix_text + "\n"}},
             fmt::format("I will write the SCAP Security Guide fix script to {}.", path)},
            {"run_command", {{"command", RunScriptCommand(path)}}, "Now I run the fix script."}};
    summary = fmt::format("Applied the SCAP Security Guide fix for {}: wrote it to {} and ran it with bash ({}).",
                          short_name, path, ResultLine(r, 1));
  }
  if (kind == AttemptKind::kFixAndRegress) {
    const std::string regress = script.RegressCommand(id);
    plan.push_back({"run_command", {{"command", regress}}, "I also adjust the login environment."});
    summary += fmt::format(" Also ran `{}` (a deliberate regression by the scripted model).", regress);
  }
  plan.push_back({"finish", {{"summary", summary}}, "The fix is applied."});
  return plan;
}

Result<ScriptedAnswer> Worker(const ReadRequest& r, const ModelScript& script) {
  Step step;
  if (!r.calls.empty() && r.calls.back().result.find("refused by policy") != std::string::npos) {
    step = {"finish",
            {{"summary", fmt::format("Stopped: the policy refused my {} call: {}", r.calls.back().name,
                                     Cut(FirstMeaningfulLine(r.calls.back().result, false), 300))}},
            "The policy refused that; I stop here."};
  } else {
    std::vector<Step> plan = WorkerPlan(r, script);
    step = std::move(plan[std::min(r.calls.size(), plan.size() - 1)]);
  }
  if (!r.tools.empty() && std::find(r.tools.begin(), r.tools.end(), step.name) == r.tools.end()) {
    return Status::InvalidArgument(
        fmt::format("the Worker request offers no tool '{}' (it offers {})", step.name, fmt::join(r.tools, ", ")));
  }
  ScriptedAnswer answer;
  const std::string id = fmt::format("call-{}-{}", r.attempt, r.calls.size() + 1);
  if (script.tool_calls == ToolCallStyle::kText) {
    answer.content = fmt::format("{}\n```json\n{}\n```", step.intent,
                                 JsonText({{"name", step.name}, {"arguments", step.arguments}}));
    answer.finish_reason = "stop";
  } else {
    answer.tool_calls.push_back({id, step.name, std::move(step.arguments)});
    answer.finish_reason = "tool_calls";
  }
  return answer;
}

}  // namespace

std::string FixScriptPath(std::string_view rule_id) {
  return fmt::format("/root/temper-fix-{}.sh", ShortRuleName(rule_id));
}

std::string WrongNotePath(std::string_view rule_id) {
  return fmt::format("/root/temper-wrong-{}.txt", ShortRuleName(rule_id));
}

std::string LessonMarker(std::string_view rule_id, int attempt) {
  return fmt::format("LESSON-{}-{}", ShortRuleName(rule_id), attempt);
}

Result<ScriptedAnswer> Answer(const ReadRequest& request, const ModelScript& script) {
  switch (request.role) {
    case ScriptedRole::kArchitectPick:
      return ArchitectPick(request, script);
    case ScriptedRole::kArchitectReengage:
      return ArchitectReengage(request, script);
    case ScriptedRole::kWorker:
      return Worker(request, script);
    case ScriptedRole::kReflector:
      return Reflect(request);
  }
  return Status::Internal("unknown scripted role");
}

}  // namespace temper::scripted
