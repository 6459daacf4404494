// Reading a role's chat request the way a model would: which role is asking (from the system
// prompt's first line), which rule it is about, the rule's SCAP Security Guide fix text, the
// attempt number, the evaluator's evidence, and — for the Worker — how far its tool loop has got.
//
// It reads the sections roles/prompt_sections.cpp renders ("## Rule\nid: …", "### Fix (SCAP
// Security Guide)\n…", "## Attempt N — verdict", "## The failed attempt (N)", "### Evaluator
// evidence") and the architect's "## Candidate rules" list, so a change to those formats shows up
// as a failing scripted-model test rather than as a silently different answer.
//
// Errors: InvalidArgument naming what is missing or malformed (the body's JSON path, the section),
// which the server answers as HTTP 400.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace temper::scripted {

enum class ScriptedRole { kArchitectPick, kArchitectReengage, kWorker, kReflector };
// "architect_pick", "architect_reengage", "worker", "reflector": each kind of request's name in the
// server's log and its label on /metrics.
std::string_view RoleLabel(ScriptedRole role);
// The same, but "architect" for a pick: the roles/prompts names the server's request records use.
std::string_view RoleName(ScriptedRole role);

// A rule as a prompt shows it.
struct PromptRule {
  std::string id;  // full XCCDF id as written in the prompt
  std::string title;
  std::string fix_text;        // the fix section's text; empty when the prompt has none
  bool fix_truncated = false;  // the prompt budget cut the fix short: it cannot be run as is
  // An Architect candidate line's "| no reference fix": SSG ships no fix for the rule. (A candidate
  // line carries no fix text: only the Worker's prompt holds the rule's details.)
  bool no_reference_fix = false;
};

// A tool call the Worker already made in this attempt, with the result it was shown.
struct PastToolCall {
  std::string id;
  std::string name;
  std::string result;     // the tool message's content
  bool answered = false;  // a tool message answered it
};

struct ReadRequest {
  ScriptedRole role = ScriptedRole::kWorker;
  std::string model;  // as the request named it
  bool stream = false;
  bool include_usage = false;      // stream_options.include_usage
  std::vector<std::string> tools;  // the tool names offered

  std::vector<PromptRule> candidates;  // architect pick: in prompt order
  PromptRule rule;                     // every other role: the rule of the "## Rule" section

  // Worker: 1 + the highest N of the "## Attempt N" sections. Reflector: the failed attempt's N.
  // Re-engagement: the highest N. Architect pick: 0.
  int attempt = 0;
  std::string last_verdict;  // re-engagement: the highest attempt's verdict; reflector: the failed one's
  std::string evidence;      // reflector: the evaluator evidence section
  std::string actions;       // reflector: what the Worker did
  std::string approach;      // reflector: the failed attempt's approach

  std::vector<PastToolCall> calls;  // worker: the calls made so far in this attempt, in order
};

// `body` is a /v1/chat/completions request body.
Result<ReadRequest> ReadChatRequest(const nlohmann::json& body);

// Every message's text joined, in order, for token estimates (its size) and the simulated prefix
// cache (its bytes): `content` strings (or text parts), tool call names and arguments, and the
// tools' declarations after the first message, where a server's chat template renders them.
std::string PromptText(const nlohmann::json& body);

}  // namespace temper::scripted
