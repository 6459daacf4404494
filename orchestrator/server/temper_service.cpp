#include "orchestrator/server/temper_service.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "orchestrator/config/batch_request.h"
#include "orchestrator/config/request_bounds.h"
#include "orchestrator/evidence/batch_export.h"
#include "orchestrator/proto_convert.h"
#include "stig/ssh/ssh_connection.h"

namespace temper {

namespace {

constexpr uint32_t kDefaultPageSize = 50;
constexpr uint32_t kMaxPageSize = 1000;
constexpr uint32_t kDefaultMemoryItems = 20;
constexpr uint32_t kMaxMemoryItems = 500;
constexpr uint32_t kWatchReadChunk = 256;
// Export chunks stay well under gRPC's default 4 MiB message limit.
constexpr size_t kExportChunkBytes = 1 << 20;
// How often an idle watch stream re-checks whether its client is still there.
constexpr std::chrono::milliseconds kWatchPollInterval{500};

}  // namespace

grpc::Status TemperService::SubmitBatch(grpc::ServerContext*, const temper::v1::SubmitBatchRequest* request,
                                        temper::v1::Batch* response) {
  if (Status bounds = CheckRequestBounds(*request); !bounds.ok()) return ToGrpcStatus(bounds);
  // A host named on submit becomes a target of its own (registered once the request is valid).
  temper::v1::SubmitBatchRequest checked = *request;
  std::vector<std::string> hosts;
  for (const SshHostState& h : hosts_.List()) hosts.push_back(h.target.name);
  if (!request->host().empty()) {
    if (!request->target().empty()) {
      return ToGrpcStatus(Status::InvalidArgument("host: give either target or host, not both"));
    }
    Result<stig::SshEndpoint> endpoint = stig::SshEndpoint::Parse(request->host());
    if (!endpoint.ok()) return ToGrpcStatus(endpoint.status().WithContext("host"));
    checked.set_target(hosts_.TargetNameFor(request->host()));
    hosts.push_back(checked.target());
  }
  Result<NewBatch> batch = ValidateSubmitRequest(checked, config_, hosts);
  if (!batch.ok()) return ToGrpcStatus(batch.status());
  if (!request->host().empty()) {
    bool created = false;
    Result<TargetConfig> target = hosts_.FromSubmit(request->host(), &created);
    if (!target.ok()) return ToGrpcStatus(target.status());
    if (created) {
      log_.Info("SSH host {} ({}) registered as a target", target->name, target->host);
      runner_.AddTarget(*target);
    }
  }
  Result<StateStore::Submitted> submitted = journal_.SubmitBatch(*batch);
  if (!submitted.ok()) {
    log_.Error("SubmitBatch: {}", submitted.status().ToString());
    return ToGrpcStatus(submitted.status());
  }
  if (submitted->event) {
    runner_.Wake();
    log_.Info("batch {} submitted: target {}, profile {}, {} rules{}", submitted->batch.id, batch->target,
              batch->profile, batch->rule_ids.size(), batch->whole_profile ? " (whole profile)" : "");
  }
  ToProto(submitted->batch, response);
  return grpc::Status::OK;
}

grpc::Status TemperService::GetBatch(grpc::ServerContext*, const temper::v1::GetBatchRequest* request,
                                     temper::v1::Batch* response) {
  if (Status bounds = CheckRequestBounds(*request); !bounds.ok()) return ToGrpcStatus(bounds);
  Result<int64_t> id = ParseBatchId(request->batch_id());
  if (!id.ok()) return ToGrpcStatus(id.status().WithContext("batch_id"));
  Result<BatchRecord> batch = store_.GetBatch(*id);
  if (!batch.ok()) return ToGrpcStatus(batch.status());
  ToProto(*batch, response);
  return grpc::Status::OK;
}

grpc::Status TemperService::ListBatches(grpc::ServerContext*, const temper::v1::ListBatchesRequest* request,
                                        temper::v1::ListBatchesResponse* response) {
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
  for (const BatchRecord& b : page->batches) ToProto(b, response->add_batches());
  if (page->next_before_id) response->set_next_page_token(std::to_string(*page->next_before_id));
  return grpc::Status::OK;
}

grpc::Status TemperService::CancelBatch(grpc::ServerContext*, const temper::v1::CancelBatchRequest* request,
                                        temper::v1::Batch* response) {
  if (Status bounds = CheckRequestBounds(*request); !bounds.ok()) return ToGrpcStatus(bounds);
  Result<int64_t> id = ParseBatchId(request->batch_id());
  if (!id.ok()) return ToGrpcStatus(id.status().WithContext("batch_id"));
  std::string reason = request->reason().empty() ? "cancelled by request" : request->reason();
  Result<StateStore::Cancelled> cancelled = journal_.CancelBatch(*id, reason);
  if (!cancelled.ok()) return ToGrpcStatus(cancelled.status());
  runner_.Cancel(*id);
  log_.Info("batch {} cancelled: {}", *id, reason);
  ToProto(cancelled->batch, response);
  return grpc::Status::OK;
}

grpc::Status TemperService::WatchJournal(grpc::ServerContext* context, const temper::v1::WatchJournalRequest* request,
                                         grpc::ServerWriter<temper::v1::JournalEvent>* writer) {
  if (Status bounds = CheckRequestBounds(*request); !bounds.ok()) return ToGrpcStatus(bounds);
  std::optional<int64_t> batch_id;
  if (!request->batch_id().empty()) {
    Result<int64_t> id = ParseBatchId(request->batch_id());
    if (!id.ok()) return ToGrpcStatus(id.status().WithContext("batch_id"));
    Result<BatchRecord> batch = store_.GetBatch(*id);
    if (!batch.ok()) return ToGrpcStatus(batch.status());
    batch_id = *id;
  }
  uint64_t cursor = request->after_seq();
  while (!context->IsCancelled()) {
    // Everything up to `horizon` is committed, so the read below sees all of it that matches; waiting
    // beyond `horizon` (not `cursor`) keeps a filtered watcher from spinning on others' events.
    uint64_t horizon = journal_.last_seq();
    Result<std::vector<EventRecord>> events = store_.ReadEvents(cursor, batch_id, kWatchReadChunk);
    if (!events.ok()) return ToGrpcStatus(events.status());
    for (const EventRecord& e : *events) {
      temper::v1::JournalEvent out;
      ToProto(e, &out);
      if (!writer->Write(out)) return grpc::Status::OK;  // the client went away
      cursor = e.seq;
    }
    if (events->size() == kWatchReadChunk) continue;
    if (!request->follow()) return grpc::Status::OK;
    if (journal_.closed()) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          fmt::format("temperd is shutting down; resume with after_seq={}", cursor));
    }
    journal_.WaitBeyond(std::max(horizon, cursor), std::chrono::steady_clock::now() + kWatchPollInterval);
  }
  return grpc::Status(grpc::StatusCode::CANCELLED, "watch cancelled by the client");
}

grpc::Status TemperService::GetRuleMemory(grpc::ServerContext*, const temper::v1::GetRuleMemoryRequest* request,
                                          temper::v1::RuleMemory* response) {
  if (Status bounds = CheckRequestBounds(*request); !bounds.ok()) return ToGrpcStatus(bounds);
  Result<std::string> rule_id = NormalizeRuleId(request->rule_id());
  if (!rule_id.ok()) return ToGrpcStatus(rule_id.status().WithContext("rule_id"));
  uint32_t lessons = request->max_lessons() == 0 ? kDefaultMemoryItems : request->max_lessons();
  uint32_t attempts = request->max_attempts() == 0 ? kDefaultMemoryItems : request->max_attempts();
  if (lessons > kMaxMemoryItems || attempts > kMaxMemoryItems) {
    return ToGrpcStatus(
        Status::InvalidArgument(fmt::format("max_lessons and max_attempts are at most {}", kMaxMemoryItems)));
  }
  Result<RuleMemoryRecord> memory = store_.GetRuleMemory(*rule_id, lessons, attempts);
  if (!memory.ok()) return ToGrpcStatus(memory.status());
  ToProto(*memory, response);
  return grpc::Status::OK;
}

grpc::Status TemperService::GetBatchReport(grpc::ServerContext*, const temper::v1::GetBatchReportRequest* request,
                                           temper::v1::BatchReport* response) {
  if (Status bounds = CheckRequestBounds(*request); !bounds.ok()) return ToGrpcStatus(bounds);
  Result<int64_t> id = ParseBatchId(request->batch_id());
  if (!id.ok()) return ToGrpcStatus(id.status().WithContext("batch_id"));
  Result<BatchRecord> batch = store_.GetBatch(*id);
  if (!batch.ok()) return ToGrpcStatus(batch.status());
  Result<std::vector<AttemptRecord>> attempts = store_.BatchAttempts(*id);
  if (!attempts.ok()) return ToGrpcStatus(attempts.status());
  Result<std::vector<LessonRecord>> lessons = store_.BatchLessons(*id);
  if (!lessons.ok()) return ToGrpcStatus(lessons.status());
  ToProto(*batch, response->mutable_batch());
  for (const AttemptRecord& a : *attempts) ToProto(a, response->add_attempts());
  for (const LessonRecord& l : *lessons) ToProto(l, response->add_lessons());
  response->set_results_dir(batch->results_dir);
  for (const FixpointPass& p : batch->fixpoint) ToProto(p, response->add_fixpoint_passes());
  return grpc::Status::OK;
}

grpc::Status TemperService::RevertBatch(grpc::ServerContext*, const temper::v1::RevertBatchRequest* request,
                                        temper::v1::RevertBatchResponse* response) {
  if (Status bounds = CheckRequestBounds(*request); !bounds.ok()) return ToGrpcStatus(bounds);
  Result<int64_t> id = ParseBatchId(request->batch_id());
  if (!id.ok()) return ToGrpcStatus(id.status().WithContext("batch_id"));
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
  ToProto(out->batch, response->mutable_batch());
  for (const std::string& r : out->reverted_rules) response->add_reverted_rules(r);
  for (stig::SnapshotId s : out->dropped_snapshots) response->add_dropped_snapshots(s);
  if (out->restored_snapshot) response->set_restored_snapshot(*out->restored_snapshot);
  for (const std::string& r : out->now_failing) response->add_now_failing(r);
  response->set_results_dir(out->results_dir);
  return grpc::Status::OK;
}

grpc::Status TemperService::ExportBatch(grpc::ServerContext* context, const temper::v1::ExportBatchRequest* request,
                                        grpc::ServerWriter<temper::v1::ExportChunk>* writer) {
  if (Status bounds = CheckRequestBounds(*request); !bounds.ok()) return ToGrpcStatus(bounds);
  Result<int64_t> id = ParseBatchId(request->batch_id());
  if (!id.ok()) return ToGrpcStatus(id.status().WithContext("batch_id"));
  Result<evidence::ExportFormat> format = evidence::ParseExportFormat(request->format());
  if (!format.ok()) return ToGrpcStatus(format.status());
  evidence::ExportSources sources{store_, [this](const BatchRecord& b) { return runner_.ContentOf(b); },
                                  runner_.results_root()};
  Result<evidence::ExportedFile> file = evidence::ExportBatch(sources, *id, *format);
  if (!file.ok()) {
    if (file.status().code() != StatusCode::kNotFound && file.status().code() != StatusCode::kFailedPrecondition) {
      log_.Error("ExportBatch {} {}: {}", *id, request->format(), file.status().ToString());
    }
    return ToGrpcStatus(file.status());
  }
  size_t offset = 0;
  do {
    temper::v1::ExportChunk chunk;
    if (offset == 0) {
      chunk.set_file_name(file->file_name);
      chunk.set_media_type(file->media_type);
      chunk.set_total_bytes(file->content.size());
    }
    chunk.set_offset(offset);
    size_t n = std::min(kExportChunkBytes, file->content.size() - offset);
    chunk.set_data(file->content.substr(offset, n));
    if (context->IsCancelled() || !writer->Write(chunk)) return grpc::Status::OK;  // the client went away
    offset += n;
  } while (offset < file->content.size());
  return grpc::Status::OK;
}

grpc::Status TemperService::ConfirmReboot(grpc::ServerContext*, const temper::v1::ConfirmRebootRequest* request,
                                          temper::v1::ConfirmRebootResponse* response) {
  if (Status bounds = CheckRequestBounds(*request); !bounds.ok()) return ToGrpcStatus(bounds);
  Result<int64_t> id = ParseBatchId(request->batch_id());
  if (!id.ok()) return ToGrpcStatus(id.status().WithContext("batch_id"));
  Result<StateStore::RebootConfirmed> confirmed = journal_.ConfirmReboot(*id, request->note());
  if (!confirmed.ok()) return ToGrpcStatus(confirmed.status());
  if (confirmed->event) {
    runner_.Wake();
    log_.Info("batch {}: reboot confirmed; its reboot_pending rules will be verified", *id);
  }
  ToProto(confirmed->batch, response->mutable_batch());
  response->set_confirmed_seq(confirmed->seq);
  return grpc::Status::OK;
}

}  // namespace temper
