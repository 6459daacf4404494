#include "orchestrator/config/batch_request.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "common/closest_match.h"
#include "orchestrator/config/request_bounds.h"
#include "orchestrator/config/waivers.h"
#include "stig/scap/content_trust.h"
#include "stig/ssh/ssh_connection.h"

namespace temper {

namespace {

constexpr size_t kMaxRules = 5000;

bool IsIdChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-'; }

bool AllIdChars(std::string_view s) {
  for (char c : s) {
    if (!IsIdChar(c)) return false;
  }
  return !s.empty();
}

// XCCDF 1.2 ids are xccdf_<reverse-DNS namespace>_<kind>_<name>.
bool IsXccdfId(std::string_view id, std::string_view kind) {
  if (id.rfind("xccdf_", 0) != 0) return false;
  std::string marker = fmt::format("_{}_", kind);
  size_t at = id.find(marker, 6);
  return at != std::string_view::npos && at > 6 && AllIdChars(id.substr(6, at - 6)) &&
         AllIdChars(id.substr(at + marker.size()));
}

// An expired waiver is accepted (the report flags it and the rule is remediated as usual), so a
// batch file reused after its waivers lapsed still runs.
Result<std::vector<Waiver>> CheckWaivers(const std::vector<RequestedWaiver>& waivers) {
  std::vector<Waiver> out;
  std::set<std::string> seen;
  for (size_t i = 0; i < waivers.size(); ++i) {
    const RequestedWaiver& w = waivers[i];
    std::string where = fmt::format("waivers[{}]", i);
    Result<std::string> id = NormalizeRuleId(w.rule_id);
    if (!id.ok()) return id.status().WithContext(where + ".rule_id");
    if (!seen.insert(*id).second) {
      return Status::InvalidArgument(fmt::format("{}.rule_id: '{}' is waived twice", where, w.rule_id));
    }
    if (w.reason.empty()) return Status::InvalidArgument(where + ".reason: required (why the risk is accepted)");
    if (w.owner.empty()) return Status::InvalidArgument(where + ".owner: required (who accepted the risk)");
    Waiver waiver{*id, w.reason, w.owner, std::nullopt};
    if (w.has_expires_at) {
      if (w.expires_seconds <= 0 || w.expires_nanos < 0 || w.expires_nanos > 999999999) {
        return Status::InvalidArgument(where + ".expires_at: not a valid time after 1970");
      }
      waiver.expires_at = w.expires_seconds * 1000 + w.expires_nanos / 1000000;
    }
    out.push_back(std::move(waiver));
  }
  return out;
}

Status CheckBudgets(const SubmitRequest& requested, Budgets& out) {
  using R = BudgetRanges;
  if (requested.max_attempts != 0) {
    if (requested.max_attempts < R::kMinAttempts || requested.max_attempts > R::kMaxAttempts) {
      return Status::InvalidArgument(fmt::format("budgets.max_attempts: {} is out of range [{}, {}]",
                                                 requested.max_attempts, R::kMinAttempts, R::kMaxAttempts));
    }
    out.max_attempts = requested.max_attempts;
  }
  if (requested.wall_time_seconds != 0) {
    std::chrono::seconds wall(requested.wall_time_seconds);
    if (wall < R::kMinWallTime || wall > R::kMaxWallTime) {
      return Status::InvalidArgument(fmt::format("budgets.wall_time_seconds: {} is out of range [{}, {}]", wall.count(),
                                                 R::kMinWallTime.count(), R::kMaxWallTime.count()));
    }
    out.wall_time = wall;
  }
  if (requested.max_tokens != 0) {
    if (requested.max_tokens < R::kMinTokens || requested.max_tokens > R::kMaxTokens) {
      return Status::InvalidArgument(fmt::format("budgets.max_tokens: {} is out of range [{}, {}]",
                                                 requested.max_tokens, R::kMinTokens, R::kMaxTokens));
    }
    out.max_tokens = requested.max_tokens;
  }
  return Status::OK();
}

// Every string of the request within its field's bound (request_bounds.h), in the proto's field
// order, as CheckRequestBounds walks other requests.
Status CheckBounds(const SubmitRequest& r) {
  const google::protobuf::Descriptor& request = *temper::v1::SubmitBatchRequest::descriptor();
  const google::protobuf::Descriptor& waiver = *temper::v1::Waiver::descriptor();
  auto within = [](const google::protobuf::Descriptor& message, const char* field, std::string_view path,
                   const std::string& value) { return CheckStringBound(path, *message.FindFieldByName(field), value); };
  TEMPER_RETURN_IF_ERROR(within(request, "target", "target", r.target));
  TEMPER_RETURN_IF_ERROR(within(request, "datastream", "datastream", r.datastream));
  TEMPER_RETURN_IF_ERROR(within(request, "profile", "profile", r.profile));
  for (size_t i = 0; i < r.rule_ids.size(); ++i) {
    TEMPER_RETURN_IF_ERROR(within(request, "rule_ids", fmt::format("rule_ids[{}]", i), r.rule_ids[i]));
  }
  TEMPER_RETURN_IF_ERROR(within(request, "name", "name", r.name));
  TEMPER_RETURN_IF_ERROR(within(request, "request_id", "request_id", r.request_id));
  for (size_t i = 0; i < r.waivers.size(); ++i) {
    const std::string where = fmt::format("waivers[{}].", i);
    TEMPER_RETURN_IF_ERROR(within(waiver, "rule_id", where + "rule_id", r.waivers[i].rule_id));
    TEMPER_RETURN_IF_ERROR(within(waiver, "reason", where + "reason", r.waivers[i].reason));
    TEMPER_RETURN_IF_ERROR(within(waiver, "owner", where + "owner", r.waivers[i].owner));
  }
  return within(request, "host", "host", r.host);
}

// The batch's profile and every rule it names are in the datastream `ids` were read from, so a typo
// is refused at submit: NotFound naming the field, what was asked for as the client wrote it, the
// datastream's file name and the closest ids.
Status CheckIdsInDatastream(const SubmitRequest& request, const NewBatch& batch, const stig::DatastreamIds& ids);

}  // namespace

Result<std::string> NormalizeRuleId(std::string_view id) {
  if (id.size() > kMaxIdentifierBytes) {
    return Status::InvalidArgument(fmt::format("rule id is {} characters; at most {}", id.size(), kMaxIdentifierBytes));
  }
  if (IsXccdfId(id, "rule")) return std::string(id);
  if (id.rfind("xccdf_", 0) == 0) {
    return Status::InvalidArgument(
        fmt::format("'{}' is not an XCCDF rule id (expected xccdf_<namespace>_rule_<name>)", id));
  }
  if (AllIdChars(id)) return fmt::format("{}{}", kSsgRulePrefix, id);
  return Status::InvalidArgument(
      fmt::format("'{}' is not a rule id: use letters, digits, '_', '.' and '-' (e.g. sshd_disable_root_login)", id));
}

namespace {

Status CheckIdsInDatastream(const SubmitRequest& request, const NewBatch& batch, const stig::DatastreamIds& ids) {
  const std::string file = std::filesystem::path(batch.datastream).filename().string();
  // Suggestions in the form the client wrote: short names for SSG's rules, else full ids.
  auto short_names = [](const std::set<std::string>& full, std::string_view marker) {
    std::vector<std::string> out;
    for (const std::string& id : full) {
      const size_t at = id.find(marker);
      out.push_back(at == std::string::npos ? id : id.substr(at + marker.size()));
    }
    return out;
  };
  constexpr std::string_view kProfileMarker = "_profile_";
  bool profile_found = ids.profiles.count(batch.profile) > 0;
  for (const std::string& p : ids.profiles) {
    profile_found |= p.size() > batch.profile.size() && p.ends_with(batch.profile) &&
                     std::string_view(p).substr(0, p.size() - batch.profile.size()).ends_with(kProfileMarker);
  }
  if (!profile_found) {
    const bool full = batch.profile.find(kProfileMarker) != std::string::npos;
    return Status::NotFound(
        fmt::format("profile: '{}' is not a profile of {}{}", batch.profile, file,
                    DidYouMean(batch.profile, full ? std::vector<std::string>(ids.profiles.begin(), ids.profiles.end())
                                                   : short_names(ids.profiles, kProfileMarker))));
  }
  std::vector<std::string> short_rules;  // built once, for the first unknown rule
  for (size_t i = 0; i < batch.rule_ids.size(); ++i) {
    if (ids.rules.count(batch.rule_ids[i])) continue;
    const std::string& asked = request.rule_ids[i];
    const bool full = asked.rfind("xccdf_", 0) == 0;
    if (!full && short_rules.empty()) short_rules = short_names(ids.rules, "_rule_");
    return Status::NotFound(fmt::format(
        "rule_ids[{}]: '{}' is not a rule of {}{}", i, asked, file,
        DidYouMean(asked, full ? std::vector<std::string>(ids.rules.begin(), ids.rules.end()) : short_rules)));
  }
  return Status::OK();
}

}  // namespace

Result<int64_t> ParseBatchId(std::string_view text) {
  int64_t id = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || id <= 0) {
    return Status::InvalidArgument(fmt::format("'{}' is not a batch id (batch ids are positive numbers)", text));
  }
  return id;
}

SubmitRequest DecodeSubmitRequest(const temper::v1::SubmitBatchRequest& request) {
  SubmitRequest out;
  out.target = request.target();
  out.host = request.host();
  out.datastream = request.datastream();
  out.profile = request.profile();
  out.rule_ids.assign(request.rule_ids().begin(), request.rule_ids().end());
  out.whole_profile = request.whole_profile();
  out.max_attempts = request.budgets().max_attempts();
  out.wall_time_seconds = request.budgets().wall_time_seconds();
  out.max_tokens = request.budgets().max_tokens();
  out.name = request.name();
  out.request_id = request.request_id();
  for (const temper::v1::Waiver& w : request.waivers()) {
    out.waivers.push_back({.rule_id = w.rule_id(),
                           .reason = w.reason(),
                           .owner = w.owner(),
                           .has_expires_at = w.has_expires_at(),
                           .expires_seconds = w.expires_at().seconds(),
                           .expires_nanos = w.expires_at().nanos()});
  }
  out.allow_disruptive = request.allow_disruptive();
  out.plan_only = request.plan_only();
  out.parallel_attempts = request.parallel_attempts();
  return out;
}

Result<NewBatch> ValidateSubmit(const SubmitRequest& request, const SubmitContext& context) {
  const DaemonConfig& config = context.config;
  TEMPER_RETURN_IF_ERROR(CheckBounds(request));
  // A host named on submit becomes a target of its own (registered by the server once the request
  // is valid).
  std::string target = request.target;
  std::vector<std::string> more_targets = context.host_targets;
  if (!request.host.empty()) {
    if (!request.target.empty()) return Status::InvalidArgument("host: give either target or host, not both");
    Result<stig::SshEndpoint> endpoint = stig::SshEndpoint::Parse(request.host);
    if (!endpoint.ok()) return endpoint.status().WithContext("host");
    TEMPER_RETURN_IF_ERROR(context.admit_host(request.host));
    target = context.target_for_host(request.host);
    more_targets.push_back(target);
  }
  TEMPER_RETURN_IF_ERROR(context.authorize_target(target));
  if (!request.waivers.empty()) TEMPER_RETURN_IF_ERROR(context.authorize_waivers());

  NewBatch batch;
  if (target.empty()) return Status::InvalidArgument("target: required");
  bool more = std::find(more_targets.begin(), more_targets.end(), target) != more_targets.end();
  if (config.FindTarget(target) == nullptr && !more) {
    std::vector<std::string> names;
    for (const TargetConfig& t : config.targets) names.push_back(t.name);
    names.insert(names.end(), more_targets.begin(), more_targets.end());
    std::string known;
    for (const std::string& n : names) known += fmt::format("{}{}", known.empty() ? "" : ", ", n);
    return Status::NotFound(fmt::format("target: '{}' is not configured in {}{} (configured: {})", target,
                                        config.source, DidYouMean(target, names), known.empty() ? "none" : known));
  }
  batch.target = target;

  if (request.datastream.empty()) return Status::InvalidArgument("datastream: required");
  // Only from the content directories; the loop checks again when it loads the file.
  TEMPER_ASSIGN_OR_RETURN(batch.datastream, stig::ResolveTrustedDatastream(request.datastream, config.content_dirs));

  if (request.profile.empty()) return Status::InvalidArgument("profile: required");
  if (!IsXccdfId(request.profile, "profile") && !AllIdChars(request.profile)) {
    return Status::InvalidArgument(
        fmt::format("profile: '{}' is neither an XCCDF profile id nor a profile name such as 'stig'", request.profile));
  }
  batch.profile = request.profile;

  if (request.whole_profile == !request.rule_ids.empty()) {
    return Status::InvalidArgument("rule_ids: give either explicit rule ids or whole_profile, exactly one of the two");
  }
  batch.whole_profile = request.whole_profile;
  if (request.rule_ids.size() > kMaxRules) {
    return Status::InvalidArgument(
        fmt::format("rule_ids: {} rules; a batch holds at most {}", request.rule_ids.size(), kMaxRules));
  }
  std::set<std::string> seen;
  for (size_t i = 0; i < request.rule_ids.size(); ++i) {
    Result<std::string> id = NormalizeRuleId(request.rule_ids[i]);
    if (!id.ok()) return id.status().WithContext(fmt::format("rule_ids[{}]", i));
    if (!seen.insert(*id).second) {
      return Status::InvalidArgument(fmt::format("rule_ids[{}]: '{}' is listed twice", i, request.rule_ids[i]));
    }
    batch.rule_ids.push_back(*id);
  }

  batch.budgets = config.default_budgets;
  TEMPER_RETURN_IF_ERROR(CheckBudgets(request, batch.budgets));

  batch.name = request.name;
  for (char c : request.request_id) {
    if (c < 0x21 || c > 0x7e) {
      return Status::InvalidArgument("request_id: only printable ASCII characters without spaces");
    }
  }
  batch.request_id = request.request_id;

  TEMPER_ASSIGN_OR_RETURN(std::vector<Waiver> waivers, CheckWaivers(request.waivers));
  batch.options.waivers = MergeWaivers(config.waivers, waivers, batch.rule_ids, batch.whole_profile);
  size_t waiver_bytes = 0;
  for (const Waiver& w : batch.options.waivers) waiver_bytes += w.rule_id.size() + w.reason.size() + w.owner.size();
  if (waiver_bytes > kMaxBatchWaiverBytes) {
    return Status::InvalidArgument(
        fmt::format("waivers: {} waivers of {} bytes in all (the batch's and temperd.yaml's together); at most {}",
                    batch.options.waivers.size(), waiver_bytes, kMaxBatchWaiverBytes));
  }
  batch.options.allow_disruptive = request.allow_disruptive;
  batch.options.plan_only = request.plan_only;

  const TargetConfig* configured = config.FindTarget(batch.target);
  const bool forks = configured != nullptr && configured->type == "rootfs";
  if (config.parallel_attempts) {
    batch.options.parallel_attempts = *config.parallel_attempts;
  } else {
    const MachineCpus machine = context.machine ? *context.machine : CpusAvailable();
    batch.options.parallel_attempts =
        AutoParallelAttempts(forks, context.worker_endpoint, machine, config.limits.parallel_attempts_per_batch)
            .attempts;
  }
  if (uint32_t n = request.parallel_attempts; n != 0) {
    if (n > kMaxParallelAttempts) {
      return Status::InvalidArgument(fmt::format(
          "parallel_attempts: {}; 1 to {} (0: temperd's loop.parallel_attempts, {})", n, kMaxParallelAttempts,
          config.parallel_attempts ? std::to_string(*config.parallel_attempts) : std::string("auto")));
    }
    if (n > 1 && !forks) {
      return Status::InvalidArgument(fmt::format(
          "parallel_attempts: {} for target '{}', an SSH host: a host runs one attempt at a time (its running "
          "state cannot be forked)",
          n, batch.target));
    }
    batch.options.parallel_attempts = n;
  }

  // A rule or profile the datastream lacks is refused now, not found missing when the batch runs.
  Result<std::shared_ptr<const stig::DatastreamIds>> ids = context.datastream_ids(batch.datastream);
  if (!ids.ok()) return ids.status().WithContext("datastream");
  TEMPER_RETURN_IF_ERROR(CheckIdsInDatastream(request, batch, **ids));
  return batch;
}

}  // namespace temper
