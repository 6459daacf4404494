#include "orchestrator/config/waivers.h"

#include <chrono>
#include <map>
#include <set>

#include <fmt/format.h>

#include "orchestrator/config/batch_request.h"

namespace temper {

namespace {

constexpr TimeMs kMsPerDay = 86'400'000;

bool AllDigits(std::string_view s) {
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return !s.empty();
}

int Number(std::string_view digits) {
  int n = 0;
  for (char c : digits) n = n * 10 + (c - '0');
  return n;
}

bool LooksLikeDate(std::string_view s) {
  return s.size() == 10 && s[4] == '-' && s[7] == '-' && AllDigits(s.substr(0, 4)) && AllDigits(s.substr(5, 2)) &&
         AllDigits(s.substr(8, 2));
}

Status CheckText(std::string_view what, std::string_view text, size_t max) {
  if (text.empty()) return Status::InvalidArgument(fmt::format("{}: required", what));
  if (text.size() > max) {
    return Status::InvalidArgument(fmt::format("{}: {} characters; at most {}", what, text.size(), max));
  }
  return Status::OK();
}

}  // namespace

Result<TimeMs> ParseExpiryDate(std::string_view text) {
  if (!LooksLikeDate(text)) {
    return Status::InvalidArgument(fmt::format("'{}' is not a date: expected YYYY-MM-DD, e.g. 2027-01-31", text));
  }
  using namespace std::chrono;
  year_month_day day{year(Number(text.substr(0, 4))), month(static_cast<unsigned>(Number(text.substr(5, 2)))),
                     std::chrono::day(static_cast<unsigned>(Number(text.substr(8, 2))))};
  if (!day.ok() || day.year() < year(1970)) {
    return Status::InvalidArgument(fmt::format("'{}' is not a calendar date after 1970", text));
  }
  return static_cast<TimeMs>(sys_days(day).time_since_epoch().count()) * kMsPerDay;
}

std::string FormatExpiry(TimeMs expires_at) {
  using namespace std::chrono;
  sys_days day(days(expires_at / kMsPerDay));  // expiries are after 1970 (SubmitBatch checks)
  year_month_day ymd(day);
  std::string date = fmt::format("{:04}-{:02}-{:02}", static_cast<int>(ymd.year()), static_cast<unsigned>(ymd.month()),
                                 static_cast<unsigned>(ymd.day()));
  TimeMs in_day = expires_at - static_cast<TimeMs>(day.time_since_epoch().count()) * kMsPerDay;
  if (in_day == 0) return date;
  TimeMs s = in_day / 1000;
  return fmt::format("{} {:02}:{:02}:{:02}Z", date, s / 3600, s / 60 % 60, s % 60);
}

Result<Waiver> ParseWaiverFlag(std::string_view spec) {
  auto bad = [&](std::string_view why) {
    return Status::InvalidArgument(
        fmt::format("--waive '{}': {} (expected RULE:REASON:OWNER[:YYYY-MM-DD])", spec, why));
  };
  size_t first = spec.find(':');
  if (first == std::string_view::npos) return bad("no reason or owner");
  std::string_view rest = spec.substr(first + 1);
  Waiver w;
  size_t last = rest.rfind(':');
  if (last != std::string_view::npos && LooksLikeDate(rest.substr(last + 1))) {
    Result<TimeMs> expires = ParseExpiryDate(rest.substr(last + 1));
    if (!expires.ok()) return bad(expires.status().message());
    w.expires_at = *expires;
    rest = rest.substr(0, last);
  }
  last = rest.rfind(':');
  if (last == std::string_view::npos) return bad("no owner");
  Result<std::string> id = NormalizeRuleId(spec.substr(0, first));
  if (!id.ok()) return bad(id.status().message());
  w.rule_id = *id;
  w.reason = std::string(rest.substr(0, last));
  w.owner = std::string(rest.substr(last + 1));
  Status reason = CheckText("reason", w.reason, kMaxWaiverReason);
  if (!reason.ok()) return bad(reason.message());
  Status owner = CheckText("owner", w.owner, kMaxWaiverOwner);
  if (!owner.ok()) return bad(owner.message());
  return w;
}

Result<std::vector<Waiver>> ParseWaiverList(const YamlNode& node) {
  TEMPER_ASSIGN_OR_RETURN(std::vector<YamlNode> items, node.Items());
  std::vector<Waiver> out;
  std::map<std::string, std::string> seen;  // rule id → the entry's path
  for (const YamlNode& item : items) {
    TEMPER_RETURN_IF_ERROR(item.ExpectMapWithKeys({"rule", "reason", "owner", "expires"}));
    Waiver w;
    TEMPER_ASSIGN_OR_RETURN(YamlNode rule, item.Require("rule"));
    TEMPER_ASSIGN_OR_RETURN(std::string written, rule.AsString());
    Result<std::string> id = NormalizeRuleId(written);
    if (!id.ok()) return rule.Error(id.status().message());
    w.rule_id = *id;
    auto [at, inserted] = seen.emplace(w.rule_id, item.path());
    if (!inserted) return rule.Error(fmt::format("'{}' is already waived by {}", written, at->second));
    TEMPER_ASSIGN_OR_RETURN(YamlNode reason, item.Require("reason"));
    TEMPER_ASSIGN_OR_RETURN(w.reason, reason.AsString());
    if (w.reason.size() > kMaxWaiverReason) {
      return reason.Error(fmt::format("{} characters; at most {}", w.reason.size(), kMaxWaiverReason));
    }
    TEMPER_ASSIGN_OR_RETURN(YamlNode owner, item.Require("owner"));
    TEMPER_ASSIGN_OR_RETURN(w.owner, owner.AsString());
    if (w.owner.size() > kMaxWaiverOwner) {
      return owner.Error(fmt::format("{} characters; at most {}", w.owner.size(), kMaxWaiverOwner));
    }
    if (auto expires = item.Find("expires")) {
      TEMPER_ASSIGN_OR_RETURN(std::string text, expires->AsString());
      Result<TimeMs> at_ms = ParseExpiryDate(text);
      if (!at_ms.ok()) return expires->Error(at_ms.status().message());
      w.expires_at = *at_ms;
    }
    out.push_back(std::move(w));
  }
  return out;
}

std::vector<Waiver> MergeWaivers(const std::vector<Waiver>& configured, const std::vector<Waiver>& batch,
                                 const std::vector<std::string>& rule_ids, bool whole_profile) {
  std::vector<Waiver> out = batch;
  std::set<std::string> waived;
  for (const Waiver& w : batch) waived.insert(w.rule_id);
  std::set<std::string> in_batch(rule_ids.begin(), rule_ids.end());
  for (const Waiver& w : configured) {
    if (waived.count(w.rule_id)) continue;
    if (!whole_profile && !in_batch.count(w.rule_id)) continue;
    out.push_back(w);
  }
  return out;
}

}  // namespace temper
