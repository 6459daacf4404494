#include "orchestrator/loop/loop_runner.h"

#include <fmt/format.h>

#include "orchestrator/journal_event_types.h"
#include "orchestrator/loop/reboot_verification.h"
#include "stig/scap/content_trust.h"
#include "stig/ssh/ssh_target.h"

namespace temper {

namespace {
// Idle threads also look at the store this often, in case a wake-up was missed.
constexpr auto kIdlePoll = std::chrono::seconds(5);
}  // namespace

LoopRunner::LoopRunner(const DaemonConfig& config, Journal& journal, const RoleModels* models, const Logger& log,
                       SshHosts* hosts)
    : config_(config), journal_(journal), models_(models), log_(log), hosts_(hosts), slots_(config, journal, log) {
  // Hosts named on submit by an earlier daemon: their batches (and reverts) find their slots.
  if (hosts_) {
    for (const TargetConfig& target : hosts_->Submitted()) slots_.Add(target);
  }
}

LoopRunner::~LoopRunner() { Stop(); }

void LoopRunner::Start() {
  if (models_ == nullptr) {
    log_.Warning("{}", WhyQueued());
    return;
  }
  std::lock_guard lock(mu_);
  started_ = true;
  for (const TargetConfig* target : slots_.Targets()) {
    threads_.emplace_back([this, target] { TargetThread(*target); });
  }
}

void LoopRunner::AddTarget(const TargetConfig& target) {
  auto [kept, added] = slots_.Add(target);
  std::lock_guard lock(mu_);
  if (!added || !started_ || stopping_) return;  // not started: Start runs every slot's thread
  threads_.emplace_back([this, kept] { TargetThread(*kept); });
}

void LoopRunner::Wake() {
  if (models_ == nullptr) {
    log_.Warning("a batch was submitted, but {}", WhyQueued());
    return;
  }
  {
    std::lock_guard lock(mu_);
    ++wake_count_;
  }
  wake_.notify_all();
}

std::string LoopRunner::WhyQueued() const {
  if (models_ != nullptr) return "";
  std::string roles;
  for (const char* role : ModelsConfig::kRoleNames) roles += fmt::format("{}{}", roles.empty() ? "" : ", ", role);
  return fmt::format(
      "no model is configured for the roles {} ({} has no `models:` entry naming a models.yaml; see "
      "config/models.yaml): batches stay queued until temperd starts with one",
      roles, config_.source);
}

std::string LoopRunner::WhyWaiting(const BatchRecord& batch) const {
  if (batch.state != BatchState::kQueued) return "";
  std::string stalled = WhyQueued();
  if (!stalled.empty()) return stalled;
  Result<std::optional<int64_t>> running = journal_.store().RunningBatch(batch.target);
  // Only a hint: a store that cannot say leaves it out rather than failing the caller.
  if (!running.ok() || !running->has_value()) return "";
  return fmt::format("batch {} is running on target {}; this batch starts after it", **running, batch.target);
}

void LoopRunner::Cancel(int64_t batch_id) {
  std::lock_guard lock(mu_);
  auto it = running_.find(batch_id);
  if (it != running_.end()) it->second->RequestCancel();
}

void LoopRunner::Stop() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    threads.swap(threads_);
  }
  wake_.notify_all();
  for (std::thread& t : threads) t.join();
}

void LoopRunner::TargetThread(const TargetConfig& config) {
  while (true) {
    uint64_t seen;
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
      seen = wake_count_;
    }
    Result<std::optional<BatchRecord>> reboot = journal_.store().NextRebootCheckForTarget(config.name);
    if (!reboot.ok())
      log_.Error("target {}: reading reboot confirmations: {}", config.name, reboot.status().ToString());
    if (reboot.ok() && reboot->has_value()) {
      Status verified = VerifyReboot(config, **reboot);
      if (verified.ok()) continue;
      // Not retried at once: a store that cannot record the outcome waits like an idle thread.
      log_.Error("batch {}: verifying after the reboot: {}", (*reboot)->id, verified.ToString());
    } else {
      Result<std::optional<BatchRecord>> next = journal_.store().NextBatchForTarget(config.name);
      if (!next.ok()) log_.Error("target {}: reading the queue: {}", config.name, next.status().ToString());
      if (next.ok() && next->has_value()) {
        RunBatch(config, std::move(**next));
        continue;
      }
    }
    std::unique_lock lock(mu_);
    wake_.wait_for(lock, kIdlePoll, [&] { return stopping_ || wake_count_ != seen; });
  }
}

void LoopRunner::RunBatch(const TargetConfig& config, BatchRecord batch) {
  Result<const LoadedContent*> content = ContentFor(batch);
  if (!content.ok()) return FailBatch(batch, content.status());
  const bool ssh = config.type == "ssh" && hosts_ != nullptr;
  if (ssh) {
    std::optional<SshHostState> host = hosts_->Find(config.name);
    if (host && host->state == HostState::kNeedsHuman) {
      return FailBatch(batch, Status::FailedPrecondition(fmt::format(
                                  "host {} needs a human: {} (once it has been checked, `temper hosts clear {}`)",
                                  config.name, host->detail, config.name)));
    }
  }
  Result<TargetSlots::Lease> lease = slots_.Acquire(config.name, fmt::format("batch {}", batch.id));
  if (!lease.ok()) {
    if (ssh) (void)hosts_->SetState(config.name, HostState::kIdle, lease.status().ToString(), batch.id);
    return FailBatch(batch, lease.status());
  }
  if (ssh) (void)hosts_->SetState(config.name, HostState::kRunning, "", batch.id);
  LoopServices services{journal_, *models_,       (*content)->content,     *(*content)->evaluator,
                        log_,     results_root(), config_.fixpoint_passes, config_.cross_check_verification};
  BatchLoop loop(std::move(services), lease->target(), batch, [this] {
    std::lock_guard lock(mu_);
    return stopping_;
  });
  {
    std::lock_guard lock(mu_);
    running_[batch.id] = &loop;
  }
  log_.Info("batch {}: running on target {}", batch.id, config.name);
  Status ran = loop.Run();
  {
    std::lock_guard lock(mu_);
    running_.erase(batch.id);
  }
  if (!ran.ok()) {
    log_.Error("batch {}: {}", batch.id, ran.ToString());
    loop.Fail(ran);
  }
  if (ssh) RecordHost(config, *lease, batch, ran);
}

void LoopRunner::RecordHost(const TargetConfig& config, TargetSlots::Lease& lease, const BatchRecord& batch,
                            const Status& ran) {
  auto* host = dynamic_cast<stig::SshTarget*>(&lease.target());
  Status recorded;
  if (host && host->needs_human()) {
    recorded = hosts_->SetState(config.name, HostState::kNeedsHuman, *host->needs_human(), batch.id);
    lease.CloseTarget();  // a person decides what happens next; the next batch opens it afresh
  } else {
    bool stopping;
    {
      std::lock_guard lock(mu_);
      stopping = stopping_;
    }
    std::string detail = !ran.ok()  ? fmt::format("batch {} failed: {}", batch.id, ran.ToString())
                         : stopping ? fmt::format("batch {} paused: temperd stopped", batch.id)
                                    : fmt::format("batch {} ended", batch.id);
    recorded = hosts_->SetState(config.name, HostState::kIdle, detail, batch.id);
  }
  if (!recorded.ok()) log_.Error("host {}: recording its state: {}", config.name, recorded.ToString());
}

Status LoopRunner::VerifyReboot(const TargetConfig& config, const BatchRecord& batch) {
  Result<const LoadedContent*> content = ContentFor(batch);
  if (!content.ok()) return AbandonRebootVerification(journal_, batch, content.status());
  Result<TargetSlots::Lease> lease = slots_.Acquire(config.name, fmt::format("the reboot check of batch {}", batch.id));
  if (!lease.ok()) return AbandonRebootVerification(journal_, batch, lease.status());
  log_.Info("batch {}: verifying its reboot_pending rules on target {} after the reboot", batch.id, config.name);
  return VerifyAfterReboot(journal_, lease->target(), *(*content)->evaluator, results_root(), batch);
}

Result<const LoopRunner::LoadedContent*> LoopRunner::ContentFor(const BatchRecord& batch) {
  // The file was trusted at submit; check again, since its directory or mode may have changed since.
  Result<std::string> path = stig::ResolveTrustedDatastream(batch.datastream, config_.content_dirs);
  if (!path.ok()) return path.status().WithContext(fmt::format("batch {}", batch.id));
  std::lock_guard lock(content_mu_);
  auto key = std::make_pair(*path, batch.profile);
  auto it = contents_.find(key);
  if (it != contents_.end()) return it->second.get();
  Result<stig::Content> loaded = stig::Content::Load(*path, batch.profile);
  if (!loaded.ok()) return loaded.status().WithContext(fmt::format("batch {}", batch.id));
  auto entry = std::make_unique<LoadedContent>(LoadedContent{std::move(*loaded), nullptr});
  entry->evaluator = std::make_unique<stig::Evaluator>(entry->content, stig::EvaluatorOptions{}, log_);
  return (contents_[key] = std::move(entry)).get();
}

Result<const stig::Content*> LoopRunner::ContentOf(const BatchRecord& batch) {
  TEMPER_ASSIGN_OR_RETURN(const LoadedContent* loaded, ContentFor(batch));
  return &loaded->content;
}

Result<RevertOutcome> LoopRunner::Revert(const RevertRequest& request) {
  TEMPER_ASSIGN_OR_RETURN(BatchRecord batch, journal_.store().GetBatch(request.batch_id));
  // A batch left running by a restart resumes from its own snapshots: nothing may move them.
  TEMPER_ASSIGN_OR_RETURN(std::optional<int64_t> running, journal_.store().RunningBatch(batch.target));
  if (running) {
    return Status::FailedPrecondition(fmt::format(
        "batch {} is running on target {}: a revert must wait until it ends (or cancel it with `temper cancel {}`)",
        *running, batch.target, *running));
  }
  TEMPER_RETURN_IF_ERROR(CheckRevertRequest(batch, request));
  TEMPER_ASSIGN_OR_RETURN(const LoadedContent* content, ContentFor(batch));
  TEMPER_ASSIGN_OR_RETURN(TargetSlots::Lease lease,
                          slots_.TryAcquire(batch.target, fmt::format("a revert of batch {}", batch.id)));
  RevertServices services{journal_, content->content, *content->evaluator, results_root()};
  Result<RevertOutcome> out = RevertBatch(services, lease.target(), request);
  if (out.ok()) {
    log_.Info("batch {}: reverted {}", batch.id, request.rule_id.empty() ? "the whole batch" : request.rule_id);
  }
  return out;
}

void LoopRunner::FailBatch(const BatchRecord& batch, const Status& error) {
  log_.Error("batch {}: {}", batch.id, error.ToString());
  LoopStep step;
  step.batch_id = batch.id;
  step.batch_state = BatchState::kFailed;
  step.batch_error = error.ToString();
  NewEvent event;
  event.batch_id = batch.id;
  event.target = batch.target;
  event.role = "daemon";
  event.type = EventTypeName(EventType::kBatchFailed);
  event.data_json = EventDataJson({{"error", error.ToString()}});
  step.events.push_back(std::move(event));
  Result<StepCommitted> committed = journal_.Commit(step);
  if (!committed.ok()) log_.Error("batch {}: recording its failure: {}", batch.id, committed.status().ToString());
}

}  // namespace temper
