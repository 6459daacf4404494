#include "orchestrator/server/temper_service.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "orchestrator/config/batch_request.h"
#include "orchestrator/config/request_bounds.h"
#include "orchestrator/evidence/batch_export.h"
#include "orchestrator/loop/proven_fix.h"
#include "orchestrator/message_chunks.h"
#include "orchestrator/proto_convert.h"
#include "orchestrator/server/authorization.h"
#include "stig/ssh/ssh_connection.h"

namespace temper {

namespace {

constexpr uint32_t kDefaultPageSize = 50;
constexpr uint32_t kMaxPageSize = 1000;
constexpr uint32_t kDefaultMemoryItems = 20;
constexpr uint32_t kMaxMemoryItems = 500;
// Attempts read from the store at a time for a report or a rule's memory: each may hold megabytes
// (a change set), so a stream holds a few of them in memory, never all, even while its client
// does not read.
constexpr uint32_t kAttemptsPerRead = 4;

// An authorization's refusal (always PERMISSION_DENIED) as a Status, for the checks that return one.
Status FromGrpcDenial(const grpc::Status& denied) {
  return denied.ok() ? Status::OK() : Status::PermissionDenied(denied.error_message());
}

// A chunk stream's writer: false once the client cancelled or went away, so the stream stops.
template <typename Chunk>
typename ChunkPacker<Chunk>::Send SendTo(grpc::ServerContext* context, grpc::ServerWriter<Chunk>* writer) {
  return [context, writer](const Chunk& chunk) { return !context->IsCancelled() && writer->Write(chunk); };
}

// A stream whose client cancelled or went away mid-way ends here, logged: nothing is left running.
grpc::Status ClientGone(const Logger& log, std::string_view what) {
  log.Info("{}: the client went away before the end; the stream stopped", what);
  return grpc::Status(grpc::StatusCode::CANCELLED, fmt::format("the client stopped reading {}", what));
}

// `batch` as a Batch message with its rules from `first_rule` on, as many as keep the message
// within a chunk's bytes (one at least), and the token of the rest when they did not all fit.
void ToProtoPaged(const BatchRecord& batch, size_t first_rule, temper::v1::Batch* out) {
  ToProto(batch, out);
  if (first_rule == 0 && out->ByteSizeLong() <= kChunkBytes) return;
  google::protobuf::RepeatedPtrField<temper::v1::BatchRule> rules;
  rules.Swap(out->mutable_rules());
  PageBudget budget(out->ByteSizeLong());
  for (int i = static_cast<int>(first_rule); i < rules.size(); ++i) {
    if (!budget.Take(rules[i].ByteSizeLong())) {
      out->set_next_rules_page_token(std::to_string(i));
      return;
    }
    *out->add_rules() = std::move(*rules.Mutable(i));
  }
}

}  // namespace

Result<ClientLimits::CallSlot> TemperService::Admit(const grpc::ServerContext& context, std::string_view method) {
  const ClientIdentity caller = CallerOf(context);
  if (grpc::Status denied = Authorize(caller, method); !denied.ok()) {
    return Status::PermissionDenied(denied.error_message());
  }
  return limits_.EnterCall(caller.key, caller.role == ClientRole::kAdmin);
}

grpc::Status TemperService::AuthorizeOnBatch(const grpc::ServerContext& context, std::string_view method,
                                             int64_t batch_id) const {
  Result<BatchRecord> batch = store_.GetBatch(batch_id);
  if (!batch.ok()) return ToGrpcStatus(batch.status());
  return AuthorizeOnTarget(CallerOf(context), method, batch->target);
}

grpc::Status TemperService::SubmitBatch(grpc::ServerContext* context, const temper::v1::SubmitBatchRequest* request,
                                        temper::v1::Batch* response) {
  const ClientIdentity caller = CallerOf(*context);
  Result<ClientLimits::CallSlot> call = Admit(*context, "SubmitBatch");
  if (!call.ok()) return ToGrpcStatus(call.status());
  // Decode, one validator (batch_request.h), then the one domain call: reserve, register, store.
  const SubmitRequest submit = DecodeSubmitRequest(*request);
  Result<NewBatch> batch = ValidateSubmit(submit, SubmitChecks(caller, "SubmitBatch"));
  if (!batch.ok()) return ToGrpcStatus(batch.status());
  Result<StateStore::Submitted> submitted = Submit(caller, *batch, submit.host);
  if (!submitted.ok()) return ToGrpcStatus(submitted.status());
  ToProtoPaged(submitted->batch, 0, response);
  response->set_waiting_reason(runner_.WhyWaiting(submitted->batch));
  return grpc::Status::OK;
}

SubmitContext TemperService::SubmitChecks(const ClientIdentity& caller, std::string_view method) {
  const bool admin = caller.role == ClientRole::kAdmin;
  SubmitContext checks{.config = config_};
  for (const SshHostState& h : hosts_.List()) checks.host_targets.push_back(h.target.name);
  if (twins_ != nullptr) {
    for (const TwinRecord& twin : twins_->List()) checks.host_targets.push_back(twin.name);
  }
  checks.admit_host = [this, admin, caller, method](const std::string& host) {
    // Each host is a target, a thread while it has work and an entry in hosts.json: only an admin
    // adds one (issue 46).
    if (admin || hosts_.Knows(host)) return Status::OK();
    log_.Info("{} from {}: refused the unregistered SSH host {}", method, caller.name, host);
    return SshHosts::NotRegistered(host);
  };
  checks.target_for_host = [this](const std::string& host) { return hosts_.TargetNameFor(host); };
  checks.authorize_target = [this, caller, method](const std::string& target) {
    return FromGrpcDenial(AuthorizeOnTarget(caller, method, target));
  };
  checks.authorize_waivers = [this, caller] { return FromGrpcDenial(AuthorizeWaivers(caller)); };
  checks.datastream_ids = [this](const std::string& path) { return runner_.datastreams().Ids(path); };
  checks.worker_endpoint = runner_.WorkerEndpoint();
  return checks;
}

Result<StateStore::Submitted> TemperService::Submit(const ClientIdentity& caller, const NewBatch& batch,
                                                    const std::string& host) {
  const bool admin = caller.role == ClientRole::kAdmin;
  Result<ClientLimits::BatchTicket> ticket = limits_.ReserveBatch(
      caller.key, admin, batch.rule_ids.size(), batch.options.parallel_attempts, [this](int64_t id) {
        Result<BatchRecord> counted = store_.GetBatch(id);
        return !counted.ok() || counted->state == BatchState::kQueued || counted->state == BatchState::kRunning;
      });
  if (!ticket.ok()) {
    log_.Info("SubmitBatch from {}: {}", caller.name, ticket.status().message());
    return ticket.status();
  }
  if (!host.empty()) {
    bool created = false;
    Result<TargetConfig> target =
        hosts_.FromSubmit(host, admin ? HostRegistration::kMayRegister : HostRegistration::kKnownOnly, &created);
    if (!target.ok()) return target.status();
    if (created) {
      log_.Info("SSH host {} ({}) registered as a target", target->name, target->host);
      runner_.AddTarget(*target);
    }
  }
  Result<StateStore::Submitted> submitted = journal_.SubmitBatch(batch);
  if (!submitted.ok()) {
    log_.Error("SubmitBatch: {}", submitted.status().ToString());
    return submitted.status();
  }
  ticket->Submitted(submitted->batch.id);
  if (submitted->event) {
    runner_.Wake();
    log_.Info("batch {} submitted: target {}, profile {}, {} rules{}", submitted->batch.id, batch.target, batch.profile,
              batch.rule_ids.size(), batch.whole_profile ? " (whole profile)" : "");
  }
  return submitted;
}

grpc::Status TemperService::GetBatch(grpc::ServerContext* context, const temper::v1::GetBatchRequest* request,
                                     temper::v1::Batch* response) {
  Result<ClientLimits::CallSlot> call = Admit(*context, "GetBatch");
  if (!call.ok()) return ToGrpcStatus(call.status());
  if (Status bounds = CheckRequestBounds(*request); !bounds.ok()) return ToGrpcStatus(bounds);
  Result<int64_t> id = ParseBatchId(request->batch_id());
  if (!id.ok()) return ToGrpcStatus(id.status().WithContext("batch_id"));
  Result<BatchRecord> batch = store_.GetBatch(*id);
  if (!batch.ok()) return ToGrpcStatus(batch.status());
  Result<size_t> first = PagePosition(request->rules_page_token(), batch->rules.size(), "rules_page_token");
  if (!first.ok()) return ToGrpcStatus(first.status());
  ToProtoPaged(*batch, *first, response);
  response->set_waiting_reason(runner_.WhyWaiting(*batch));
  return grpc::Status::OK;
}

grpc::Status TemperService::ListBatches(grpc::ServerContext* context, const temper::v1::ListBatchesRequest* request,
                                        temper::v1::ListBatchesResponse* response) {
  Result<ClientLimits::CallSlot> call = Admit(*context, "ListBatches");
  if (!call.ok()) return ToGrpcStatus(call.status());
  if (Status bounds = CheckRequestBounds(*request); !bounds.ok()) return ToGrpcStatus(bounds);
  uint32_t size = request->page_size() == 0 ? kDefaultPageSize : request->page_size();
  if (size > kMaxPageSize) {
    return ToGrpcStatus(
        Status::InvalidArgument(fmt::format("page_size: {} is above the maximum {}", size, kMaxPageSize)));
  }
  std::optional<int64_t> before;
  if (!request->page_token().empty()) {
    Result<int64_t> token = ParseBatchId(request->page_token());
    if (!token.ok()) return ToGrpcStatus(Status::InvalidArgument("page_token: not a token this server issued"));
    before = *token;
  }
  std::vector<BatchState> states;
  for (int i = 0; i < request->states_size(); ++i) {
    std::optional<BatchState> s = FromProto(request->states(i));
    if (!s) {
      return ToGrpcStatus(Status::InvalidArgument(
          fmt::format("states[{}]: {} is not a batch state", i, static_cast<int>(request->states(i)))));
    }
    states.push_back(*s);
  }
  Result<StateStore::BatchPage> page = store_.ListBatches(before, size, states);
  if (!page.ok()) return ToGrpcStatus(page.status());
  // A page ends early, with a token, where the next batch would not fit the message.
  PageBudget budget(0);
  for (size_t i = 0; i < page->batches.size(); ++i) {
    temper::v1::Batch b;
    ToProto(page->batches[i], &b);
    b.set_waiting_reason(runner_.WhyWaiting(page->batches[i]));
    if (!budget.Take(b.ByteSizeLong())) {
      response->set_next_page_token(std::to_string(page->batches[i - 1].id));
      return grpc::Status::OK;
    }
    *response->add_batches() = std::move(b);
  }
  if (page->next_before_id) response->set_next_page_token(std::to_string(*page->next_before_id));
  return grpc::Status::OK;
}

grpc::Status TemperService::CancelBatch(grpc::ServerContext* context, const temper::v1::CancelBatchRequest* request,
                                        temper::v1::Batch* response) {
  Result<ClientLimits::CallSlot> call = Admit(*context, "CancelBatch");
  if (!call.ok()) return ToGrpcStatus(call.status());
  if (Status bounds = CheckRequestBounds(*request); !bounds.ok()) return ToGrpcStatus(bounds);
  Result<int64_t> id = ParseBatchId(request->batch_id());
  if (!id.ok()) return ToGrpcStatus(id.status().WithContext("batch_id"));
  if (grpc::Status denied = AuthorizeOnBatch(*context, "CancelBatch", *id); !denied.ok()) return denied;
  std::string reason = request->reason().empty() ? "cancelled by request" : request->reason();
  Result<StateStore::Cancelled> cancelled = journal_.CancelBatch(*id, reason);
  if (!cancelled.ok()) return ToGrpcStatus(cancelled.status());
  runner_.Cancel(*id);
  log_.Info("batch {} cancelled: {}", *id, reason);
  ToProtoPaged(cancelled->batch, 0, response);
  return grpc::Status::OK;
}

grpc::ServerWriteReactor<temper::v1::JournalEvent>* TemperService::WatchJournal(
    grpc::CallbackServerContext* context, const temper::v1::WatchJournalRequest* request) {
  const ClientIdentity caller = CallerOf(*context);
  if (grpc::Status denied = Authorize(caller, "WatchJournal"); !denied.ok()) return JournalWatchers::Refuse(denied);
  if (Status bounds = CheckRequestBounds(*request); !bounds.ok()) {
    return JournalWatchers::Refuse(ToGrpcStatus(bounds));
  }
  std::optional<int64_t> batch_id;
  if (!request->batch_id().empty()) {
    Result<int64_t> id = ParseBatchId(request->batch_id());
    if (!id.ok()) return JournalWatchers::Refuse(ToGrpcStatus(id.status().WithContext("batch_id")));
    Result<BatchRecord> batch = store_.GetBatch(*id);
    if (!batch.ok()) return JournalWatchers::Refuse(ToGrpcStatus(batch.status()));
    batch_id = *id;
  }
  Result<ClientLimits::WatchSlot> slot = limits_.OpenWatch(caller.key, caller.role == ClientRole::kAdmin);
  if (!slot.ok()) {
    log_.Info("WatchJournal from {}: {}", caller.name, slot.status().message());
    return JournalWatchers::Refuse(ToGrpcStatus(slot.status()));
  }
  return watchers_.Start(batch_id, request->after_seq(), request->follow(), std::move(*slot));
}

grpc::Status TemperService::GetRuleMemory(grpc::ServerContext* context, const temper::v1::GetRuleMemoryRequest* request,
                                          grpc::ServerWriter<temper::v1::RuleMemoryChunk>* writer) {
  Result<ClientLimits::CallSlot> call = Admit(*context, "GetRuleMemory");
  if (!call.ok()) return ToGrpcStatus(call.status());
  if (Status bounds = CheckRequestBounds(*request); !bounds.ok()) return ToGrpcStatus(bounds);
  Result<std::string> rule_id = NormalizeRuleId(request->rule_id());
  if (!rule_id.ok()) return ToGrpcStatus(rule_id.status().WithContext("rule_id"));
  uint32_t lessons = request->max_lessons() == 0 ? kDefaultMemoryItems : request->max_lessons();
  uint32_t attempts = request->max_attempts() == 0 ? kDefaultMemoryItems : request->max_attempts();
  if (lessons > kMaxMemoryItems || attempts > kMaxMemoryItems) {
    return ToGrpcStatus(
        Status::InvalidArgument(fmt::format("max_lessons and max_attempts are at most {}", kMaxMemoryItems)));
  }
  // The lessons (a few hundred characters each) at once; the attempts a page at a time.
  Result<RuleMemoryRecord> memory = store_.GetRuleMemory(*rule_id, lessons, 0);
  if (!memory.ok()) return ToGrpcStatus(memory.status());
  const std::string what = fmt::format("GetRuleMemory {}", *rule_id);
  ChunkPacker<temper::v1::RuleMemoryChunk> packer(SendTo(context, writer));
  auto add = [&packer](const auto& fill) {
    temper::v1::RuleMemory item;
    fill(item);
    return packer.Add(item);
  };
  if (!add([&](temper::v1::RuleMemory& m) { m.set_rule_id(*rule_id); })) return ClientGone(log_, what);
  for (const LessonRecord& l : memory->lessons) {
    if (!add([&](temper::v1::RuleMemory& m) { ToProto(l, m.add_lessons()); })) return ClientGone(log_, what);
  }
  int64_t before = INT64_MAX;
  for (uint32_t left = attempts; left > 0;) {
    Result<std::vector<AttemptRecord>> page = store_.RuleAttempts(*rule_id, before, std::min(left, kAttemptsPerRead));
    if (!page.ok()) return ToGrpcStatus(page.status());
    for (const AttemptRecord& a : *page) {
      if (!add([&](temper::v1::RuleMemory& m) { ToProto(a, m.add_attempts()); })) return ClientGone(log_, what);
      before = a.id;
    }
    if (page->size() < std::min(left, kAttemptsPerRead)) break;
    left -= static_cast<uint32_t>(page->size());
  }
  if (!packer.Flush()) return ClientGone(log_, what);
  return grpc::Status::OK;
}

grpc::Status TemperService::GetBatchReport(grpc::ServerContext* context,
                                           const temper::v1::GetBatchReportRequest* request,
                                           grpc::ServerWriter<temper::v1::BatchReportChunk>* writer) {
  Result<ClientLimits::CallSlot> call = Admit(*context, "GetBatchReport");
  if (!call.ok()) return ToGrpcStatus(call.status());
  if (Status bounds = CheckRequestBounds(*request); !bounds.ok()) return ToGrpcStatus(bounds);
  Result<int64_t> id = ParseBatchId(request->batch_id());
  if (!id.ok()) return ToGrpcStatus(id.status().WithContext("batch_id"));
  Result<BatchRecord> batch = store_.GetBatch(*id);
  if (!batch.ok()) return ToGrpcStatus(batch.status());
  Result<std::vector<LessonRecord>> lessons = store_.BatchLessons(*id);
  if (!lessons.ok()) return ToGrpcStatus(lessons.status());
  Result<std::vector<RoleUsageRecord>> role_usage = store_.BatchRoleUsage(*id);
  if (!role_usage.ok()) return ToGrpcStatus(role_usage.status());
  Result<LibraryUse> library = BatchLibraryUse(store_, *id);
  if (!library.ok()) return ToGrpcStatus(library.status());
  // Items in the order BatchReportChunk promises: the batch's own fields, then one item per
  // waiver, fixpoint pass, role's usage, rule, attempt and lesson, so that none has to fit with
  // the others.
  ChunkPacker<temper::v1::BatchReportChunk> packer(SendTo(context, writer));
  auto add = [&packer](const auto& fill) {
    temper::v1::BatchReport item;
    fill(item);
    return packer.Add(item);
  };
  const std::vector<BatchRuleRecord> rules = std::move(batch->rules);
  const std::vector<Waiver> waivers = std::move(batch->options.waivers);
  batch->rules.clear();
  batch->options.waivers.clear();
  bool sent = add([&](temper::v1::BatchReport& r) {
    ToProto(*batch, r.mutable_batch());
    r.set_results_dir(batch->results_dir);
    if (library->tried > 0) ToProto(*library, r.mutable_library());
  });
  for (size_t i = 0; sent && i < waivers.size(); ++i) {
    sent = add([&](temper::v1::BatchReport& r) { ToProto(waivers[i], r.mutable_batch()->add_waivers()); });
  }
  for (size_t i = 0; sent && i < batch->fixpoint.size(); ++i) {
    sent = add([&](temper::v1::BatchReport& r) { ToProto(batch->fixpoint[i], r.add_fixpoint_passes()); });
  }
  for (size_t i = 0; sent && i < role_usage->size(); ++i) {
    sent = add([&](temper::v1::BatchReport& r) { ToProto((*role_usage)[i], r.add_role_usage()); });
  }
  for (size_t i = 0; sent && i < rules.size(); ++i) {
    sent = add([&](temper::v1::BatchReport& r) { ToProto(rules[i], r.mutable_batch()->add_rules()); });
  }
  for (int64_t after = 0; sent;) {
    Result<std::vector<AttemptRecord>> page = store_.BatchAttempts(*id, after, kAttemptsPerRead);
    if (!page.ok()) return ToGrpcStatus(page.status());
    for (size_t i = 0; sent && i < page->size(); ++i) {
      sent = add([&](temper::v1::BatchReport& r) { ToProto((*page)[i], r.add_attempts()); });
      after = (*page)[i].id;
    }
    if (page->size() < kAttemptsPerRead) break;
  }
  for (size_t i = 0; sent && i < lessons->size(); ++i) {
    sent = add([&](temper::v1::BatchReport& r) { ToProto((*lessons)[i], r.add_lessons()); });
  }
  if (!sent || !packer.Flush()) return ClientGone(log_, fmt::format("GetBatchReport {}", *id));
  return grpc::Status::OK;
}

grpc::Status TemperService::RevertBatch(grpc::ServerContext* context, const temper::v1::RevertBatchRequest* request,
                                        temper::v1::RevertBatchResponse* response) {
  Result<ClientLimits::CallSlot> call = Admit(*context, "RevertBatch");
  if (!call.ok()) return ToGrpcStatus(call.status());
  if (Status bounds = CheckRequestBounds(*request); !bounds.ok()) return ToGrpcStatus(bounds);
  Result<int64_t> id = ParseBatchId(request->batch_id());
  if (!id.ok()) return ToGrpcStatus(id.status().WithContext("batch_id"));
  if (grpc::Status denied = AuthorizeOnBatch(*context, "RevertBatch", *id); !denied.ok()) return denied;
  RevertRequest revert{.batch_id = *id};
  if (!request->rule_id().empty()) {
    Result<std::string> rule_id = NormalizeRuleId(request->rule_id());
    if (!rule_id.ok()) return ToGrpcStatus(rule_id.status().WithContext("rule_id"));
    revert.rule_id = *rule_id;
  }
  Result<RevertOutcome> out = runner_.Revert(revert);
  if (!out.ok()) {
    log_.Info("RevertBatch {}{}: {}", *id, revert.rule_id.empty() ? "" : " " + revert.rule_id, out.status().ToString());
    return ToGrpcStatus(out.status());
  }
  ToProtoPaged(out->batch, 0, response->mutable_batch());
  for (const std::string& r : out->reverted_rules) response->add_reverted_rules(r);
  for (stig::SnapshotId s : out->dropped_snapshots) response->add_dropped_snapshots(s);
  if (out->restored_snapshot) response->set_restored_snapshot(*out->restored_snapshot);
  for (const std::string& r : out->now_failing) response->add_now_failing(r);
  response->set_results_dir(out->results_dir);
  return grpc::Status::OK;
}

grpc::Status TemperService::ExportBatch(grpc::ServerContext* context, const temper::v1::ExportBatchRequest* request,
                                        grpc::ServerWriter<temper::v1::ExportChunk>* writer) {
  Result<ClientLimits::CallSlot> call = Admit(*context, "ExportBatch");
  if (!call.ok()) return ToGrpcStatus(call.status());
  if (Status bounds = CheckRequestBounds(*request); !bounds.ok()) return ToGrpcStatus(bounds);
  Result<int64_t> id = ParseBatchId(request->batch_id());
  if (!id.ok()) return ToGrpcStatus(id.status().WithContext("batch_id"));
  Result<evidence::ExportFormat> format = evidence::ParseExportFormat(request->format());
  if (!format.ok()) return ToGrpcStatus(format.status());
  if (evidence::CarriesFileContents(*format)) {
    Result<BatchRecord> batch = store_.GetBatch(*id);
    if (!batch.ok()) return ToGrpcStatus(batch.status());
    grpc::Status denied =
        AuthorizeFileContents(CallerOf(*context), fmt::format("batch {} as {}", *id, request->format()), batch->target);
    if (!denied.ok()) return denied;
  }
  evidence::ExportSources sources{store_, [this](const BatchRecord& b) { return runner_.ContentOf(b); },
                                  runner_.results_root(), &disa_stigs_};
  std::optional<stig::DisaStig> given;
  if (!request->disa_stig().empty()) {
    std::string name = request->disa_stig_name().empty() ? "disa_stig" : request->disa_stig_name();
    Result<stig::DisaStig> parsed = stig::ParseDisaStig(request->disa_stig(), name);
    if (!parsed.ok()) return ToGrpcStatus(parsed.status().WithContext("disa_stig"));
    given = std::move(*parsed);
  }
  Result<evidence::ExportedFile> file = evidence::ExportBatch(sources, *id, *format, given ? &*given : nullptr);
  if (!file.ok()) {
    if (file.status().code() != StatusCode::kNotFound && file.status().code() != StatusCode::kFailedPrecondition) {
      log_.Error("ExportBatch {} {}: {}", *id, request->format(), file.status().ToString());
    }
    return ToGrpcStatus(file.status());
  }
  return SendExport(context, writer, *file, fmt::format("ExportBatch {} {}", *id, request->format()));
}

grpc::Status TemperService::SendExport(grpc::ServerContext* context,
                                       grpc::ServerWriter<temper::v1::ExportChunk>* writer,
                                       const evidence::ExportedFile& file, std::string_view what) const {
  size_t offset = 0;
  do {
    temper::v1::ExportChunk chunk;
    if (offset == 0) {
      chunk.set_file_name(file.file_name);
      chunk.set_media_type(file.media_type);
      chunk.set_total_bytes(file.content.size());
      for (const std::string& rule : file.not_carried) chunk.add_not_carried(rule);
    }
    chunk.set_offset(offset);
    size_t n = std::min(kChunkBytes, file.content.size() - offset);
    chunk.set_data(file.content.substr(offset, n));
    if (context->IsCancelled() || !writer->Write(chunk)) return ClientGone(log_, what);
    offset += n;
  } while (offset < file.content.size());
  return grpc::Status::OK;
}

grpc::Status TemperService::ConfirmReboot(grpc::ServerContext* context, const temper::v1::ConfirmRebootRequest* request,
                                          temper::v1::ConfirmRebootResponse* response) {
  Result<ClientLimits::CallSlot> call = Admit(*context, "ConfirmReboot");
  if (!call.ok()) return ToGrpcStatus(call.status());
  if (Status bounds = CheckRequestBounds(*request); !bounds.ok()) return ToGrpcStatus(bounds);
  Result<int64_t> id = ParseBatchId(request->batch_id());
  if (!id.ok()) return ToGrpcStatus(id.status().WithContext("batch_id"));
  if (grpc::Status denied = AuthorizeOnBatch(*context, "ConfirmReboot", *id); !denied.ok()) return denied;
  Result<StateStore::RebootConfirmed> confirmed = journal_.ConfirmReboot(*id, request->note());
  if (!confirmed.ok()) return ToGrpcStatus(confirmed.status());
  if (confirmed->event) {
    runner_.Wake();
    log_.Info("batch {}: reboot confirmed; its reboot_pending rules will be verified", *id);
  }
  ToProtoPaged(confirmed->batch, 0, response->mutable_batch());
  response->set_confirmed_seq(confirmed->seq);
  return grpc::Status::OK;
}

}  // namespace temper
