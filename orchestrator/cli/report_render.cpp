#include "orchestrator/cli/report_render.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <google/protobuf/util/time_util.h>
#include <nlohmann/json.hpp>

#include "orchestrator/cli/render.h"
#include "orchestrator/records.h"

namespace temper::cli {

const char* const kReportJsonFields = R"(JSON output (--format json): one object.
  batch_id, name, target, datastream, profile, whole_profile, state,
  error (why the batch failed, or the reason it was cancelled with),
  created_at, updated_at (RFC 3339 or null), budgets {max_attempts, wall_time_seconds, max_tokens},
  results_dir (the last evaluation's: before the fixes until the batch completes), results {xccdf, arf} (paths, or null),
  allow_disruptive, plan_only, parallel_attempts (attempts at once, 1: serial),
  waivers [{rule_id, name, reason, owner, expires_at (RFC 3339 or null),
            status (applied, expired: the rule was remediated as usual, pending, not_in_batch)}],
  summary {has_run, rules, pending, running, fixed, already_passing, escalated, skipped,
           cancelled, error, waived, manual, reboot_pending, held, reverted, failed_before, fix_rate
           (fixed / failed_before, null when none failed), tokens, attempts, wall_time_seconds},
  rules [{rule_id, name, state, before_verdict, after_verdict, attempts, tokens, detail,
          fix_commands (the kept attempt's commands, [] when not fixed),
          lessons [{id, text, utility, created_at, target_class, target, learnt_by, provenance}],
          history [{number, approach, commands, verdict, outcome, evidence, reflection,
                    usage {prompt_tokens, completion_tokens, cached_prompt_tokens},
                    started_at, finished_at}]}],
  plan_only (every change was reverted at the end), reverted_at (RFC 3339 or null),
  fixpoint [{pass, final, attempts, fixed, rescanned, passing, failing, flipped, requeued, escalated}],
  role_usage [{role, calls, prompt_tokens, cached_prompt_tokens, completion_tokens}] (the batch's model calls per role),
  library {tried, kept, tokens_saved} (rules whose first attempt replayed the library's proven fix, those it
  fixed, and the model tokens those fixes had cost to find)
Verdicts are OpenSCAP's (pass, fail, error, notapplicable, ...; "" when not evaluated); states
are pending, running, fixed, already_passing, escalated, skipped, cancelled, error, reverted (a
fix `temper revert` took back out), and
waived (a waiver kept it out of remediation), manual (no automated check), held (disruptive and the
batch did not allow disruptive changes), reboot_pending (fixed, staged until `temper rebooted`);
none of these four counts as pass.)";

namespace {

using ordered_json = nlohmann::ordered_json;

// Approaches and lessons in tables and attempt lists; the sections and JSON carry the full text.
constexpr size_t kLineChars = 100;

uint64_t Tokens(const temper::v1::TokenUsage& u) { return u.prompt_tokens() + u.completion_tokens(); }

// "41,200": a count people read at a glance.
std::string Grouped(uint64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// "3 of 4 rules fixed from proven fixes, 41,200 model tokens saved"; "" when the library was not
// tried in the batch.
std::string LibraryLine(const temper::v1::LibraryUse& library) {
  if (library.tried() == 0) return "";
  return fmt::format("{} of {} rule{} fixed from proven fixes, {} model tokens saved", library.kept(), library.tried(),
                     library.tried() == 1 ? "" : "s", Grouped(library.tokens_saved()));
}

std::string Verdict(const std::string& v) { return v.empty() ? "-" : v; }

std::string Percent(double rate) { return fmt::format("{:.0f}%", rate * 100.0); }

int64_t Seconds(const google::protobuf::Timestamp& from, const google::protobuf::Timestamp& to) {
  return google::protobuf::util::TimeUtil::DurationToSeconds(to - from);
}

void Tally(temper::v1::RuleState state, temper::v1::RuleCounts& c) {
  switch (state) {
    case temper::v1::RULE_STATE_PENDING:
      c.set_pending(c.pending() + 1);
      break;
    case temper::v1::RULE_STATE_RUNNING:
      c.set_running(c.running() + 1);
      break;
    case temper::v1::RULE_STATE_FIXED:
      c.set_fixed(c.fixed() + 1);
      break;
    case temper::v1::RULE_STATE_ALREADY_PASSING:
      c.set_already_passing(c.already_passing() + 1);
      break;
    case temper::v1::RULE_STATE_ESCALATED:
      c.set_escalated(c.escalated() + 1);
      break;
    case temper::v1::RULE_STATE_SKIPPED:
      c.set_skipped(c.skipped() + 1);
      break;
    case temper::v1::RULE_STATE_CANCELLED:
      c.set_cancelled(c.cancelled() + 1);
      break;
    case temper::v1::RULE_STATE_ERROR:
      c.set_error(c.error() + 1);
      break;
    case temper::v1::RULE_STATE_WAIVED:
      c.set_waived(c.waived() + 1);
      break;
    case temper::v1::RULE_STATE_MANUAL:
      c.set_manual(c.manual() + 1);
      break;
    case temper::v1::RULE_STATE_REBOOT_PENDING:
      c.set_reboot_pending(c.reboot_pending() + 1);
      break;
    case temper::v1::RULE_STATE_HELD:
      c.set_held(c.held() + 1);
      break;
    case temper::v1::RULE_STATE_REVERTED:
      c.set_reverted(c.reverted() + 1);
      break;
    default:
      break;
  }
  c.set_total(c.total() + 1);
}

// "2 fixed, 3 already passing, 1 escalated": the states that have rules, in the loop's order.
std::string CountsSentence(const temper::v1::RuleCounts& c) {
  const std::pair<uint32_t, const char*> parts[] = {
      {c.fixed(), "fixed"},         {c.already_passing(), "already passing"},
      {c.escalated(), "escalated"}, {c.reboot_pending(), "reboot pending"},
      {c.waived(), "waived"},       {c.held(), "held (disruptive)"},
      {c.manual(), "manual"},       {c.reverted(), "reverted"},
      {c.skipped(), "skipped"},     {c.error(), "error"},
      {c.cancelled(), "cancelled"}, {c.running(), "running"},
      {c.pending(), "pending"}};
  std::string out;
  for (const auto& [n, name] : parts) {
    if (n > 0) out += fmt::format("{}{} {}", out.empty() ? "" : ", ", n, name);
  }
  return out;
}

std::string RulesLine(const temper::v1::Batch& b, const ReportSummary& s) {
  if (s.counts.total() == 0) {
    return b.whole_profile() ? "every rule of the profile (not expanded yet)" : "none";
  }
  return fmt::format("{}: {}", s.counts.total(), CountsSentence(s.counts));
}

std::string FixRateLine(const ReportSummary& s) {
  if (!s.fix_rate) return s.evaluated ? "- (no rule failed before)" : "- (no rule evaluated yet)";
  return fmt::format("{} of {} rule{} that failed before ({})", s.fixed, s.failed_before,
                     s.failed_before == 1 ? "" : "s", Percent(*s.fix_rate));
}

// Why a batch's report is thin, or nothing when it has run.
std::string NotRunNote(const temper::v1::Batch& b, const ReportSummary& s) {
  if (!s.has_run) {
    return "the batch has not run yet (queued): no verdicts, attempts or results so far";
  }
  if (s.evaluated || s.attempts > 0) return "";
  switch (b.state()) {
    case temper::v1::BATCH_STATE_RUNNING:
      return "no rule has been evaluated yet";
    case temper::v1::BATCH_STATE_CANCELLED:
      return "the batch was cancelled before any rule was evaluated";
    default:
      return fmt::format("the batch {} before any rule was evaluated", StateName(b.state()));
  }
}

// "2 passes: #1 rescanned 5 (4 passing, 1 failing), re-queued 1; #2 rescanned 5 (5 passing)".
// "127 calls, 1,234 prompt tokens (40% from the prefix cache), 567 generated".
std::string RoleUsageText(const temper::v1::RoleUsage& r) {
  const temper::v1::TokenUsage& u = r.usage();
  const double cached = u.prompt_tokens() > 0 ? static_cast<double>(u.cached_prompt_tokens()) / u.prompt_tokens() : 0;
  return fmt::format("{} call{}, {} prompt tokens ({} from the prefix cache), {} generated", r.calls(),
                     r.calls() == 1 ? "" : "s", u.prompt_tokens(), Percent(cached), u.completion_tokens());
}

std::string FixpointLine(const temper::v1::BatchReport& report) {
  std::string out =
      fmt::format("{} pass{}", report.fixpoint_passes_size(), report.fixpoint_passes_size() == 1 ? "" : "es");
  const char* separator = ": ";
  for (const temper::v1::FixpointPass& p : report.fixpoint_passes()) {
    out += fmt::format("{}#{} {} attempt{} ({} kept), rescanned {} ({} passing, {} failing)", separator, p.pass(),
                       p.attempts(), p.attempts() == 1 ? "" : "s", p.fixed(), p.rescanned(), p.passing(), p.failing());
    if (!p.requeued().empty()) out += fmt::format(", re-queued {}", p.requeued_size());
    if (!p.escalated().empty()) out += fmt::format(", escalated {} still flipping", p.escalated_size());
    separator = "; ";
  }
  return out;
}

// Plan-only and reverted batches changed nothing that stays; say so before the numbers.
std::string UndoNote(const temper::v1::Batch& b) {
  if (b.plan_only()) {
    return "plan only: every change was reverted when the batch ended; \"fixed\" means the loop could fix it";
  }
  if (b.has_reverted_at())
    return fmt::format("reverted at {}: the batch's fixes were taken back out", FormatTime(b.reverted_at()));
  return "";
}

std::string OptionsText(const temper::v1::Batch& b) {
  std::string line = OptionsLine(b);
  return line.empty() ? "none (disruptive rules are held)" : line;
}

const char* WaiverStatusName(WaiverStatus::Kind kind) {
  switch (kind) {
    case WaiverStatus::Kind::kApplied:
      return "applied";
    case WaiverStatus::Kind::kExpired:
      return "expired";
    case WaiverStatus::Kind::kPending:
      return "pending";
    case WaiverStatus::Kind::kNotInBatch:
      return "not_in_batch";
  }
  return "?";
}

std::string Title(const temper::v1::Batch& b) {
  return fmt::format("batch {}{}", b.id(), b.name().empty() ? "" : fmt::format(" ({})", b.name()));
}

// Rules worth a section of their own: something was tried, learnt or decided about them.
bool HasStory(const RuleReport& r) { return !r.attempts.empty() || !r.lessons.empty() || !r.rule->detail().empty(); }

std::string Indent(const std::string& text, const std::string& prefix) {
  std::string out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    out += prefix + text.substr(start, end - start) + "\n";
    start = end + 1;
  }
  return out;
}

// ---- Markdown -------------------------------------------------------------------------------------

std::string Cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += "\\|";
    else if (c == '\n') out += "<br>";
    else if (c != '\r') out += c;
  }
  return out;
}

// A fence longer than any run of backticks inside, so commands cannot end the block early.
std::string Fenced(const std::string& text, const std::string& info) {
  size_t longest = 0, run = 0;
  for (char c : text) {
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  std::string fence(std::max<size_t>(3, longest + 1), '`');
  std::string body = text.empty() || text.back() == '\n' ? text : text + "\n";
  return fence + info + "\n" + body + fence + "\n";
}

std::string Code(const std::string& text) {
  return text.find('`') == std::string::npos ? "`" + text + "`" : "`` " + text + " ``";
}

// ---- JSON -----------------------------------------------------------------------------------------

ordered_json TimeJson(const google::protobuf::Timestamp& t) {
  if (t.seconds() == 0 && t.nanos() == 0) return nullptr;
  return google::protobuf::util::TimeUtil::ToString(t);
}

ordered_json Strings(const google::protobuf::RepeatedPtrField<std::string>& list) {
  ordered_json out = ordered_json::array();
  for (const std::string& s : list) out.push_back(s);
  return out;
}

}  // namespace

ReportSummary SummarizeReport(const temper::v1::BatchReport& report) {
  ReportSummary s;
  const temper::v1::Batch& b = report.batch();
  std::map<std::string, size_t> index;
  for (const temper::v1::BatchRule& r : b.rules()) {
    index[r.rule_id()] = s.rules.size();
    s.rules.push_back({.rule = &r});
    Tally(r.state(), s.counts);
    s.tokens += r.tokens_used();
    if (!r.before_verdict().empty()) s.evaluated = true;
    if (r.before_verdict() == "fail") {
      ++s.failed_before;
      if (r.state() == temper::v1::RULE_STATE_FIXED) ++s.fixed;
    }
  }
  for (const temper::v1::Attempt& a : report.attempts()) {
    ++s.attempts;
    auto it = index.find(a.rule_id());
    if (it == index.end()) continue;
    RuleReport& r = s.rules[it->second];
    r.attempts.push_back(&a);
    if (ParseAttemptOutcome(a.outcome()) == AttemptOutcome::kKept) r.fixed_by = &a;
  }
  for (const temper::v1::Lesson& l : report.lessons()) {
    auto it = index.find(l.rule_id());
    if (it != index.end()) s.rules[it->second].lessons.push_back(&l);
  }
  if (s.failed_before > 0) s.fix_rate = static_cast<double>(s.fixed) / s.failed_before;
  s.wall_seconds = std::max<int64_t>(0, Seconds(b.created_at(), b.updated_at()));
  s.has_run = b.state() != temper::v1::BATCH_STATE_QUEUED;
  return s;
}

std::string RenderReportText(const temper::v1::BatchReport& report) {
  const temper::v1::Batch& b = report.batch();
  ReportSummary s = SummarizeReport(report);
  std::string out = fmt::format("{}: {} on target {}\n", Title(b), StateName(b.state()), b.target());
  std::string note = NotRunNote(b, s);
  if (!note.empty()) out += fmt::format("  status      {}\n", note);
  if (!b.error().empty()) out += fmt::format("  reason      {}\n", b.error());
  if (std::string undo = UndoNote(b); !undo.empty()) out += fmt::format("  note        {}\n", undo);
  out += fmt::format("  profile     {} (datastream {})\n", b.profile(), b.datastream());
  out += fmt::format("  rules       {}\n", RulesLine(b, s));
  out += fmt::format("  fix rate    {}\n", FixRateLine(s));
  out += fmt::format("  options     {}\n", OptionsText(b));
  out += fmt::format("  tokens      {} in {} attempt{}\n", s.tokens, s.attempts, s.attempts == 1 ? "" : "s");
  out += fmt::format("  wall time   {} ({} → {})\n", FormatDuration(s.wall_seconds), FormatTime(b.created_at()),
                     FormatTime(b.updated_at()));
  out += fmt::format("  results     {}\n", report.results_dir().empty()
                                               ? "- (written when the batch completes)"
                                               : report.results_dir() + " (results.xml, arf.xml)");
  if (!report.fixpoint_passes().empty()) out += fmt::format("  fixpoint    {}\n", FixpointLine(report));
  for (const temper::v1::RoleUsage& r : report.role_usage()) {
    out += fmt::format("  {:<11} {}\n", r.role(), RoleUsageText(r));
  }
  if (std::string library = LibraryLine(report.library()); !library.empty()) {
    out += fmt::format("  {:<11} {}\n", "library", library);
  }
  if (b.waivers_size() > 0) {
    out += "\nwaivers:\n";
    std::vector<std::vector<std::string>> waivers;
    for (const WaiverStatus& w : WaiverStatuses(b)) {
      waivers.push_back({"  " + ShortRuleName(w.waiver->rule_id()), w.Describe(), w.waiver->owner(),
                         ExpiryText(*w.waiver), OneLine(w.waiver->reason(), kLineChars)});
    }
    out += Table(waivers);
  }
  if (s.rules.empty()) return out;

  std::vector<std::vector<std::string>> rows = {{"RULE", "BEFORE", "AFTER", "STATE", "ATTEMPTS", "TOKENS"}};
  for (const RuleReport& r : s.rules) {
    rows.push_back({ShortRuleName(r.rule->rule_id()), Verdict(r.rule->before_verdict()),
                    Verdict(r.rule->after_verdict()), StateName(r.rule->state()), std::to_string(r.rule->attempts()),
                    std::to_string(r.rule->tokens_used())});
  }
  out += "\n" + Table(rows);

  for (const RuleReport& r : s.rules) {
    if (!HasStory(r)) continue;
    const temper::v1::BatchRule& rule = *r.rule;
    out += fmt::format("\n{}: {}, {} → {}, {} attempt{}, {} tokens\n", ShortRuleName(rule.rule_id()),
                       StateName(rule.state()), Verdict(rule.before_verdict()), Verdict(rule.after_verdict()),
                       rule.attempts(), rule.attempts() == 1 ? "" : "s", rule.tokens_used());
    if (r.fixed_by) {
      out +=
          fmt::format("  fixed by attempt {}: {}\n", r.fixed_by->number(), OneLine(r.fixed_by->approach(), kLineChars));
      if (r.fixed_by->commands().empty()) out += "    (no commands recorded)\n";
      for (const std::string& c : r.fixed_by->commands()) out += Indent(c, "    ");
    }
    if (!rule.detail().empty() && rule.state() != temper::v1::RULE_STATE_FIXED) {
      out += fmt::format("  reason: {}\n", rule.detail());
    }
    if (!r.attempts.empty()) {
      out += "  attempts:\n";
      std::vector<std::vector<std::string>> attempts;
      for (const temper::v1::Attempt* a : r.attempts) {
        attempts.push_back({fmt::format("    #{}", a->number()), a->outcome(), Verdict(a->verdict()),
                            fmt::format("{} tokens", Tokens(a->usage())), OneLine(a->approach(), kLineChars)});
      }
      out += Table(attempts);
    }
    if (!r.lessons.empty()) {
      out += "  lessons:\n";
      for (const temper::v1::Lesson* l : r.lessons) {
        out += "    - " + OneLine(l->text(), 400) + "\n      (" + l->provenance() + ")\n";
      }
    }
  }
  return out;
}

std::string RenderReportMarkdown(const temper::v1::BatchReport& report) {
  const temper::v1::Batch& b = report.batch();
  ReportSummary s = SummarizeReport(report);
  std::string out = fmt::format("# temper report: {}, {}\n\n", Title(b), StateName(b.state()));
  std::string note = NotRunNote(b, s);
  if (!note.empty()) out += fmt::format("> **Note:** {}.\n\n", note);
  out += "| | |\n|---|---|\n";
  out += fmt::format("| Target | {} |\n", Cell(b.target()));
  out += fmt::format("| Profile | {} |\n", Code(b.profile()));
  out += fmt::format("| Datastream | {} |\n", Code(b.datastream()));
  if (!b.error().empty()) out += fmt::format("| Reason | {} |\n", Cell(b.error()));
  if (std::string undo = UndoNote(b); !undo.empty()) out += fmt::format("| Note | {} |\n", Cell(undo));
  out += fmt::format("| Rules | {} |\n", Cell(RulesLine(b, s)));
  out += fmt::format("| Fix rate | {} |\n", Cell(FixRateLine(s)));
  out += fmt::format("| Options | {} |\n", Cell(OptionsText(b)));
  out += fmt::format("| Tokens | {} in {} attempt{} |\n", s.tokens, s.attempts, s.attempts == 1 ? "" : "s");
  for (const temper::v1::RoleUsage& r : report.role_usage()) {
    out += fmt::format("| Model calls, {} | {} |\n", Cell(r.role()), Cell(RoleUsageText(r)));
  }
  if (std::string library = LibraryLine(report.library()); !library.empty()) {
    out += fmt::format("| Library | {} |\n", Cell(library));
  }
  out += fmt::format("| Wall time | {} ({} → {}) |\n", FormatDuration(s.wall_seconds), FormatTime(b.created_at()),
                     FormatTime(b.updated_at()));
  out += fmt::format("| Results | {} |\n", report.results_dir().empty()
                                               ? "written when the batch completes"
                                               : Code(report.results_dir()) + " (`results.xml`, `arf.xml`)");
  if (!report.fixpoint_passes().empty()) out += fmt::format("| Fixpoint | {} |\n", Cell(FixpointLine(report)));
  if (b.waivers_size() > 0) {
    out += "\n## Waivers\n\n| Rule | Status | Owner | Expiry | Reason |\n|---|---|---|---|---|\n";
    for (const WaiverStatus& w : WaiverStatuses(b)) {
      std::string status = w.Describe();
      if (w.kind == WaiverStatus::Kind::kExpired) status = "**" + status + "**";
      out += fmt::format("| {} | {} | {} | {} | {} |\n", Code(ShortRuleName(w.waiver->rule_id())), Cell(status),
                         Cell(w.waiver->owner()), ExpiryText(*w.waiver), Cell(w.waiver->reason()));
    }
  }
  if (s.rules.empty()) return out;

  out +=
      "\n## Rules\n\n| Rule | Before | After | State | Attempts | Tokens | Note |\n"
      "|---|---|---|---|---:|---:|---|\n";
  for (const RuleReport& r : s.rules) {
    const temper::v1::BatchRule& rule = *r.rule;
    out += fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", Code(ShortRuleName(rule.rule_id())),
                       Verdict(rule.before_verdict()), Verdict(rule.after_verdict()), StateName(rule.state()),
                       rule.attempts(), rule.tokens_used(), Cell(OneLine(rule.detail(), kLineChars)));
  }

  for (const RuleReport& r : s.rules) {
    if (!HasStory(r)) continue;
    const temper::v1::BatchRule& rule = *r.rule;
    out += fmt::format("\n## {}: {}\n\n", Code(ShortRuleName(rule.rule_id())), StateName(rule.state()));
    out += fmt::format("{}: before **{}**, after **{}**; {} attempt{}, {} tokens.\n", Code(rule.rule_id()),
                       Verdict(rule.before_verdict()), Verdict(rule.after_verdict()), rule.attempts(),
                       rule.attempts() == 1 ? "" : "s", rule.tokens_used());
    if (r.fixed_by) {
      out += fmt::format("\nFixed by attempt {} ({}):\n\n", r.fixed_by->number(),
                         OneLine(r.fixed_by->approach(), kLineChars));
      std::string commands;
      for (const std::string& c : r.fixed_by->commands()) commands += c + "\n";
      out += commands.empty() ? "(no commands recorded)\n" : Fenced(commands, "sh");
    }
    if (!rule.detail().empty() && rule.state() != temper::v1::RULE_STATE_FIXED) {
      out += fmt::format("\n**Why {}:** {}\n", StateName(rule.state()), rule.detail());
    }
    if (!r.lessons.empty()) {
      out += "\n**Lessons**\n\n";
      for (const temper::v1::Lesson* l : r.lessons) {
        out += "- " + OneLine(l->text(), 1000) + " *(" + l->provenance() + ")*\n";
      }
    }
    if (!r.attempts.empty()) {
      out += "\n**Attempts**\n\n| # | Outcome | Verdict | Tokens | Approach |\n|---:|---|---|---:|---|\n";
      for (const temper::v1::Attempt* a : r.attempts) {
        out += fmt::format("| {} | {} | {} | {} | {} |\n", a->number(), Cell(a->outcome()), Verdict(a->verdict()),
                           Tokens(a->usage()), Cell(OneLine(a->approach(), kLineChars)));
      }
      for (const temper::v1::Attempt* a : r.attempts) {
        if (a->commands().empty() && a->evidence().empty() && a->reflection().empty()) continue;
        out += fmt::format("\n<details><summary>Attempt {}: {}</summary>\n\n", a->number(), Cell(a->outcome()));
        std::string commands;
        for (const std::string& c : a->commands()) commands += c + "\n";
        if (!commands.empty()) out += "Commands:\n\n" + Fenced(commands, "sh") + "\n";
        if (!a->evidence().empty()) out += "Evaluator:\n\n" + Fenced(a->evidence(), "") + "\n";
        if (!a->reflection().empty()) out += "Reflection:\n\n" + Fenced(a->reflection(), "") + "\n";
        out += "</details>\n";
      }
    }
  }
  return out;
}

std::string RenderReportJson(const temper::v1::BatchReport& report) {
  const temper::v1::Batch& b = report.batch();
  ReportSummary s = SummarizeReport(report);
  ordered_json j;
  j["batch_id"] = b.id();
  j["name"] = b.name();
  j["target"] = b.target();
  j["datastream"] = b.datastream();
  j["profile"] = b.profile();
  j["whole_profile"] = b.whole_profile();
  j["state"] = StateName(b.state());
  j["error"] = b.error();
  j["created_at"] = TimeJson(b.created_at());
  j["updated_at"] = TimeJson(b.updated_at());
  j["budgets"] = {{"max_attempts", b.budgets().max_attempts()},
                  {"wall_time_seconds", b.budgets().wall_time_seconds()},
                  {"max_tokens", b.budgets().max_tokens()}};
  j["allow_disruptive"] = b.allow_disruptive();
  j["plan_only"] = b.plan_only();
  j["parallel_attempts"] = b.parallel_attempts();
  ordered_json waivers = ordered_json::array();
  for (const WaiverStatus& w : WaiverStatuses(b)) {
    waivers.push_back(
        {{"rule_id", w.waiver->rule_id()},
         {"name", ShortRuleName(w.waiver->rule_id())},
         {"reason", w.waiver->reason()},
         {"owner", w.waiver->owner()},
         {"expires_at", w.waiver->has_expires_at() ? TimeJson(w.waiver->expires_at()) : ordered_json(nullptr)},
         {"status", WaiverStatusName(w.kind)}});
  }
  j["waivers"] = std::move(waivers);
  j["results_dir"] = report.results_dir();
  j["results"] = report.results_dir().empty() ? ordered_json(nullptr)
                                              : ordered_json{{"xccdf", report.results_dir() + "/results.xml"},
                                                             {"arf", report.results_dir() + "/arf.xml"}};
  const temper::v1::RuleCounts& c = s.counts;
  j["summary"] = {{"has_run", s.has_run},
                  {"rules", c.total()},
                  {"pending", c.pending()},
                  {"running", c.running()},
                  {"fixed", c.fixed()},
                  {"already_passing", c.already_passing()},
                  {"escalated", c.escalated()},
                  {"skipped", c.skipped()},
                  {"cancelled", c.cancelled()},
                  {"error", c.error()},
                  {"waived", c.waived()},
                  {"manual", c.manual()},
                  {"reboot_pending", c.reboot_pending()},
                  {"held", c.held()},
                  {"reverted", c.reverted()},
                  {"failed_before", s.failed_before},
                  {"fix_rate", s.fix_rate ? ordered_json(*s.fix_rate) : ordered_json(nullptr)},
                  {"tokens", s.tokens},
                  {"attempts", s.attempts},
                  {"wall_time_seconds", s.wall_seconds}};
  ordered_json rules = ordered_json::array();
  for (const RuleReport& r : s.rules) {
    const temper::v1::BatchRule& rule = *r.rule;
    ordered_json lessons = ordered_json::array();
    for (const temper::v1::Lesson* l : r.lessons) {
      lessons.push_back({{"id", l->id()},
                         {"text", l->text()},
                         {"utility", l->utility()},
                         {"created_at", TimeJson(l->created_at())},
                         {"target_class", l->target_class()},
                         {"target", l->target()},
                         {"learnt_by", l->learnt_by()},
                         {"provenance", l->provenance()}});
    }
    ordered_json history = ordered_json::array();
    for (const temper::v1::Attempt* a : r.attempts) {
      history.push_back({{"number", a->number()},
                         {"approach", a->approach()},
                         {"commands", Strings(a->commands())},
                         {"verdict", a->verdict()},
                         {"outcome", a->outcome()},
                         {"evidence", a->evidence()},
                         {"reflection", a->reflection()},
                         {"usage",
                          {{"prompt_tokens", a->usage().prompt_tokens()},
                           {"completion_tokens", a->usage().completion_tokens()},
                           {"cached_prompt_tokens", a->usage().cached_prompt_tokens()}}},
                         {"started_at", TimeJson(a->started_at())},
                         {"finished_at", TimeJson(a->finished_at())}});
    }
    rules.push_back({{"rule_id", rule.rule_id()},
                     {"name", ShortRuleName(rule.rule_id())},
                     {"state", StateName(rule.state())},
                     {"before_verdict", rule.before_verdict()},
                     {"after_verdict", rule.after_verdict()},
                     {"attempts", rule.attempts()},
                     {"tokens", rule.tokens_used()},
                     {"detail", rule.detail()},
                     {"fix_commands", r.fixed_by ? Strings(r.fixed_by->commands()) : ordered_json::array()},
                     {"lessons", std::move(lessons)},
                     {"history", std::move(history)}});
  }
  j["rules"] = std::move(rules);
  j["plan_only"] = b.plan_only();
  j["reverted_at"] = TimeJson(b.reverted_at());
  ordered_json passes = ordered_json::array();
  for (const temper::v1::FixpointPass& p : report.fixpoint_passes()) {
    passes.push_back({{"pass", p.pass()},
                      {"final", p.final()},
                      {"attempts", p.attempts()},
                      {"fixed", p.fixed()},
                      {"rescanned", p.rescanned()},
                      {"passing", p.passing()},
                      {"failing", p.failing()},
                      {"flipped", Strings(p.flipped())},
                      {"requeued", Strings(p.requeued())},
                      {"escalated", Strings(p.escalated())}});
  }
  j["fixpoint"] = std::move(passes);
  ordered_json roles = ordered_json::array();
  for (const temper::v1::RoleUsage& r : report.role_usage()) {
    roles.push_back({{"role", r.role()},
                     {"calls", r.calls()},
                     {"prompt_tokens", r.usage().prompt_tokens()},
                     {"cached_prompt_tokens", r.usage().cached_prompt_tokens()},
                     {"completion_tokens", r.usage().completion_tokens()}});
  }
  j["role_usage"] = std::move(roles);
  j["library"] = {{"tried", report.library().tried()},
                  {"kept", report.library().kept()},
                  {"tokens_saved", report.library().tokens_saved()}};
  // Replace, not throw, should a byte sequence not be UTF-8 (protobuf strings should be, but this
  // output must never fail half-way).
  return j.dump(-1, ' ', false, ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace temper::cli
