// TemperService's fleet call: ApplyBatch, one batch per host replaying a source batch's kept fixes
// (the loop's apply batches: orchestrator/loop/batch_loop.h), stored together and run at most
// at_once at a time (LoopRunner).
#include <set>

#include <fmt/format.h>

#include "orchestrator/config/request_bounds.h"
#include "orchestrator/proto_convert.h"
#include "orchestrator/server/authorization.h"
#include "orchestrator/server/temper_service.h"

namespace temper {

namespace {

// Hosts and targets one ApplyBatch may name; beyond that, split the fleet into several calls.
constexpr int kMaxApplyTargets = 256;
// at_once when the request leaves it 0, and its bound.
constexpr uint32_t kDefaultAtOnce = 16;
constexpr uint32_t kMaxAtOnce = 64;

// The kept fixes of `source` a replay can use, and a refusal naming why there are none.
Status CheckReplayable(StateStore& store, const BatchRecord& source) {
  if (source.state == BatchState::kQueued || source.state == BatchState::kRunning) {
    return Status::FailedPrecondition(
        fmt::format("batch {} is {}: its fixes are applied once it has ended (temper watch {})", source.id,
                    source.state == BatchState::kQueued ? "queued" : "running", source.id));
  }
  if (source.reverted_at) {
    return Status::FailedPrecondition(
        fmt::format("batch {} was reverted (temper revert): it has no kept fix to apply", source.id));
  }
  TEMPER_ASSIGN_OR_RETURN(std::vector<AttemptRecord> attempts, store.BatchAttempts(source.id));
  int kept = 0, replayable = 0;
  for (const AttemptRecord& a : attempts) {
    if (a.outcome != AttemptOutcome::kKept || a.reverted_at) continue;
    ++kept;
    if (!a.fix_json.empty()) ++replayable;
  }
  if (replayable > 0) return Status::OK();
  if (kept == 0) return Status::FailedPrecondition(fmt::format("batch {} kept no fix: nothing to apply", source.id));
  return Status::FailedPrecondition(fmt::format(
      "batch {} kept {} fixes on target {}, none of them captured whole (only a rootfs target or a twin records a "
      "fix that can be replayed: run the batch on a twin, `temper twin create`)",
      source.id, kept, source.target));
}

}  // namespace

Result<std::vector<StateStore::Submitted>> TemperService::SubmitFleet(const ClientIdentity& caller,
                                                                      const std::vector<NewBatch>& batches,
                                                                      const std::vector<std::string>& hosts) {
  const bool admin = caller.role == ClientRole::kAdmin;
  std::vector<ClientLimits::BatchTicket> tickets;  // released, should any step fail, as they go
  for (const NewBatch& batch : batches) {
    Result<ClientLimits::BatchTicket> ticket = limits_.ReserveBatch(
        caller.key, admin, batch.rule_ids.size(), batch.options.parallel_attempts, [this](int64_t id) {
          Result<BatchRecord> counted = store_.GetBatch(id);
          return !counted.ok() || counted->state == BatchState::kQueued || counted->state == BatchState::kRunning;
        });
    if (!ticket.ok()) {
      log_.Info("ApplyBatch from {}: {}", caller.name, ticket.status().message());
      return ticket.status().WithContext(fmt::format("the batch for {}", batch.target));
    }
    tickets.push_back(std::move(*ticket));
  }
  for (const std::string& host : hosts) {
    if (host.empty()) continue;
    bool created = false;
    TEMPER_ASSIGN_OR_RETURN(
        TargetConfig target,
        hosts_.FromSubmit(host, admin ? HostRegistration::kMayRegister : HostRegistration::kKnownOnly, &created));
    if (created) {
      log_.Info("SSH host {} ({}) registered as a target", target.name, target.host);
      runner_.AddTarget(target);
    }
  }
  Result<std::vector<StateStore::Submitted>> submitted = journal_.SubmitFleet(batches);
  if (!submitted.ok()) {
    log_.Error("ApplyBatch: {}", submitted.status().ToString());
    return submitted.status();
  }
  for (size_t i = 0; i < tickets.size(); ++i) tickets[i].Submitted((*submitted)[i].batch.id);
  runner_.Wake();
  return submitted;
}

grpc::Status TemperService::ApplyBatch(grpc::ServerContext* context, const temper::v1::ApplyBatchRequest* request,
                                       temper::v1::ApplyBatchResponse* response) {
  const ClientIdentity caller = CallerOf(*context);
  Result<ClientLimits::CallSlot> call = Admit(*context, "ApplyBatch");
  if (!call.ok()) return ToGrpcStatus(call.status());
  if (Status bounds = CheckRequestBounds(*request); !bounds.ok()) return ToGrpcStatus(bounds);
  Result<int64_t> source_id = ParseBatchId(request->batch_id());
  if (!source_id.ok()) return ToGrpcStatus(source_id.status().WithContext("batch_id"));
  // Reading the source's fixes is reading its batch: the caller must reach its target.
  if (grpc::Status denied = AuthorizeOnBatch(*context, "GetBatch", *source_id); !denied.ok()) return denied;
  Result<BatchRecord> source = store_.GetBatch(*source_id);
  if (!source.ok()) return ToGrpcStatus(source.status());
  if (Status replayable = CheckReplayable(store_, *source); !replayable.ok()) return ToGrpcStatus(replayable);

  const int named = request->hosts_size() + request->targets_size();
  if (named == 0) return ToGrpcStatus(Status::InvalidArgument("hosts: name at least one host or target to apply to"));
  if (named > kMaxApplyTargets) {
    return ToGrpcStatus(Status::InvalidArgument(
        fmt::format("hosts: {} named; one call applies to at most {} (split the fleet)", named, kMaxApplyTargets)));
  }
  if (request->at_once() > kMaxAtOnce) {
    return ToGrpcStatus(
        Status::InvalidArgument(fmt::format("at_once: {} is above the maximum {}", request->at_once(), kMaxAtOnce)));
  }
  const uint32_t at_once =
      request->at_once() != 0 ? request->at_once() : std::min<uint32_t>(static_cast<uint32_t>(named), kDefaultAtOnce);

  // Each host's batch as SubmitBatch would make it, on the source's content, rules and options.
  SubmitRequest base;
  base.datastream = source->datastream;
  base.profile = source->profile;
  for (const BatchRuleRecord& r : source->rules) base.rule_ids.push_back(r.rule_id);
  base.max_attempts = source->budgets.max_attempts;
  base.allow_disruptive = source->options.allow_disruptive;
  base.name = request->name().empty() ? fmt::format("apply of batch {}", source->id) : request->name();
  const SubmitContext checks = SubmitChecks(caller, "ApplyBatch");
  std::vector<NewBatch> batches;
  std::vector<std::string> hosts;  // per batch: the host to register, or empty
  std::set<std::string> seen;
  auto add = [&](const std::string& where, const std::string& host, const std::string& target) -> Status {
    SubmitRequest one = base;
    one.host = host;
    one.target = target;
    Result<NewBatch> validated = ValidateSubmit(one, checks);
    if (!validated.ok()) return validated.status().WithContext(where);
    NewBatch batch = std::move(*validated);
    if (batch.target == source->target) {
      return Status::InvalidArgument(
          fmt::format("{}: {} is the source batch's own target: its fixes are there already", where, batch.target));
    }
    if (!seen.insert(batch.target).second) {
      return Status::InvalidArgument(fmt::format("{}: {} is named twice", where, batch.target));
    }
    batch.options.waivers = source->options.waivers;
    batch.options.parallel_attempts = 1;  // a replay is a few writes: nothing to overlap
    batch.apply_from = source->id;
    batch.at_once = at_once;
    batches.push_back(std::move(batch));
    hosts.push_back(host);
    return Status::OK();
  };
  for (int i = 0; i < request->hosts_size(); ++i) {
    if (Status s = add(fmt::format("hosts[{}]", i), request->hosts(i), ""); !s.ok()) return ToGrpcStatus(s);
  }
  for (int i = 0; i < request->targets_size(); ++i) {
    if (Status s = add(fmt::format("targets[{}]", i), "", request->targets(i)); !s.ok()) return ToGrpcStatus(s);
  }

  Result<std::vector<StateStore::Submitted>> submitted = SubmitFleet(caller, batches, hosts);
  if (!submitted.ok()) return ToGrpcStatus(submitted.status());
  for (const StateStore::Submitted& s : *submitted) {
    temper::v1::Batch* out = response->add_batches();
    ToProto(s.batch, out);
    out->clear_rules();  // one Batch per host, each read whole with GetBatch
    out->set_waiting_reason(runner_.WhyWaiting(s.batch));
  }
  log_.Info("ApplyBatch from {}: batch {} to {} targets, {} at once (batches {} to {})", caller.name, source->id,
            submitted->size(), at_once, submitted->front().batch.id, submitted->back().batch.id);
  return grpc::Status::OK;
}

}  // namespace temper
