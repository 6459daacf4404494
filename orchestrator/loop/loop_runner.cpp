#include "orchestrator/loop/loop_runner.h"

#include <set>
#include <system_error>

#include <fmt/format.h>

#include "orchestrator/journal_event_types.h"
#include "orchestrator/loop/reboot_verification.h"
#include "stig/scap/content_trust.h"
#include "stig/ssh/ssh_target.h"

namespace temper {

namespace {
// The dispatcher also looks at the store this often, in case a wake-up was missed.
constexpr auto kIdlePoll = std::chrono::seconds(5);
// After the state store fails, a target's thread pauses this long before trying it again, doubling
// up to the longest: a full disk then costs a log line a few minutes, not a hot loop of retries.
constexpr std::chrono::seconds kFirstStorePause{1};
constexpr std::chrono::seconds kLongestStorePause{300};

}  // namespace

LoopRunner::LoopRunner(const DaemonConfig& config, Journal& journal, const RoleModels* models, const Logger& log,
                       SshHosts* hosts)
    : config_(config),
      journal_(journal),
      models_(models),
      log_(log),
      hosts_(hosts),
      datastreams_(log),
      slots_(config, journal, log) {
  // Hosts named on submit by an earlier daemon: their batches (and reverts) find their slots.
  if (hosts_) {
    for (const TargetConfig& target : hosts_->Submitted()) slots_.Add(target);
  }
}

LoopRunner::~LoopRunner() { Stop(); }

void LoopRunner::Start() {
  // Without models only the batches that call none run: apply batches, and reboot checks.
  if (models_ == nullptr) log_.Warning("{}", WhyQueued());
  std::lock_guard lock(mu_);
  started_ = true;
  try {
    dispatcher_ = std::thread([this] { DispatchThread(); });
  } catch (const std::system_error& e) {
    dispatcher_failure_ = e.what();
    log_.Error("the loop could not start its dispatcher thread ({}): batches stay queued until temperd restarts",
               e.what());
  }
}

void LoopRunner::AddTarget(const TargetConfig& target) { slots_.Add(target); }

size_t LoopRunner::target_threads() const {
  std::lock_guard lock(mu_);
  return workers_.size();
}

void LoopRunner::DispatchThread() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    const uint64_t seen = wake_count_;
    std::vector<std::thread> ended;
    std::set<std::string> busy;
    for (auto it = workers_.begin(); it != workers_.end();) {
      if (it->second.done) {
        ended.push_back(std::move(it->second.thread));
        it = workers_.erase(it);
      } else {
        busy.insert(it->first);
        ++it;
      }
    }
    lock.unlock();
    for (std::thread& t : ended) t.join();  // each has returned, or is returning, from TargetThread
    std::vector<const TargetConfig*> with_work;
    size_t unreadable = 0;
    Status first_error;
    for (const TargetConfig* target : slots_.Targets()) {
      Status error;
      if (!busy.contains(target->name) && HasWork(*target, error)) with_work.push_back(target);
      if (!error.ok() && unreadable++ == 0) first_error = error.WithContext("target " + target->name);
    }
    // One line a pass, however many targets: a failing store must not flood the log.
    if (unreadable > 0) {
      log_.Error("the loop could not read the queues of {} targets ({}); it looks again in {} s", unreadable,
                 first_error.ToString(), kIdlePoll.count());
    }
    lock.lock();
    for (const TargetConfig* target : with_work) {
      if (!stopping_ && !workers_.contains(target->name)) StartTargetThreadLocked(target);
    }
    wake_.wait_for(lock, kIdlePoll, [&] { return stopping_ || wake_count_ != seen; });
  }
}

bool LoopRunner::HasWork(const TargetConfig& target, Status& error) {
  Result<std::optional<BatchRecord>> reboot = journal_.store().NextRebootCheckForTarget(target.name);
  if (!reboot.ok()) {
    error = reboot.status();
    return false;
  }
  if (reboot->has_value()) return true;
  Result<std::optional<BatchRecord>> next = journal_.store().NextBatchForTarget(target.name);
  if (!next.ok()) {
    error = next.status();
    return false;
  }
  if (!next->has_value() || !CanRun(**next)) return false;
  std::lock_guard lock(mu_);
  return FleetHasRoomLocked(**next);
}

bool LoopRunner::FleetHasRoomLocked(const BatchRecord& batch) const {
  if (batch.fleet == 0 || batch.state == BatchState::kRunning) return true;  // an interrupted one resumes
  auto running = fleet_running_.find(batch.fleet);
  return running == fleet_running_.end() || running->second < std::max<uint32_t>(batch.at_once, 1);
}

void LoopRunner::StartTargetThreadLocked(const TargetConfig* target) {
  try {
    workers_[target->name].thread = std::thread([this, target] { TargetThread(*target); });
  } catch (const std::system_error& e) {
    workers_.erase(target->name);
    // Logged when it starts failing, not every pass; the batches say it meanwhile (WhyWaiting).
    if (start_failures_.emplace(target->name, e.what()).second) {
      log_.Error("target {}: could not start its thread ({}); its batches stay queued, tried again every {} s",
                 target->name, e.what(), kIdlePoll.count());
    }
    return;
  }
  if (start_failures_.erase(target->name) > 0) log_.Info("target {}: its thread started", target->name);
}

void LoopRunner::Wake() {
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
  std::string stalled = CanRun(batch) ? "" : WhyQueued();
  if (!stalled.empty()) return stalled;
  {
    std::lock_guard lock(mu_);
    if (!dispatcher_failure_.empty()) {
      return fmt::format("temperd could not start its loop ({}); batches stay queued until it restarts",
                         dispatcher_failure_);
    }
    auto failed = start_failures_.find(batch.target);
    if (failed != start_failures_.end()) {
      return fmt::format("temperd could not start a thread for target {} ({}); it tries again every {} s", batch.target,
                         failed->second, kIdlePoll.count());
    }
  }
  if (batch.fleet != 0) {
    std::lock_guard lock(mu_);
    if (!FleetHasRoomLocked(batch)) {
      return fmt::format(
          "{} batches of its fleet (batch {}'s `temper apply`) run at once; this one starts when one ends",
          batch.at_once, batch.fleet);
    }
  }
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
  std::thread dispatcher;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    dispatcher.swap(dispatcher_);
  }
  wake_.notify_all();
  // The dispatcher first: once it is gone, no thread is started.
  if (dispatcher.joinable()) dispatcher.join();
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mu_);
    for (auto& [name, worker] : workers_) threads.push_back(std::move(worker.thread));
    workers_.clear();
  }
  for (std::thread& t : threads) t.join();
}

void LoopRunner::TargetThread(const TargetConfig& config) {
  std::optional<RefusedRecord> unrecorded;  // a batch's failure the store has not taken yet
  std::chrono::seconds pause = kFirstStorePause;
  while (true) {
    uint64_t seen;
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
      seen = wake_count_;
    }
    if (unrecorded) {
      // Nothing else runs on this target until the batch it failed is on record; the store that
      // just refused is given a pause first.
      unrecorded->NoteRefusal();
      PauseAfterStoreError(config, pause,
                           fmt::format("batch {} failed and the state store cannot record it yet: {}",
                                       unrecorded->step.batch_id, unrecorded->refused.ToString()));
      Result<StepCommitted> recorded = journal_.Commit(unrecorded->step);
      if (!recorded.ok()) {
        unrecorded->refused = recorded.status();
        continue;
      }
      log_.Info("batch {}: its failure is recorded", unrecorded->step.batch_id);
      unrecorded.reset();
      pause = kFirstStorePause;
      continue;
    }
    Result<std::optional<BatchRecord>> reboot = journal_.store().NextRebootCheckForTarget(config.name);
    if (!reboot.ok()) {
      PauseAfterStoreError(config, pause, "reading reboot confirmations: " + reboot.status().ToString());
      continue;
    }
    if (reboot->has_value()) {
      Status verified = VerifyReboot(config, **reboot);
      if (verified.ok()) {
        pause = kFirstStorePause;
        continue;
      }
      // Its outcome could not be recorded: not retried at once.
      PauseAfterStoreError(config, pause,
                           fmt::format("batch {}: verifying after the reboot: {}", (*reboot)->id, verified.ToString()));
      continue;
    }
    Result<std::optional<BatchRecord>> next = journal_.store().NextBatchForTarget(config.name);
    if (!next.ok()) {
      PauseAfterStoreError(config, pause, "reading the queue: " + next.status().ToString());
      continue;
    }
    if (next->has_value() && CanRun(**next) && TakeFleetPlace(**next)) {
      const int64_t fleet = (*next)->fleet;
      unrecorded = RunBatch(config, std::move(**next));
      if (fleet != 0) LeaveFleetPlace(fleet);
      if (!unrecorded) pause = kFirstStorePause;
      continue;
    }
    // No work left: the thread ends and the dispatcher starts another when work comes, unless a
    // wake-up came since the queue was read (its batch may have been committed after the read).
    std::lock_guard lock(mu_);
    if (stopping_ || wake_count_ == seen) {
      auto self = workers_.find(config.name);
      if (self != workers_.end()) self->second.done = true;  // joined on the dispatcher's next pass
      return;
    }
  }
}

bool LoopRunner::TakeFleetPlace(const BatchRecord& batch) {
  if (batch.fleet == 0) return true;
  std::lock_guard lock(mu_);
  if (!FleetHasRoomLocked(batch)) return false;  // its turn comes when one of the fleet ends (Wake)
  ++fleet_running_[batch.fleet];
  return true;
}

void LoopRunner::LeaveFleetPlace(int64_t fleet) {
  {
    std::lock_guard lock(mu_);
    if (--fleet_running_[fleet] == 0) fleet_running_.erase(fleet);
  }
  Wake();  // the fleet's next batch, on another target, may start now
}

void LoopRunner::PauseAfterStoreError(const TargetConfig& config, std::chrono::seconds& pause, const std::string& why) {
  log_.Error("target {}: {}; trying again in {} s", config.name, why, pause.count());
  std::unique_lock lock(mu_);
  wake_.wait_for(lock, pause, [&] { return stopping_; });
  pause = std::min(pause * 2, kLongestStorePause);
}

std::optional<RefusedRecord> LoopRunner::RunBatch(const TargetConfig& config, BatchRecord batch) {
  Result<const Datastreams::Loaded*> content = ContentFor(batch);
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
  LoopServices services{journal_, models_,        (*content)->content,     *(*content)->evaluator,
                        log_,     results_root(), config_.fixpoint_passes, config_.cross_check_verification};
  services.library = library_;
  const bool forks = lease->target().CanFork();
  services.parallel_why = ParallelAttemptsWhy(
      batch.options.parallel_attempts, forks, config_.parallel_attempts,
      AutoParallelAttempts(forks, WorkerEndpoint(), CpusAvailable(), config_.limits.parallel_attempts_per_batch));
  const std::string parallel_why = services.parallel_why;
  BatchLoop loop(std::move(services), lease->target(), batch, [this] {
    std::lock_guard lock(mu_);
    return stopping_;
  });
  {
    std::lock_guard lock(mu_);
    running_[batch.id] = &loop;
  }
  log_.Info("batch {}: running on target {}; attempts at once: {}", batch.id, config.name, parallel_why);
  Status ran = loop.Run();
  {
    std::lock_guard lock(mu_);
    running_.erase(batch.id);
  }
  std::optional<RefusedRecord> unrecorded;
  if (!ran.ok()) {
    log_.Error("batch {}: {}", batch.id, ran.ToString());
    unrecorded = loop.Fail(ran);
  }
  if (ssh) RecordHost(config, *lease, batch, ran);
  return unrecorded;
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
  Result<const Datastreams::Loaded*> content = ContentFor(batch);
  if (!content.ok()) return AbandonRebootVerification(journal_, batch, content.status());
  Result<TargetSlots::Lease> lease = slots_.Acquire(config.name, fmt::format("the reboot check of batch {}", batch.id));
  if (!lease.ok()) return AbandonRebootVerification(journal_, batch, lease.status());
  log_.Info("batch {}: verifying its reboot_pending rules on target {} after the reboot", batch.id, config.name);
  return VerifyAfterReboot(journal_, lease->target(), *(*content)->evaluator, results_root(), batch);
}

Result<const Datastreams::Loaded*> LoopRunner::ContentFor(const BatchRecord& batch) {
  Result<std::string> path = stig::ResolveTrustedDatastream(batch.datastream, config_.content_dirs);
  if (!path.ok()) return path.status().WithContext(fmt::format("batch {}", batch.id));
  Result<const Datastreams::Loaded*> loaded = datastreams_.Content(*path, batch.profile);
  if (!loaded.ok()) return loaded.status().WithContext(fmt::format("batch {}", batch.id));
  return loaded;
}

Result<const stig::Content*> LoopRunner::ContentOf(const BatchRecord& batch) {
  TEMPER_ASSIGN_OR_RETURN(const Datastreams::Loaded* loaded, ContentFor(batch));
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
  TEMPER_ASSIGN_OR_RETURN(const Datastreams::Loaded* content, ContentFor(batch));
  TEMPER_ASSIGN_OR_RETURN(TargetSlots::Lease lease,
                          slots_.TryAcquire(batch.target, fmt::format("a revert of batch {}", batch.id)));
  RevertServices services{journal_, content->content, *content->evaluator, results_root()};
  Result<RevertOutcome> out = RevertBatch(services, lease.target(), request);
  if (out.ok()) {
    log_.Info("batch {}: reverted {}", batch.id, request.rule_id.empty() ? "the whole batch" : request.rule_id);
  }
  return out;
}

std::optional<RefusedRecord> LoopRunner::FailBatch(const BatchRecord& batch, const Status& error) {
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
  if (committed.ok()) return std::nullopt;
  log_.Error("batch {}: recording its failure: {}", batch.id, committed.status().ToString());
  return RefusedRecord{std::move(step), committed.status()};
}

}  // namespace temper
