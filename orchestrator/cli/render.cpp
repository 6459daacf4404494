#include "orchestrator/cli/render.h"

#include <algorithm>
#include <cctype>
#include <vector>

#include <fmt/format.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/time_util.h>
#include <nlohmann/json.hpp>

#include "orchestrator/config/waivers.h"

namespace temper::cli {

namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

}  // namespace

std::string FormatTime(const google::protobuf::Timestamp& t) {
  if (t.seconds() == 0 && t.nanos() == 0) return "-";
  std::string iso = google::protobuf::util::TimeUtil::ToString(t);  // 2026-11-22T21:50:01.123Z
  if (iso.size() > 19) iso = iso.substr(0, 19) + "Z";
  std::replace(iso.begin(), iso.end(), 'T', ' ');
  return iso;
}

std::string FormatDuration(int64_t seconds) {
  if (seconds < 0) seconds = 0;
  if (seconds < 60) return fmt::format("{}s", seconds);
  if (seconds < 3600) return fmt::format("{}m {:02}s", seconds / 60, seconds % 60);
  return fmt::format("{}h {:02}m {:02}s", seconds / 3600, seconds / 60 % 60, seconds % 60);
}

std::string Table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()));
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += i + 1 < row.size() ? fmt::format("{:<{}}  ", row[i], width[i]) : row[i];
    }
    out += line + "\n";
  }
  return out;
}

std::string WaiverStatus::Describe() const {
  switch (kind) {
    case Kind::kApplied:
      return "applied";
    case Kind::kExpired:
      return "EXPIRED: remediated as usual";
    case Kind::kPending:
      return "not evaluated yet";
    case Kind::kNotInBatch:
      return "rule not in this batch";
  }
  return "?";
}

std::vector<WaiverStatus> WaiverStatuses(const temper::v1::Batch& batch) {
  std::vector<WaiverStatus> out;
  for (const temper::v1::Waiver& w : batch.waivers()) {
    // A whole-profile batch holds its rules once the profile is expanded.
    bool unexpanded = batch.whole_profile() && batch.rules().empty();
    WaiverStatus s{.waiver = &w, .kind = unexpanded ? WaiverStatus::Kind::kPending : WaiverStatus::Kind::kNotInBatch};
    for (const temper::v1::BatchRule& r : batch.rules()) {
      if (r.rule_id() != w.rule_id()) continue;
      s.kind = r.state() == temper::v1::RULE_STATE_WAIVED ? WaiverStatus::Kind::kApplied
               : r.before_verdict().empty()               ? WaiverStatus::Kind::kPending
                                                          : WaiverStatus::Kind::kExpired;
    }
    out.push_back(s);
  }
  return out;
}

std::string ExpiryText(const temper::v1::Waiver& w) {
  if (!w.has_expires_at()) return "no expiry";
  return "until " + FormatExpiry(w.expires_at().seconds() * 1000 + w.expires_at().nanos() / 1000000);
}

std::string OptionsLine(const temper::v1::Batch& b) {
  std::vector<std::string> parts;
  if (b.allow_disruptive()) parts.push_back("disruptive changes allowed");
  if (b.plan_only()) parts.push_back("plan only");
  if (b.parallel_attempts() > 1) parts.push_back(fmt::format("{} attempts at once", b.parallel_attempts()));
  if (b.waivers_size() > 0) {
    size_t expired = 0;
    for (const WaiverStatus& s : WaiverStatuses(b)) expired += s.kind == WaiverStatus::Kind::kExpired;
    parts.push_back(fmt::format("{} waiver{}{}", b.waivers_size(), b.waivers_size() == 1 ? "" : "s",
                                expired ? fmt::format(" ({} EXPIRED)", expired) : ""));
  }
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : " · ") + p;
  return out;
}

std::string StateName(temper::v1::BatchState state) {
  return Lower(temper::v1::BatchState_Name(state).substr(std::string("BATCH_STATE_").size()));
}

std::string StateName(temper::v1::RuleState state) {
  return Lower(temper::v1::RuleState_Name(state).substr(std::string("RULE_STATE_").size()));
}

std::string RenderBatchTable(const temper::v1::ListBatchesResponse& list) {
  if (list.batches().empty()) return "no batches\n";
  std::vector<std::vector<std::string>> rows = {
      {"ID", "STATE", "TARGET", "PROFILE", "RULES", "FIXED", "ESCALATED", "LEFT", "CREATED", "NAME"}};
  for (const temper::v1::Batch& b : list.batches()) {
    const temper::v1::RuleCounts& c = b.counts();
    rows.push_back({b.id(), StateName(b.state()), b.target(), b.profile(),
                    b.whole_profile() && c.total() == 0 ? "profile" : std::to_string(c.total()),
                    std::to_string(c.fixed()), std::to_string(c.escalated()), std::to_string(c.pending() + c.running()),
                    FormatTime(b.created_at()), b.name()});
  }
  std::string out = Table(rows);
  // Why queued batches have not started, each reason once ("batches 2, 1 wait: no model is ...").
  std::vector<std::pair<std::string, std::vector<std::string>>> waiting;
  for (const temper::v1::Batch& b : list.batches()) {
    if (b.waiting_reason().empty()) continue;
    auto same =
        std::find_if(waiting.begin(), waiting.end(), [&](const auto& w) { return w.first == b.waiting_reason(); });
    if (same == waiting.end()) same = waiting.insert(waiting.end(), {b.waiting_reason(), {}});
    same->second.push_back(b.id());
  }
  for (const auto& [reason, ids] : waiting) {
    out += fmt::format("batch{} {} wait{}: {}\n", ids.size() == 1 ? "" : "es", fmt::join(ids, ", "),
                       ids.size() == 1 ? "s" : "", reason);
  }
  if (!list.next_page_token().empty()) out += fmt::format("(more: --page-token {})\n", list.next_page_token());
  return out;
}

std::string RenderBatchDetail(const temper::v1::Batch& b) {
  const temper::v1::RuleCounts& c = b.counts();
  std::string out;
  out += fmt::format("batch {}{}\n", b.id(), b.name().empty() ? "" : fmt::format(" ({})", b.name()));
  out += fmt::format("  state       {}\n", StateName(b.state()));
  if (!b.waiting_reason().empty()) out += fmt::format("  waiting     {}\n", b.waiting_reason());
  if (!b.error().empty()) out += fmt::format("  reason      {}\n", b.error());
  out += fmt::format("  target      {}\n", b.target());
  out += fmt::format("  datastream  {}\n", b.datastream());
  out += fmt::format("  profile     {}{}\n", b.profile(), b.whole_profile() ? " (every rule)" : "");
  out += fmt::format("  budgets     {} attempts, {}s, {} tokens per rule\n", b.budgets().max_attempts(),
                     b.budgets().wall_time_seconds(), b.budgets().max_tokens());
  out += fmt::format("  created     {}\n", FormatTime(b.created_at()));
  out += fmt::format("  updated     {}\n", FormatTime(b.updated_at()));
  out += fmt::format(
      "  rules       {} total: {} fixed, {} already passing, {} escalated, {} skipped, "
      "{} error, {} cancelled, {} left\n",
      c.total(), c.fixed(), c.already_passing(), c.escalated(), c.skipped(), c.error(), c.cancelled(),
      c.pending() + c.running());
  std::string policy;
  for (const auto& [n, name] : {std::pair{c.reboot_pending(), "reboot pending"}, std::pair{c.waived(), "waived"},
                                std::pair{c.held(), "held (disruptive)"}, std::pair{c.manual(), "manual"}}) {
    if (n > 0) policy += fmt::format("{}{} {}", policy.empty() ? "" : ", ", n, name);
  }
  if (!policy.empty()) out += fmt::format("              {} (none of these counts as pass)\n", policy);
  out += fmt::format("  options     {}\n",
                     b.allow_disruptive() || b.plan_only() || b.parallel_attempts() > 1 || b.waivers_size() > 0
                         ? OptionsLine(b)
                         : "none (disruptive rules are held)");
  if (b.reboot_confirmed_seq() != 0) {
    out += fmt::format("  reboot      confirmed (journal seq {}): the reboot_pending rules are being verified\n",
                       b.reboot_confirmed_seq());
  }
  if (b.waivers_size() > 0) {
    std::vector<std::vector<std::string>> rows = {{"  WAIVED RULE", "STATUS", "OWNER", "EXPIRY", "REASON"}};
    for (const WaiverStatus& s : WaiverStatuses(b)) {
      rows.push_back({"  " + ShortRuleName(s.waiver->rule_id()), s.Describe(), s.waiver->owner(), ExpiryText(*s.waiver),
                      OneLine(s.waiver->reason(), 100)});
    }
    out += "\n" + Table(rows);
  }
  if (b.rules_size() > 0) {
    std::vector<std::vector<std::string>> rows = {{"  RULE", "STATE", "ATTEMPTS", "TOKENS", "DETAIL"}};
    for (const temper::v1::BatchRule& r : b.rules()) {
      rows.push_back({"  " + r.rule_id(), StateName(r.state()), std::to_string(r.attempts()),
                      std::to_string(r.tokens_used()), r.detail()});
    }
    out += "\n" + Table(rows);
  }
  return out;
}

std::string RenderJson(const google::protobuf::Message& message) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  return json + "\n";
}

std::string RenderEventJson(const temper::v1::JournalEvent& event) {
  temper::v1::JournalEvent without_data = event;
  without_data.clear_data_json();
  std::string base = RenderJson(without_data);
  nlohmann::json out = nlohmann::json::parse(base, nullptr, /*allow_exceptions=*/false);
  nlohmann::json data = nlohmann::json::parse(event.data_json(), nullptr, /*allow_exceptions=*/false);
  if (out.is_discarded()) return base;
  out["data"] = data.is_discarded() ? nlohmann::json(event.data_json()) : data;
  return out.dump() + "\n";
}

}  // namespace temper::cli
