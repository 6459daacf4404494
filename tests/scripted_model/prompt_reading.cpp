#include "scripted_model/prompt_reading.h"

#include <algorithm>
#include <charconv>
#include <initializer_list>

#include <fmt/format.h>

namespace temper::scripted {

using nlohmann::json;

namespace {

constexpr std::string_view kFixHeading = "### Fix (SCAP Security Guide)\n";
constexpr std::string_view kTruncationMarker = "[… truncated to fit the prompt budget";

Status Bad(std::string_view path, std::string_view problem) {
  return Status::InvalidArgument(fmt::format("{} {}", path, problem));
}

// A message's text: a string, null, or OpenAI content parts ({"type": "text", "text": ...}).
Result<std::string> ContentText(const json& message, const std::string& path) {
  auto it = message.find("content");
  if (it == message.end() || it->is_null()) return std::string();
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array()) return Bad(path + ".content", "is neither a string nor an array of parts");
  std::string text;
  for (size_t i = 0; i < it->size(); ++i) {
    const json& part = (*it)[i];
    auto t = part.is_object() ? part.find("text") : part.end();
    if (!part.is_object() || t == part.end() || !t->is_string()) {
      return Bad(fmt::format("{}.content[{}]", path, i), "is not a text part");
    }
    text += t->get<std::string>();
  }
  return text;
}

// A string field, or "" when absent or of another type (requests are untrusted: never throw).
std::string StringOr(const json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string_view FirstLine(std::string_view text) { return text.substr(0, text.find('\n')); }

// The text after `heading` up to the first of `ends` (or the end); npos-safe.
std::string BodyAfter(std::string_view text, size_t heading_end, std::initializer_list<std::string_view> ends,
                      size_t limit = std::string_view::npos) {
  size_t end = std::min(limit, text.size());
  for (std::string_view e : ends) end = std::min(end, text.find(e, heading_end));
  std::string body(text.substr(heading_end, end - heading_end));
  while (!body.empty() && (body.back() == '\n' || body.back() == ' ')) body.pop_back();
  return body;
}

// The value of a "key: value" line inside [from, limit).
std::string LineValue(std::string_view text, std::string_view key, size_t from, size_t limit) {
  const std::string needle = "\n" + std::string(key) + ": ";
  size_t at = text.find(needle, from);
  if (at == std::string_view::npos || at >= limit) return "";
  return std::string(FirstLine(text.substr(at + needle.size())));
}

// The rule whose "## Rule" section has this id (the first one when `id` is empty).
Result<PromptRule> FindRule(std::string_view text, std::string_view id) {
  const std::string heading = "## Rule\nid: " + std::string(id);
  size_t at = text.find(heading);
  while (at != std::string_view::npos && !id.empty() && at + heading.size() < text.size() &&
         text[at + heading.size()] != '\n') {
    at = text.find(heading, at + 1);  // a longer id that starts with this one
  }
  if (at == std::string_view::npos) {
    return Status::InvalidArgument(id.empty() ? std::string("the prompt has no \"## Rule\" section with an id")
                                              : fmt::format("the prompt has no \"## Rule\" section for {}", id));
  }
  PromptRule rule;
  const size_t id_start = at + std::string_view("## Rule\nid: ").size();
  rule.id = std::string(FirstLine(text.substr(id_start)));
  if (rule.id.empty()) return Status::InvalidArgument("the \"## Rule\" section's id is empty");
  size_t next_rule = text.find("## Rule\nid: ", id_start);
  rule.title = LineValue(text, "title", at, next_rule);
  size_t fix = text.find(kFixHeading, id_start);
  if (fix != std::string_view::npos && fix < next_rule) {
    rule.fix_text = BodyAfter(text, fix + kFixHeading.size(), {"\n### ", "\n## "}, next_rule);
    rule.fix_truncated = rule.fix_text.find(kTruncationMarker) != std::string::npos;
  }
  return rule;
}

// "- <id> (<severity>): <title>[ | <note>]..." lines of the architect's candidate list.
Result<std::vector<PromptRule>> ReadCandidates(std::string_view text) {
  constexpr std::string_view kHeading = "## Candidate rules\n";
  constexpr std::string_view kNoteSeparator = " | ";
  size_t at = text.find(kHeading);
  std::vector<PromptRule> out;
  size_t pos = at + kHeading.size();
  while (pos < text.size() && text.substr(pos, 2) == "- ") {
    std::string_view line = FirstLine(text.substr(pos));
    size_t paren = line.find(" (");
    if (paren == std::string_view::npos || paren <= 2) {
      return Status::InvalidArgument(
          fmt::format("the candidate line '{}' is not '- <id> (<severity>): <title>'", line));
    }
    PromptRule candidate;
    candidate.id = std::string(line.substr(2, paren - 2));
    if (size_t colon = line.find("): ", paren); colon != std::string_view::npos) {
      std::string_view rest = line.substr(colon + 3);
      candidate.title = rest.substr(0, rest.find(kNoteSeparator));
      for (size_t note = rest.find(kNoteSeparator); note != std::string_view::npos;
           note = rest.find(kNoteSeparator, note + 1)) {
        std::string_view n = rest.substr(note + kNoteSeparator.size());
        if (n.substr(0, n.find(kNoteSeparator)) == "no reference fix") candidate.no_reference_fix = true;
      }
    }
    out.push_back(std::move(candidate));
    pos += line.size() + 1;
  }
  if (out.empty()) return Status::InvalidArgument("the \"## Candidate rules\" section lists no rule");
  return out;
}

int ParseInt(std::string_view s) {
  int v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

// The highest "## Attempt N — verdict" heading: {N, verdict}; {0, ""} when there is none.
std::pair<int, std::string> HighestAttempt(std::string_view text) {
  constexpr std::string_view kHeading = "\n## Attempt ";
  constexpr std::string_view kDash = " — ";
  std::pair<int, std::string> best{0, ""};
  for (size_t at = text.find(kHeading); at != std::string_view::npos; at = text.find(kHeading, at + 1)) {
    std::string_view line = FirstLine(text.substr(at + kHeading.size()));
    int n = ParseInt(line);
    if (n > best.first) {
      size_t dash = line.find(kDash);
      best = {n, dash == std::string_view::npos ? "" : std::string(line.substr(dash + kDash.size()))};
    }
  }
  return best;
}

Status ReadWorkerCalls(const json& messages, ReadRequest* out) {
  for (size_t i = 2; i < messages.size(); ++i) {
    const json& m = messages[i];
    const std::string path = fmt::format("messages[{}]", i);
    const std::string role = StringOr(m, "role");
    if (role == "assistant") {
      auto calls = m.find("tool_calls");
      if (calls == m.end() || calls->is_null()) continue;
      if (!calls->is_array()) return Bad(path + ".tool_calls", "is not an array");
      for (size_t k = 0; k < calls->size(); ++k) {
        const json& c = (*calls)[k];
        const std::string cpath = fmt::format("{}.tool_calls[{}]", path, k);
        auto fn = c.is_object() ? c.find("function") : c.end();
        if (fn == c.end() || !fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string()) {
          return Bad(cpath + ".function.name", "is missing or not a string");
        }
        PastToolCall call;
        call.id = StringOr(c, "id");
        call.name = (*fn)["name"].get<std::string>();
        out->calls.push_back(std::move(call));
      }
    } else if (role == "tool") {
      TEMPER_ASSIGN_OR_RETURN(std::string content, ContentText(m, path));
      const std::string id = StringOr(m, "tool_call_id");
      // Calls written as text reuse ids ("text-1") across turns: a result answers the newest
      // unanswered call with its id.
      for (auto it = out->calls.rbegin(); it != out->calls.rend(); ++it) {
        if (!it->answered && it->id == id) {
          it->result = std::move(content);
          it->answered = true;
          break;
        }
      }
    }
  }
  return Status::OK();
}

}  // namespace

std::string_view RoleLabel(ScriptedRole role) {
  switch (role) {
    case ScriptedRole::kArchitectPick:
      return "architect_pick";
    case ScriptedRole::kArchitectReengage:
      return "architect_reengage";
    case ScriptedRole::kWorker:
      return "worker";
    case ScriptedRole::kReflector:
      return "reflector";
  }
  return "unknown";
}

std::string_view RoleName(ScriptedRole role) {
  return role == ScriptedRole::kArchitectPick ? "architect" : RoleLabel(role);
}

std::string PromptText(const json& body) {
  std::string text;
  auto messages = body.find("messages");
  if (messages == body.end() || !messages->is_array()) return text;
  for (const json& m : *messages) {
    if (!m.is_object()) continue;
    if (auto content = ContentText(m, ""); content.ok()) text += *content;
    // A server renders the tools' declarations into the system turn (Gemma's template, vLLM's):
    // prompt tokens on every call, and part of the prefix every call of the role shares.
    if (&m == &messages->front()) {
      if (auto tools = body.find("tools"); tools != body.end() && tools->is_array() && !tools->empty())
        text += tools->dump();
    }
    if (auto calls = m.find("tool_calls"); calls != m.end() && calls->is_array()) {
      for (const json& c : *calls) {
        if (c.is_object() && c.contains("function") && c["function"].is_object()) {
          const json& fn = c["function"];
          if (fn.contains("name") && fn["name"].is_string()) text += fn["name"].get<std::string>();
          if (fn.contains("arguments") && fn["arguments"].is_string()) text += fn["arguments"].get<std::string>();
        }
      }
    }
  }
  return text;
}

Result<ReadRequest> ReadChatRequest(const json& body) {
  if (!body.is_object()) return Bad("the body", "is not a JSON object");
  ReadRequest r;
  if (auto m = body.find("model"); m != body.end() && m->is_string()) r.model = m->get<std::string>();
  if (auto s = body.find("stream"); s != body.end()) {
    if (!s->is_boolean()) return Bad("stream", "is not a boolean");
    r.stream = s->get<bool>();
  }
  if (auto o = body.find("stream_options"); o != body.end() && o->is_object()) {
    auto u = o->find("include_usage");
    r.include_usage = u != o->end() && u->is_boolean() && u->get<bool>();
  }
  if (auto tools = body.find("tools"); tools != body.end() && tools->is_array()) {
    for (const json& t : *tools) {
      if (t.is_object() && t.contains("function") && t["function"].is_object() && t["function"].contains("name") &&
          t["function"]["name"].is_string()) {
        r.tools.push_back(t["function"]["name"].get<std::string>());
      }
    }
  }
  auto messages = body.find("messages");
  if (messages == body.end() || !messages->is_array()) return Bad("messages", "is missing or not an array");
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& m = (*messages)[i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      return Bad(fmt::format("messages[{}]", i), "is not an object with a string \"role\"");
    }
  }
  if (messages->size() < 2 || (*messages)[0]["role"] != "system" || (*messages)[1]["role"] != "user") {
    return Bad("messages", "must start with a system prompt and the role's task (a user message)");
  }
  TEMPER_ASSIGN_OR_RETURN(std::string system, ContentText((*messages)[0], "messages[0]"));
  TEMPER_ASSIGN_OR_RETURN(std::string task, ContentText((*messages)[1], "messages[1]"));
  const std::string_view first_line = FirstLine(system);
  // Leading newline: the section headings below are searched as "\n## …".
  const std::string text = "\n" + task;

  if (first_line.starts_with("You are the Architect")) {
    if (text.find("\n## Candidate rules\n") != std::string::npos) {
      r.role = ScriptedRole::kArchitectPick;
      TEMPER_ASSIGN_OR_RETURN(r.candidates, ReadCandidates(text));
      return r;
    }
    if (text.find("\n## Current plan\n") == std::string::npos) {
      return Bad("messages[1]", "is an Architect task with neither \"## Candidate rules\" nor \"## Current plan\"");
    }
    r.role = ScriptedRole::kArchitectReengage;
    TEMPER_ASSIGN_OR_RETURN(r.rule, FindRule(text, ""));
    std::tie(r.attempt, r.last_verdict) = HighestAttempt(text);
    return r;
  }
  if (first_line.starts_with("You are the Worker")) {
    r.role = ScriptedRole::kWorker;
    TEMPER_ASSIGN_OR_RETURN(r.rule, FindRule(text, ""));
    r.attempt = HighestAttempt(text).first + 1;
    TEMPER_RETURN_IF_ERROR(ReadWorkerCalls(*messages, &r));
    return r;
  }
  if (first_line.starts_with("You are the Reflector")) {
    r.role = ScriptedRole::kReflector;
    TEMPER_ASSIGN_OR_RETURN(r.rule, FindRule(text, ""));
    constexpr std::string_view kFailed = "\n## The failed attempt (";
    size_t at = text.find(kFailed);
    if (at == std::string::npos) return Bad("messages[1]", "is a Reflector task without \"## The failed attempt (N)\"");
    r.attempt = ParseInt(std::string_view(text).substr(at + kFailed.size()));
    const size_t section_end = text.find("\n\n", at + 1);
    r.approach = LineValue(text, "Approach", at, section_end);
    r.last_verdict = LineValue(text, "Verdict", at, std::string::npos);
    constexpr std::string_view kEvidence = "\n### Evaluator evidence\n";
    if (size_t e = text.find(kEvidence); e != std::string::npos) {
      r.evidence = BodyAfter(text, e + kEvidence.size(), {"\n\n### ", "\n\n## "});
    }
    constexpr std::string_view kActions = "\n### What the Worker did\n";
    if (size_t a = text.find(kActions); a != std::string::npos) {
      r.actions = BodyAfter(text, a + kActions.size(), {"\n\n### ", "\n\n## "});
    }
    return r;
  }
  return Bad("messages[0]",
             fmt::format("is a system prompt whose first line '{}' names no role (expected "
                         "\"You are the Architect\", \"You are the Worker\" or \"You are the Reflector\")",
                         first_line.substr(0, 120)));
}

}  // namespace temper::scripted
