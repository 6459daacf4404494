// TemperService: the temper.v1.Temper gRPC service. It validates requests, reads and writes the state
// store, and streams the journal; it runs no remediation itself, but tells the loop runner when a
// batch arrives or is cancelled. Every call first checks its request's string fields against their
// bounds (request_bounds.h), so no client string of any size reaches the store, a log or the journal.
// No answer is larger than about one chunk (message_chunks.h, 1 MiB), whatever the batch: reports
// and rule memories stream as chunks, a batch's rules and the list calls come in pages; a stream
// reads the store a few attempts at a time, and stops (logged) once its client cancels or goes away.
// WatchJournal is a callback method (journal_watch.h): an open watch holds no thread. What one
// client may hold at once (batches, watch streams) is bounded by temperd.yaml's limits:
// (client_limits.h), and an SSH host is registered by an admin or the config, never by any member.
//
// Thread safety: gRPC calls the methods concurrently; the members it uses are thread-safe.
#pragma once

#include "common/log.h"
#include "orchestrator/config/batch_request.h"
#include "orchestrator/config/daemon_config.h"
#include "orchestrator/evidence/batch_export.h"
#include "orchestrator/library/fix_library.h"
#include "orchestrator/loop/loop_runner.h"
#include "orchestrator/loop/ssh_hosts.h"
#include "orchestrator/loop/twins.h"
#include "orchestrator/server/client_identity.h"
#include "orchestrator/server/client_limits.h"
#include "orchestrator/server/journal_watch.h"
#include "orchestrator/store/journal.h"
#include "orchestrator/store/state_store.h"
#include "stig/scap/disa_stig.h"
#include "temper/v1/temper.grpc.pb.h"

namespace temper {

class TemperService final : public temper::v1::Temper::WithCallbackMethod_WatchJournal<temper::v1::Temper::Service> {
 public:
  // All references must outlive the service.
  TemperService(const DaemonConfig& config, StateStore& store, Journal& journal, LoopRunner& runner, SshHosts& hosts,
                FixLibrary& library, const std::vector<stig::DisaStig>& disa_stigs, const Logger& log)
      : config_(config),
        store_(store),
        journal_(journal),
        runner_(runner),
        hosts_(hosts),
        library_(library),
        disa_stigs_(disa_stigs),
        log_(log),
        limits_(config.limits),
        watchers_(store, journal, log) {}

  grpc::Status SubmitBatch(grpc::ServerContext* context, const temper::v1::SubmitBatchRequest* request,
                           temper::v1::Batch* response) override;
  grpc::Status GetBatch(grpc::ServerContext* context, const temper::v1::GetBatchRequest* request,
                        temper::v1::Batch* response) override;
  grpc::Status ListBatches(grpc::ServerContext* context, const temper::v1::ListBatchesRequest* request,
                           temper::v1::ListBatchesResponse* response) override;
  grpc::Status CancelBatch(grpc::ServerContext* context, const temper::v1::CancelBatchRequest* request,
                           temper::v1::Batch* response) override;
  grpc::ServerWriteReactor<temper::v1::JournalEvent>* WatchJournal(
      grpc::CallbackServerContext* context, const temper::v1::WatchJournalRequest* request) override;
  // Streams: ChunkPacker (message_chunks.h) cuts the answer into chunks bounded by bytes.
  grpc::Status GetRuleMemory(grpc::ServerContext* context, const temper::v1::GetRuleMemoryRequest* request,
                             grpc::ServerWriter<temper::v1::RuleMemoryChunk>* writer) override;
  grpc::Status GetBatchReport(grpc::ServerContext* context, const temper::v1::GetBatchReportRequest* request,
                              grpc::ServerWriter<temper::v1::BatchReportChunk>* writer) override;
  // SSH hosts (host_service.cpp).
  grpc::Status ListHosts(grpc::ServerContext* context, const temper::v1::ListHostsRequest* request,
                         temper::v1::ListHostsResponse* response) override;
  grpc::Status AcceptHostKey(grpc::ServerContext* context, const temper::v1::AcceptHostKeyRequest* request,
                             temper::v1::AcceptHostKeyResponse* response) override;
  grpc::Status ClearHost(grpc::ServerContext* context, const temper::v1::ClearHostRequest* request,
                         temper::v1::Host* response) override;
  grpc::Status ExportBatch(grpc::ServerContext* context, const temper::v1::ExportBatchRequest* request,
                           grpc::ServerWriter<temper::v1::ExportChunk>* writer) override;
  grpc::Status RevertBatch(grpc::ServerContext* context, const temper::v1::RevertBatchRequest* request,
                           temper::v1::RevertBatchResponse* response) override;
  grpc::Status ConfirmReboot(grpc::ServerContext* context, const temper::v1::ConfirmRebootRequest* request,
                             temper::v1::ConfirmRebootResponse* response) override;
  // The library of proven fixes (library_service.cpp).
  grpc::Status ListFixes(grpc::ServerContext* context, const temper::v1::ListFixesRequest* request,
                         temper::v1::ListFixesResponse* response) override;
  grpc::Status GetFix(grpc::ServerContext* context, const temper::v1::GetFixRequest* request,
                      temper::v1::Fix* response) override;
  grpc::Status RetireFix(grpc::ServerContext* context, const temper::v1::RetireFixRequest* request,
                         temper::v1::Fix* response) override;
  grpc::Status ExportFixes(grpc::ServerContext* context, const temper::v1::ExportFixesRequest* request,
                           grpc::ServerWriter<temper::v1::ExportChunk>* writer) override;
  // Fleets (apply_service.cpp).
  grpc::Status ApplyBatch(grpc::ServerContext* context, const temper::v1::ApplyBatchRequest* request,
                          temper::v1::ApplyBatchResponse* response) override;
  // Twins (twin_service.cpp). Without UseTwins, UNAVAILABLE.
  grpc::Status CreateTwin(grpc::ServerContext* context, const temper::v1::CreateTwinRequest* request,
                          temper::v1::Twin* response) override;
  grpc::Status ListTwins(grpc::ServerContext* context, const temper::v1::ListTwinsRequest* request,
                         temper::v1::ListTwinsResponse* response) override;
  grpc::Status RemoveTwin(grpc::ServerContext* context, const temper::v1::RemoveTwinRequest* request,
                          temper::v1::Twin* response) override;
  // The twins registry (twins.h); call before serving. `twins` must outlive the service.
  void UseTwins(Twins* twins) { twins_ = twins; }

 private:
  // The start of every sync call: its caller's role must allow `method` (Authorize), and it takes one
  // of the caller's call slots for as long as the returned slot lives (ClientLimits::EnterCall).
  // PermissionDenied or ResourceExhausted naming why not.
  Result<ClientLimits::CallSlot> Admit(const grpc::ServerContext& context, std::string_view method);
  // SubmitBatch's one domain call, for a request ValidateSubmit accepted (batch_request.h): the
  // caller's batch quota reserved (ResourceExhausted when spent), an SSH host named on submit
  // (`host`, else empty) registered as a target, the batch stored and the runner woken.
  Result<StateStore::Submitted> Submit(const ClientIdentity& caller, const NewBatch& batch, const std::string& host);
  // What ValidateSubmit checks a batch for `caller` against, `method` naming the call in refusals and
  // in the authorization of its targets (SubmitBatch, ApplyBatch).
  SubmitContext SubmitChecks(const ClientIdentity& caller, std::string_view method);
  // ApplyBatch's domain call: Submit's for every batch of a fleet (`hosts[i]`: the SSH host
  // batches[i] names, to register, or empty), stored together (StateStore::SubmitFleet) or not at all.
  Result<std::vector<StateStore::Submitted>> SubmitFleet(const ClientIdentity& caller,
                                                         const std::vector<NewBatch>& batches,
                                                         const std::vector<std::string>& hosts);
  // Streams `file` to an export's client in chunks (message_chunks.h), the first naming the file; a
  // client that cancels or goes away ends it, logged with `what` (ExportBatch, ExportFixes).
  grpc::Status SendExport(grpc::ServerContext* context, grpc::ServerWriter<temper::v1::ExportChunk>* writer,
                          const evidence::ExportedFile& file, std::string_view what) const;
  // AuthorizeOnTarget for a call on batch `batch_id`: its target decides; NOT_FOUND for no such batch.
  grpc::Status AuthorizeOnBatch(const grpc::ServerContext& context, std::string_view method, int64_t batch_id) const;

  const DaemonConfig& config_;
  StateStore& store_;
  Journal& journal_;
  LoopRunner& runner_;
  SshHosts& hosts_;
  FixLibrary& library_;
  const std::vector<stig::DisaStig>& disa_stigs_;  // temperd's disa_stigs: directory
  const Logger& log_;
  ClientLimits limits_;
  JournalWatchers watchers_;
  Twins* twins_ = nullptr;
};

}  // namespace temper
