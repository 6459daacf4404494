#include "orchestrator/cli/render.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/time_util.h>

namespace temper::cli {

namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string Time(const google::protobuf::Timestamp& t) {
  std::string iso = google::protobuf::util::TimeUtil::ToString(t);  // 2026-11-22T21:50:01.123Z
  if (iso.size() > 19) iso = iso.substr(0, 19) + "Z";
  std::replace(iso.begin(), iso.end(), 'T', ' ');
  return iso;
}

// Left-aligned columns, as wide as their widest cell.
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

}  // namespace

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
                    std::to_string(c.fixed()), std::to_string(c.escalated()),
                    std::to_string(c.pending() + c.running()), Time(b.created_at()), b.name()});
  }
  std::string out = Table(rows);
  if (!list.next_page_token().empty()) out += fmt::format("(more: --page-token {})\n", list.next_page_token());
  return out;
}

std::string RenderBatchDetail(const temper::v1::Batch& b) {
  const temper::v1::RuleCounts& c = b.counts();
  std::string out;
  out += fmt::format("batch {}{}\n", b.id(), b.name().empty() ? "" : fmt::format(" ({})", b.name()));
  out += fmt::format("  state       {}\n", StateName(b.state()));
  if (!b.error().empty()) out += fmt::format("  reason      {}\n", b.error());
  out += fmt::format("  target      {}\n", b.target());
  out += fmt::format("  datastream  {}\n", b.datastream());
  out += fmt::format("  profile     {}{}\n", b.profile(), b.whole_profile() ? " (every rule)" : "");
  out += fmt::format("  budgets     {} attempts, {}s, {} tokens per rule\n", b.budgets().max_attempts(),
                     b.budgets().wall_time_seconds(), b.budgets().max_tokens());
  out += fmt::format("  created     {}\n", Time(b.created_at()));
  out += fmt::format("  updated     {}\n", Time(b.updated_at()));
  out += fmt::format("  rules       {} total: {} fixed, {} already passing, {} escalated, {} skipped, "
                     "{} error, {} cancelled, {} left\n",
                     c.total(), c.fixed(), c.already_passing(), c.escalated(), c.skipped(), c.error(),
                     c.cancelled(), c.pending() + c.running());
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

std::string RenderEvent(const temper::v1::JournalEvent& e) {
  std::string out = fmt::format("{:>6}  {}  ", e.seq(), Time(e.time()));
  out += e.batch_id().empty() ? "-" : "batch " + e.batch_id();
  if (!e.rule_id().empty()) out += "  " + e.rule_id();
  if (!e.role().empty()) out += "  [" + e.role() + "]";
  out += "  " + e.type();
  if (!e.data_json().empty() && e.data_json() != "{}") out += "  " + e.data_json();
  if (e.usage().prompt_tokens() + e.usage().completion_tokens() > 0) {
    out += fmt::format("  ({} + {} tokens)", e.usage().prompt_tokens(), e.usage().completion_tokens());
  }
  return out + "\n";
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
