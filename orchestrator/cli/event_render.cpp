#include "orchestrator/cli/event_render.h"

#include <algorithm>
#include <initializer_list>
#include <optional>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "orchestrator/cli/render.h"

namespace temper::cli {

namespace {

using nlohmann::json;

// Free text (an approach, a lesson, a reason) gets at most this many characters of a line.
constexpr size_t kTextChars = 160;
// What a tool call returned is a hint after its arguments; the full text is in --json.
constexpr size_t kToolResultChars = 60;

// The event's data never breaks the line: a missing key or another type reads as empty.
std::string Str(const json& data, const char* key) {
  auto it = data.find(key);
  return it != data.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::optional<uint64_t> Num(const json& data, const char* key) {
  auto it = data.find(key);
  if (it == data.end() || !it->is_number_integer()) return std::nullopt;
  return it->is_number_unsigned() ? it->get<uint64_t>() : static_cast<uint64_t>(std::max<int64_t>(0, it->get<int64_t>()));
}

bool Flag(const json& data, const char* key) {
  auto it = data.find(key);
  return it != data.end() && it->is_boolean() && it->get<bool>();
}

std::string Plural(uint64_t n, const char* word) { return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s"); }

// ": text" when there is text, so a sentence ends cleanly when the data lacks it.
std::string Colon(const std::string& text, size_t max_chars = kTextChars) {
  return text.empty() ? "" : ": " + OneLine(text, max_chars);
}

// "2 fixed, 1 escalated" from {"escalated":1,"fixed":2,"pending":0}: the non-zero counts, the keys
// in `order` first and in that order, then the rest by count, largest first.
std::string Counts(const json& counts, std::initializer_list<std::string_view> order = {}) {
  if (!counts.is_object()) return "none";
  std::vector<std::pair<std::string, int64_t>> items;
  for (const auto& [name, n] : counts.items()) {
    if (n.is_number_integer() && n.get<int64_t>() > 0) items.emplace_back(name, n.get<int64_t>());
  }
  auto rank = [&](const std::string& name) {
    auto it = std::find(order.begin(), order.end(), name);
    return static_cast<size_t>(it - order.begin());
  };
  std::stable_sort(items.begin(), items.end(), [&](const auto& a, const auto& b) {
    return rank(a.first) != rank(b.first) ? rank(a.first) < rank(b.first) : a.second > b.second;
  });
  std::string out;
  for (const auto& [name, n] : items) out += fmt::format("{}{} {}", out.empty() ? "" : ", ", n, name);
  return out.empty() ? "none" : out;
}

// The tool call's main argument: the command line, the path, or finish's summary.
std::string ToolArgument(const std::string& tool, const json& args) {
  if (!args.is_object()) return args.is_null() ? "" : args.dump();
  if (tool == "run_command") return Str(args, "command");
  if (tool == "read_file") return Str(args, "path");
  if (tool == "write_file") {
    return fmt::format("{} ({} bytes)", Str(args, "path"), Str(args, "content").size());
  }
  if (tool == "finish") return Str(args, "summary");
  return args.dump();
}

std::string AttemptTag(const json& data, const char* key) {
  std::optional<uint64_t> n = Num(data, key);
  return n ? fmt::format(" #{}", *n) : "";
}

std::string ProfileName(const std::string& id) {
  static constexpr std::string_view kMarker = "_profile_";
  size_t at = id.find(kMarker);
  return at == std::string::npos ? id : id.substr(at + kMarker.size());
}

// nullopt for types this file does not know: the caller prints them generically.
std::optional<std::string> Describe(const temper::v1::JournalEvent& e, const json& d) {
  const std::string& type = e.type();
  const std::string rule = ShortRuleName(e.rule_id());
  if (type == "batch.submitted") {
    std::string what = Flag(d, "whole_profile") ? "every rule of the profile"
                                                        : Plural(Num(d, "rules").value_or(0), "rule");
    return fmt::format("{}: {} on target {} (profile {})", type, what, e.target(), ProfileName(Str(d, "profile")));
  }
  if (type == "batch.started") return fmt::format("{} on target {}", type, e.target());
  if (type == "batch.resumed") {
    std::string out = fmt::format("{} on target {}", type, e.target());
    auto it = d.find("interrupted_rules");
    if (it != d.end() && it->is_array() && !it->empty()) {
      std::string names;
      for (const json& r : *it) names += (names.empty() ? "" : ", ") + ShortRuleName(r.is_string() ? r.get<std::string>() : r.dump());
      out += ", interrupted work reverted on " + OneLine(names, kTextChars);
    }
    return out;
  }
  if (type == "batch.expanded") {
    return fmt::format("{} to {} of profile {}", type, Plural(Num(d, "rules").value_or(0), "rule"),
                       ProfileName(Str(d, "profile")));
  }
  if (type == "batch.completed") {
    return fmt::format("{}: {}", type,
                       Counts(d.contains("rules") ? d["rules"] : json(),
                              {"fixed", "already_passing", "escalated", "reboot_pending", "waived", "held", "manual",
                               "skipped", "error", "cancelled", "running", "pending"}));
  }
  if (type == "batch.failed") return type + Colon(Str(d, "error"));
  if (type == "batch.cancelled") {
    std::string was = Str(d, "previous_state");
    std::optional<uint64_t> n = Num(d, "rules_cancelled");
    std::string paren = was.empty() ? "" : "was " + was;
    if (n) paren += (paren.empty() ? "" : ", ") + Plural(*n, "rule") + " cancelled";
    return type + (paren.empty() ? "" : " (" + paren + ")") + Colon(Str(d, "reason"));
  }
  if (type == "evaluation.before") {
    return fmt::format("{} of {}: {}", type, Plural(Num(d, "rules").value_or(0), "rule"),
                       Counts(d.contains("verdicts") ? d["verdicts"] : json()));
  }
  if (type == "architect.pick") return fmt::format("{} {}", type, rule) + Colon(Str(d, "approach"));
  if (type == "architect.skip") return fmt::format("{} {}", type, rule) + Colon(Str(d, "reason"));
  if (type == "architect.fallback") {
    return fmt::format("{} {}: no usable answer, following the rule's fix text", type, rule) +
           (Str(d, "error").empty() ? "" : " (" + OneLine(Str(d, "error"), kTextChars) + ")");
  }
  if (type == "architect.reengage") {
    std::string verdict = Str(d, "verdict");
    return fmt::format("{} {}{}", type, rule, verdict.empty() ? "" : " " + verdict) + Colon(Str(d, "reasoning"));
  }
  if (type == "rule.started") {
    uint64_t made = Num(d, "attempts_made").value_or(0);
    return fmt::format("{} {}{}", type, rule, made > 0 ? fmt::format(" ({} made before)", Plural(made, "attempt")) : "");
  }
  if (type == "rule.fixed" && Flag(d, "after_reboot")) {
    return fmt::format("{} {} after the reboot (OpenSCAP: {})", type, rule, Str(d, "verdict"));
  }
  if (type == "rule.fixed" || type == "rule.reboot_pending") {
    std::string out = fmt::format("{} {}", type, rule);
    if (std::optional<uint64_t> n = Num(d, "attempts")) out += " after " + Plural(*n, "attempt");
    if (std::optional<uint64_t> t = Num(d, "tokens")) out += fmt::format(" ({} tokens)", *t);
    if (type == "rule.reboot_pending") out += ": staged until the host reboots (temper rebooted)";
    return out;
  }
  if (type == "rule.waived") {
    std::string expires = Str(d, "expires");
    return fmt::format("{} {} by {}{}", type, rule, Str(d, "owner"), expires.empty() ? "" : " until " + expires) +
           Colon(Str(d, "reason"));
  }
  if (type == "waiver.expired" || type == "rule.held") return fmt::format("{} {}", type, rule) + Colon(Str(d, "detail"));
  if (type == "rule.manual") return fmt::format("{} {}: no automated check; a person must review it", type, rule);
  if (type == "reboot.confirmed") {
    auto it = d.find("rules");
    size_t n = it != d.end() && it->is_array() ? it->size() : 0;
    return fmt::format("{}: {} to verify", type, Plural(n, "rule")) + Colon(Str(d, "note"));
  }
  if (type == "reboot.verified") {
    return fmt::format("{}: {} fixed, {} escalated", type, Num(d, "fixed").value_or(0), Num(d, "escalated").value_or(0));
  }
  if (type == "reboot.verification_failed") return type + Colon(Str(d, "error"));
  if (type == "rule.escalated" || type == "rule.skipped" || type == "rule.error" || type == "rule.cancelled") {
    return fmt::format("{} {}", type, rule) + Colon(Str(d, "detail"));
  }
  if (type == "attempt.started") {
    return fmt::format("{} {}{}", type, rule, AttemptTag(d, "number")) + Colon(Str(d, "approach"));
  }
  if (type == "attempt.kept" || type == "attempt.reverted") {
    std::string verdict = Str(d, "verdict"), outcome = Str(d, "outcome");
    std::string what = type == "attempt.kept" ? "kept" : outcome.empty() ? "reverted" : outcome;
    if (!verdict.empty()) what += ", rule " + verdict;
    std::string changes = Str(d, "changes");
    return fmt::format("{} {}{}: {}", type, rule, AttemptTag(d, "number"), what) + Colon(Str(d, "summary")) +
           (changes.empty() ? "" : " [changed: " + changes + "]");
  }
  if (type == "worker.model_call") {
    std::optional<uint64_t> ms = Num(d, "latency_ms");
    return fmt::format("{} {}{}{}", type, rule, AttemptTag(d, "attempt"),
                       ms ? fmt::format(" ({:.1f} s)", static_cast<double>(*ms) / 1000.0) : "");
  }
  if (type == "worker.tool_call" || type == "worker.refused") {
    std::string tool = Str(d, "tool");
    std::string arg = ToolArgument(tool, d.contains("arguments") ? d["arguments"] : json());
    std::string detail = Str(d, "detail");
    std::string out = fmt::format("{} {}{} {}", type, rule, AttemptTag(d, "attempt"), tool.empty() ? "?" : tool);
    if (!arg.empty()) out += ": " + OneLine(arg, kTextChars);
    if (tool == "finish" || detail.empty()) return out;
    return out + (type == "worker.refused" ? " — " + OneLine(detail, kTextChars)
                                           : " → " + OneLine(detail, kToolResultChars));
  }
  if (type == "worker.unusable_answer" || type == "worker.elided") {
    return fmt::format("{} {}{}", type, rule, AttemptTag(d, "attempt")) + Colon(Str(d, "detail"));
  }
  if (type == "reflector.lesson") {
    return fmt::format("{} {}{}", type, rule, AttemptTag(d, "number")) + Colon(Str(d, "lesson"));
  }
  if (type == "reflector.failed") {
    return fmt::format("{} {}{}", type, rule, AttemptTag(d, "number")) + Colon(Str(d, "error"));
  }
  if (type == "rule.requeued") return fmt::format("{} {}", type, rule) + Colon(Str(d, "detail"));
  if (type == "fixpoint.pass") {
    std::string out = fmt::format("{} {} of at most {}: {}", type, Num(d, "pass").value_or(0),
                                  Num(d, "max_passes").value_or(0), Counts(d.contains("verdicts") ? d["verdicts"] : json()));
    size_t requeued = d.contains("requeued") && d["requeued"].is_array() ? d["requeued"].size() : 0;
    size_t escalated = d.contains("escalated") && d["escalated"].is_array() ? d["escalated"].size() : 0;
    if (requeued > 0) out += fmt::format("; {} re-queued", Plural(requeued, "rule"));
    if (escalated > 0) out += fmt::format("; {} escalated, still flipping", Plural(escalated, "rule"));
    return out;
  }
  if (type == "batch.plan_reverted") {
    return fmt::format("{}: plan only, target back at snapshot {}", type, Num(d, "start_snapshot").value_or(0));
  }
  if (type == "batch.reverted") {
    return fmt::format("{}: target back at snapshot {}", type, Num(d, "restored_snapshot").value_or(0));
  }
  if (type == "rule.reverted") return fmt::format("{} {}: now {}", type, rule, Str(d, "verdict"));
  if (type == "prompt.trimmed") {
    std::string sections;
    auto it = d.find("sections");
    if (it != d.end() && it->is_array()) {
      for (const json& s : *it) {
        if (!s.is_object()) continue;
        sections += fmt::format("{}{} {}→{} tokens", sections.empty() ? "" : ", ", Str(s, "name"),
                                Num(s, "tokens").value_or(0), Num(s, "kept_tokens").value_or(0));
      }
    }
    return fmt::format("{}{}", type, rule.empty() ? "" : " " + rule) + Colon(sections);
  }
  return std::nullopt;
}

}  // namespace

std::string DescribeEvent(const temper::v1::JournalEvent& e) {
  json data = json::parse(e.data_json().empty() ? "{}" : e.data_json(), nullptr, /*allow_exceptions=*/false);
  if (data.is_object()) {
    if (std::optional<std::string> known = Describe(e, data)) return *known;
  }
  std::string out = e.type();
  if (!e.rule_id().empty()) out += " " + e.rule_id();
  if (!e.data_json().empty() && e.data_json() != "{}") out += "  " + e.data_json();
  return out;
}

std::string RenderEvent(const temper::v1::JournalEvent& e) {
  std::string out = fmt::format("{:>6}  {}  ", e.seq(), FormatTime(e.time()));
  out += e.batch_id().empty() ? "-" : "batch " + e.batch_id();
  if (!e.role().empty()) out += "  [" + e.role() + "]";
  out += "  " + DescribeEvent(e);
  if (e.usage().prompt_tokens() + e.usage().completion_tokens() > 0) {
    out += fmt::format("  ({} + {} tokens)", e.usage().prompt_tokens(), e.usage().completion_tokens());
  }
  return out + "\n";
}

}  // namespace temper::cli
