#include "roles/worker.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/display_text.h"
#include "common/sha256.h"
#include "roles/architect.h"
#include "roles/policy_checked_tools.h"
#include "roles/tool_calls.h"
#include "roles/worker_tool_names.h"

namespace temper {

using nlohmann::json;

namespace {

bool IsContinuation(unsigned char c) { return (c & 0xC0) == 0x80; }

bool ToolErrorIsForTheModel(StatusCode code) {
  return code == StatusCode::kInvalidArgument || code == StatusCode::kNotFound ||
         code == StatusCode::kPermissionDenied || code == StatusCode::kFailedPrecondition ||
         code == StatusCode::kIOError || code == StatusCode::kAlreadyExists || code == StatusCode::kOutOfRange;
}

// The "packages" argument of install_package / remove_package: a non-empty array of strings.
Result<std::vector<std::string>> PackageNames(const json& arguments, const std::string& tool) {
  const json& list = arguments["packages"];
  std::vector<std::string> names;
  for (const json& n : list) {
    if (!n.is_string() || n.get<std::string>().empty()) {
      return Status::InvalidArgument(
          fmt::format("{}: every entry of 'packages' must be a package name (a string), not {}", tool, n.dump()));
    }
    names.push_back(n.get<std::string>());
  }
  if (names.empty()) return Status::InvalidArgument(tool + ": 'packages' is empty; name at least one package");
  return names;
}

// ---------------------------------------------------------------------------------------------
// The tools: one row each, with what the model is told about it and how a call runs.

// What one tool call came to: the text the model is shown, and whether the command policy refused
// the call (then nothing reached the target and `output` says why).
struct ToolOutcome {
  std::string output;
  bool refused = false;
  json reference_fix;  // apply_reference_fix: which fix ran or was refused (WorkerEvent::reference_fix)
};

ToolOutcome Refused(const Status& refusal) { return {refusal.message(), true, json()}; }

// What a call may use: the target behind the policy, the budget, the rule at hand and the
// attempt's record of the commands run and files written.
struct ToolCallContext {
  PolicyCheckedTools& tools;
  const WorkerBudget& budget;
  const RuleInfo& rule;
  std::string& actions;
};

// What the model is shown of a command that ran: its exit status, then its output cut to the budget.
std::string CommandResultText(const CommandResult& r, const WorkerBudget& budget) {
  return fmt::format("exit status {}{}\n{}", r.exit_status,
                     r.timed_out ? fmt::format(" (killed after the {} s timeout)", budget.command_timeout.count()) : "",
                     TruncateOutput(r.output, budget.max_output_bytes));
}

// Runs one call whose arguments match the tool's schema. Errors: the target failed (the attempt
// ends); what the model should hear about is in the outcome.
using ToolRunner = Result<ToolOutcome> (*)(const json& arguments, ToolCallContext& ctx);

Result<ToolOutcome> RunCommand(const json& arguments, ToolCallContext& ctx) {
  const std::string command = arguments["command"];
  auto r = ctx.tools.RunCommand(command, ctx.budget.command_timeout);
  if (ctx.tools.last_call_refused()) return Refused(r.status());
  if (!r.ok() && !ToolErrorIsForTheModel(r.status().code())) return r.status().WithContext("running a Worker command");
  if (!r.ok()) return ToolOutcome{"error: " + r.status().message()};
  ctx.actions += fmt::format("$ {} → exit {}\n", OneLine(command, 300), r->exit_status);
  return ToolOutcome{CommandResultText(*r, ctx.budget)};
}

Result<ToolOutcome> ReadFile(const json& arguments, ToolCallContext& ctx) {
  const std::string path = arguments["path"];
  const size_t max = ctx.budget.max_output_bytes;
  auto r = ctx.tools.ReadFile(path, max + 1);
  if (!r.ok() && !ToolErrorIsForTheModel(r.status().code()))
    return r.status().WithContext("reading a file for the Worker");
  if (!r.ok()) return ToolOutcome{"error: " + r.status().message()};
  if (r->size() <= max) return ToolOutcome{*r};
  return ToolOutcome{
      r->substr(0, max) +
      fmt::format("\n[… truncated: only the first {} bytes are shown; use run_command with grep or sed -n to see more]",
                  max)};
}

Result<ToolOutcome> WriteFile(const json& arguments, ToolCallContext& ctx) {
  const std::string path = arguments["path"], content = arguments["content"];
  Status s = ctx.tools.WriteFile(path, content);
  if (ctx.tools.last_call_refused()) return Refused(s);
  if (!s.ok() && !ToolErrorIsForTheModel(s.code())) return s.WithContext("writing a file for the Worker");
  if (!s.ok()) return ToolOutcome{"error: " + s.message()};
  ctx.actions += fmt::format("write {} ({} bytes)\n", path, content.size());
  return ToolOutcome{fmt::format("wrote {} bytes to {}", content.size(), path)};
}

// install_package and remove_package: what the package manager reported, cut to the output budget.
Result<ToolOutcome> ChangePackages(const json& arguments, ToolCallContext& ctx, bool install) {
  const std::string tool(WorkerToolName(install ? WorkerTool::kInstallPackage : WorkerTool::kRemovePackage));
  Result<std::vector<std::string>> packages = PackageNames(arguments, tool);
  if (!packages.ok()) return ToolOutcome{"error: " + packages.status().message()};
  const bool purge = arguments.contains("purge") && arguments["purge"].get<bool>();
  auto r = install ? ctx.tools.InstallPackages(*packages, ctx.budget.command_timeout)
                   : ctx.tools.RemovePackages(*packages, purge, ctx.budget.command_timeout);
  if (ctx.tools.last_call_refused()) return Refused(r.status());
  if (!r.ok() && !ToolErrorIsForTheModel(r.status().code())) {
    return r.status().WithContext(install ? "installing packages for the Worker" : "removing packages for the Worker");
  }
  ctx.actions += fmt::format("{} {} → {}\n", install ? "install" : (purge ? "purge" : "remove"),
                             fmt::join(*packages, " "), r.ok() ? "ok" : "failed");
  const size_t max = ctx.budget.max_output_bytes;
  return ToolOutcome{r.ok() ? TruncateOutput(*r, max) : "error: " + TruncateOutput(r.status().message(), max)};
}

Result<ToolOutcome> InstallPackage(const json& arguments, ToolCallContext& ctx) {
  return ChangePackages(arguments, ctx, true);
}

Result<ToolOutcome> RemovePackage(const json& arguments, ToolCallContext& ctx) {
  return ChangePackages(arguments, ctx, false);
}

// Where apply_reference_fix puts the script: /root/temper-reference-fix-<SSG short name>.sh, the
// name kept to characters that mean nothing to the shell that runs it.
std::string ReferenceFixPath(const std::string& rule_id) {
  const size_t at = rule_id.rfind("_rule_");
  std::string name = at == std::string::npos ? rule_id : rule_id.substr(at + std::string_view("_rule_").size());
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') c = '_';
  }
  return fmt::format("/root/temper-reference-fix-{}.sh", name);
}

bool HasReferenceFix(const RuleInfo& rule) { return rule.fix_text.find_first_not_of(" \t\r\n") != std::string::npos; }

// apply_reference_fix: the rule's own SSG bash fix, whole (the prompt may show it cut), written to
// a file under /root (root's alone) and run there with bash. Both go through the policy like the
// model's own write_file and run_command, so the script is judged by its content when it runs; a
// refused script never runs and its file is removed again. The script removes its file itself
// when it has run, so the attempt's change set holds only what the fix changed.
Result<ToolOutcome> ApplyReferenceFix(const json&, ToolCallContext& ctx) {
  const RuleInfo& rule = ctx.rule;
  if (!HasReferenceFix(rule)) {
    return ToolOutcome{fmt::format(
        "error: the rule {} has no reference fix in its content (SCAP Security Guide ships no bash fix for it): "
        "write and run your own script, or finish saying what a human must decide",
        rule.id)};
  }
  const std::string script = rule.fix_text + "\n";
  const std::string source = rule.reference_fix_source.empty() ? "its content" : rule.reference_fix_source;
  const std::string digest = Sha256Hex(script);
  const json which = {{"rule", rule.id}, {"source", source}, {"sha256", digest}};
  const std::string path = ReferenceFixPath(rule.id);

  Status written = ctx.tools.WriteFile(path, script);
  if (ctx.tools.last_call_refused()) return ToolOutcome{written.message(), true, which};
  if (!written.ok() && !ToolErrorIsForTheModel(written.code())) {
    return written.WithContext("writing the reference fix of " + rule.id);
  }
  if (!written.ok()) return ToolOutcome{"error: " + written.message(), false, which};
  const std::string command = fmt::format("bash {0}; status=$?; rm -f {0}; exit $status", path);
  auto r = ctx.tools.RunCommand(command, ctx.budget.command_timeout);
  if (ctx.tools.last_call_refused()) {
    // Nothing ran; take the file back out (a refusal of this plain removal would leave it, harmlessly).
    auto removed = ctx.tools.RunCommand("rm -f " + path, ctx.budget.command_timeout);
    if (!removed.ok() && !ToolErrorIsForTheModel(removed.status().code()) && !ctx.tools.last_call_refused()) {
      return removed.status().WithContext("removing the refused reference fix of " + rule.id);
    }
    return ToolOutcome{r.status().message(), true, which};
  }
  if (!r.ok() && !ToolErrorIsForTheModel(r.status().code())) {
    return r.status().WithContext("running the reference fix of " + rule.id);
  }
  if (!r.ok()) return ToolOutcome{"error: " + r.status().message(), false, which};
  ctx.actions +=
      fmt::format("reference fix {} from {} (sha256 {}) → exit {}\n", rule.id, source, digest, r->exit_status);
  return ToolOutcome{CommandResultText(*r, ctx.budget), false, which};
}

struct ToolSpec {
  WorkerTool tool;
  std::string_view description;  // for the model
  std::string_view schema;       // of the arguments (JSON Schema)
  ToolRunner call;               // nullptr for finish, which ends the loop instead
};

constexpr ToolSpec kToolSpecs[] = {
    {WorkerTool::kRunCommand,
     "Run one shell command line on the target as root (/bin/sh -c). Returns the exit status and output.",
     R"({"type": "object", "properties": {"command": {"type": "string", "minLength": 1, "description": "the command line"}},
                       "required": ["command"], "additionalProperties": false})",
     RunCommand},
    {WorkerTool::kReadFile, "Read a file on the target.",
     R"({"type": "object", "properties": {"path": {"type": "string", "minLength": 1, "description": "absolute path"}},
                       "required": ["path"], "additionalProperties": false})",
     ReadFile},
    {WorkerTool::kWriteFile, "Create or replace a file on the target with the given content.",
     R"({"type": "object", "properties": {"path": {"type": "string", "minLength": 1, "description": "absolute path"},
                       "content": {"type": "string", "description": "the whole new content"}},
                       "required": ["path", "content"], "additionalProperties": false})",
     WriteFile},
    {WorkerTool::kInstallPackage,
     "Install Debian packages, and what they depend on, on the target with its own apt, from the package source "
     "temper keeps for it (the target has no network of its own, so apt-get through run_command cannot download). "
     "Returns what was set up, or why it failed (unknown package, conflicts, a failing maintainer script).",
     R"({"type": "object", "properties": {"packages": {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1},
                       "description": "package names, e.g. [\"aide\"]"}},
                       "required": ["packages"], "additionalProperties": false})",
     InstallPackage},
    {WorkerTool::kRemovePackage,
     "Remove Debian packages from the target. Packages that depend on them are not removed along: name them too.",
     R"({"type": "object", "properties": {"packages": {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1},
                       "description": "package names"},
                       "purge": {"type": "boolean", "description": "also delete their configuration files"}},
                       "required": ["packages"], "additionalProperties": false})",
     RemovePackage},
    {WorkerTool::kFinish, "End the attempt. The evaluator then checks the rule.",
     R"({"type": "object", "properties": {"summary": {"type": "string", "minLength": 1,
                       "description": "what you changed and how you verified it"}},
                       "required": ["summary"], "additionalProperties": false})",
     nullptr},
    // Last: it is offered only for rules with a reference fix, and the declarations every rule
    // shares stay one prefix for a server's cache.
    {WorkerTool::kApplyReferenceFix,
     "Run this rule's reference fix: the SCAP Security Guide bash script under \"Fix (SCAP Security Guide)\", "
     "whole even where the prompt cut it short, as root with bash, judged by the command policy like any script. "
     "Returns the exit status and output, as run_command does.",
     R"({"type": "object", "properties": {"reason": {"type": "string",
                       "description": "optional: why the reference fix fits this target"}},
                       "additionalProperties": false})",
     ApplyReferenceFix},
};
static_assert(std::size(kToolSpecs) == kWorkerToolCount);

// The row of a tool the model may call (not finish); nullptr for any other name.
const ToolSpec* FindTool(const std::string& name) {
  for (const ToolSpec& spec : kToolSpecs) {
    if (WorkerToolName(spec.tool) == name && spec.call != nullptr) return &spec;
  }
  return nullptr;
}

}  // namespace

std::string_view WorkerOutcomeName(WorkerOutcome outcome) {
  switch (outcome) {
    case WorkerOutcome::kFinished:
      return "finished";
    case WorkerOutcome::kStepBudget:
      return "step_budget";
    case WorkerOutcome::kTokenBudget:
      return "token_budget";
    case WorkerOutcome::kUnusableAnswers:
      return "unusable_answers";
  }
  return "finished";
}

std::string TruncateOutput(const std::string& text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  const size_t note_reserve = 64;
  const size_t keep = max_bytes > note_reserve ? max_bytes - note_reserve : 0;
  size_t head = keep * 2 / 3;
  while (head > 0 && head < text.size() && IsContinuation(static_cast<unsigned char>(text[head]))) --head;
  size_t tail_start = text.size() - (keep - std::min(keep, head));
  while (tail_start < text.size() && IsContinuation(static_cast<unsigned char>(text[tail_start]))) ++tail_start;
  return text.substr(0, head) +
         fmt::format("\n[… output truncated: {} of {} bytes left out …]\n", tail_start - head, text.size()) +
         text.substr(tail_start);
}

std::vector<ToolDeclaration> Worker::Tools() {
  std::vector<ToolDeclaration> out;
  for (const ToolSpec& spec : kToolSpecs) {
    out.push_back({std::string(WorkerToolName(spec.tool)), std::string(spec.description), json::parse(spec.schema)});
  }
  return out;
}

std::vector<ToolDeclaration> Worker::ToolsFor(const RuleInfo& rule) {
  std::vector<ToolDeclaration> out = Tools();
  if (!HasReferenceFix(rule)) {
    std::erase_if(out,
                  [](const ToolDeclaration& d) { return d.name == WorkerToolName(WorkerTool::kApplyReferenceFix); });
  }
  return out;
}

Result<RolePrompt> Worker::BuildPrompt(const WorkerTask& task) const {
  TEMPER_ASSIGN_OR_RETURN(std::string system,
                          prompts_.Render("worker", {{"max_steps", std::to_string(budget_.max_steps)},
                                                     {"max_tokens", std::to_string(budget_.max_tokens)}}));
  std::vector<PromptSection> sections = RuleSections(task.rule);
  sections.push_back({"approach", "## Approach (from the Architect)\n" + task.approach, 0, true});
  for (PromptSection& s : LessonSections(task.lessons)) sections.push_back(std::move(s));
  for (PromptSection& s : AttemptSections(task.prior_attempts, 450)) sections.push_back(std::move(s));
  // Leave room in the window for the tool loop's own turns: the first prompt takes at most half.
  RoleConfig half = config_;
  half.context_tokens = config_.max_output_tokens +
                        (config_.context_tokens - std::min(config_.context_tokens, config_.max_output_tokens)) / 2;
  TEMPER_ASSIGN_OR_RETURN(RolePrompt p, AssembleRolePrompt(half, estimator_, system, std::move(sections)));
  p.request.max_tokens = config_.max_output_tokens;
  p.request.tools = ToolsFor(task.rule);
  p.request.require_tool_call = true;
  return p;
}

Result<WorkerResult> Worker::Run(ModelClient& client, WorkerTools& tools, const WorkerTask& task,
                                 const std::function<void(const WorkerEvent&)>& on_event) const {
  TEMPER_ASSIGN_OR_RETURN(RolePrompt prompt, BuildPrompt(task));
  ChatRequest request = std::move(prompt.request);
  WorkerResult result;
  result.trimmed = std::move(prompt.trimmed);
  // Every call reaches the target through the command policy.
  PolicyCheckedTools checked_tools(tools,
                                   PolicyContext{.bootloader_rule = IsBootloaderRule(task.rule.id, task.rule.title),
                                                 .allow_package_removal = task.allow_package_removal});
  const size_t window = config_.context_tokens - std::min(config_.context_tokens, config_.max_output_tokens);
  auto emit = [&](WorkerEvent e) {
    if (on_event) on_event(e);
    result.events.push_back(std::move(e));
  };
  auto tokens_used = [&] { return result.usage.prompt_tokens + result.usage.completion_tokens; };
  uint32_t unusable = 0;
  size_t next_to_elide = 2;  // messages 0 and 1 are the system prompt and the task

  for (;;) {
    if (result.steps >= budget_.max_steps) {
      result.outcome = WorkerOutcome::kStepBudget;
      result.summary = fmt::format("stopped: the step budget of {} tool calls is spent", budget_.max_steps);
      return result;
    }
    if (tokens_used() >= budget_.max_tokens) {
      result.outcome = WorkerOutcome::kTokenBudget;
      result.summary = fmt::format("stopped: the token budget of {} is spent", budget_.max_tokens);
      return result;
    }
    // Fit the conversation in the window, eliding the oldest tool outputs first. The tool
    // declarations ride in the system turn of every call.
    auto conversation_tokens = [&] {
      size_t t = 0;
      for (const ToolDeclaration& d : request.tools) {
        t += estimator_.Count(d.name) + estimator_.Count(d.description) + estimator_.Count(d.parameters.dump());
      }
      for (const ChatMessage& m : request.messages) {
        t += estimator_.Count(m.content) + kPerMessageOverheadTokens;
        for (const ToolCall& c : m.tool_calls) t += estimator_.Count(c.arguments) + estimator_.Count(c.name);
      }
      return t;
    };
    while (conversation_tokens() > window && next_to_elide < request.messages.size()) {
      ChatMessage& m = request.messages[next_to_elide++];
      if (m.role != ChatRole::kTool || m.content.size() < 200) continue;
      emit(
          {WorkerEvent::Kind::kElided, m.name, json(), fmt::format("{} bytes of {} output", m.content.size(), m.name)});
      m.content = fmt::format("[{} output elided to fit the context window]", m.name);
    }
    if (conversation_tokens() > window) {
      result.outcome = WorkerOutcome::kTokenBudget;
      result.summary = "stopped: the conversation no longer fits the context window";
      return result;
    }
    request.max_tokens =
        static_cast<uint32_t>(std::min<uint64_t>(config_.max_output_tokens, budget_.max_tokens - tokens_used()));

    TEMPER_ASSIGN_OR_RETURN(ChatResponse response, client.Chat(request, nullptr));
    ++result.model_calls;
    if (response.usage.prompt_tokens == 0 && response.usage.completion_tokens == 0) {
      response.usage.prompt_tokens = conversation_tokens();  // the server did not say: estimate
      response.usage.completion_tokens = estimator_.Count(response.text);
    }
    result.usage.prompt_tokens += response.usage.prompt_tokens;
    result.usage.completion_tokens += response.usage.completion_tokens;
    result.usage.cached_prompt_tokens += response.usage.cached_prompt_tokens;
    emit({WorkerEvent::Kind::kModelCall, "", json(), std::string(FinishReasonName(response.finish_reason)),
          response.usage, response.latency});

    // Against every tool, so a call of apply_reference_fix where the rule has none (and it is not
    // offered) hears why from the tool, naming the rule, rather than that no such tool exists.
    auto calls = ResolveToolCalls(response, Tools());
    std::string problem;
    if (!response.malformed_reply.empty()) problem = "your reply could not be parsed: " + response.malformed_reply;
    else if (!calls.ok()) problem = calls.status().message();
    else if (calls->empty()) problem = "the answer holds no tool call; call a tool, or finish with a summary";
    if (!problem.empty()) {
      emit({WorkerEvent::Kind::kUnusableAnswer, "", json(), problem});
      if (++unusable > budget_.max_format_retries) {
        result.outcome = WorkerOutcome::kUnusableAnswers;
        result.summary = fmt::format("stopped after {} unusable answers in a row; last: {}", unusable, problem);
        return result;
      }
      request.messages.push_back({ChatRole::kAssistant, response.text});
      request.messages.push_back(
          {ChatRole::kUser,
           fmt::format("Your answer could not be used: {}. ({} more unusable answers end the attempt.)", problem,
                       budget_.max_format_retries - unusable + 1)});
      continue;
    }
    unusable = 0;
    // The calls are echoed as the model wrote them: a server's prefix cache matches the next request
    // only where the re-sent assistant turn is the bytes it generated. ResolveToolCalls read the
    // server's calls one for one when there were any; calls written in the text ride in `text`.
    ChatMessage assistant{ChatRole::kAssistant, response.text};
    for (size_t i = 0; i < calls->size(); ++i) {
      const ResolvedCall& c = (*calls)[i];
      const bool as_generated = i < response.tool_calls.size() && !response.tool_calls[i].arguments.empty();
      assistant.tool_calls.push_back(
          {c.id, c.name, as_generated ? response.tool_calls[i].arguments : c.arguments.dump()});
    }
    request.messages.push_back(std::move(assistant));

    for (const ResolvedCall& call : *calls) {
      std::string output;
      if (ParseWorkerTool(call.name) == WorkerTool::kFinish) {
        result.outcome = WorkerOutcome::kFinished;
        result.summary = call.arguments["summary"].get<std::string>();
        emit({WorkerEvent::Kind::kToolCall, call.name, call.arguments, result.summary});
        return result;
      }
      if (result.steps >= budget_.max_steps) {
        output = "not run: the step budget is spent";
      } else {
        ++result.steps;
        const ToolSpec* spec = FindTool(call.name);
        if (spec == nullptr) return Status::Internal(fmt::format("the Worker has no tool '{}'", call.name));
        ToolCallContext context{checked_tools, budget_, task.rule, result.actions};
        TEMPER_ASSIGN_OR_RETURN(ToolOutcome done, spec->call(call.arguments, context));
        output = std::move(done.output);
        // Decided by the policy's Status, never by the text: a tool's own output may say anything.
        WorkerEvent event{done.refused ? WorkerEvent::Kind::kRefused : WorkerEvent::Kind::kToolCall, call.name,
                          call.arguments, done.refused ? output : OneLine(output, 500)};
        event.reference_fix = std::move(done.reference_fix);
        emit(std::move(event));
      }
      output += fmt::format("\n[budget left: {} tool calls, {} tokens]",
                            budget_.max_steps - std::min(budget_.max_steps, result.steps),
                            budget_.max_tokens - std::min<uint64_t>(budget_.max_tokens, tokens_used()));
      ChatMessage tool_message{ChatRole::kTool, std::move(output)};
      tool_message.tool_call_id = call.id;
      tool_message.name = call.name;
      request.messages.push_back(std::move(tool_message));
    }
  }
}

}  // namespace temper
