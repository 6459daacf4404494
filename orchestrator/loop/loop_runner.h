// LoopRunner: temperd's workers. Each target with work (configured, or an SSH host an admin
// registered, added with AddTarget) gets a thread that runs its batches one at a time (an
// interrupted batch first, then the oldest queued), so batches on different targets run in parallel
// and their role calls reach the model endpoints concurrently. A target without work holds no
// thread (issue 46: a thread per registered target grew temperd with every host until it could
// not start): one dispatcher thread looks for work at each Wake and every 5 s, starts the thread of
// a target that has some, and the thread ends once its target has none left. A thread that cannot
// be started is logged, said in the waiting batches' waiting_reason and tried again on the next
// pass; it never stops temperd.
//
// Fleets: the batches of one `temper apply` (StateStore::SubmitFleet) share a fleet id and an at_once;
// a target whose next batch belongs to a fleet that has at_once batches running waits (no thread)
// until one of them ends, which wakes the dispatcher. Each host's batch is still its own: one failing
// leaves the others running.
//
// SSH hosts: a host whose revert failed (stig/ssh/ssh_target.h) is marked needs_human in SshHosts and
// its batches fail at once, saying so, until a person clears it; its connection is dropped.
//
// Between batches a target's thread also verifies the batches whose host the operator said rebooted
// (reboot_verification.h), before queued batches change the target.
//
// Without models (no models.yaml) only apply batches (`temper apply`, which call no model) and
// reboot checks run: other batches are accepted and stay queued until a start with models, and
// hold their target's queue meanwhile (its batches run in order). A batch that cannot start (a
// datastream that does not load, a target that does not open) or whose loop fails (a model
// endpoint down after its retries, a target that cannot run commands) is marked failed with the
// error; the thread goes on with the next batch. Stop() lets each loop finish its current step and
// leaves its batch running, to be resumed by the next start.
//
// Between batches a target may be used for other work, such as `temper revert` (Revert), which
// takes the target only when no batch holds it (TargetSlots).
//
// The state store failing (its disk full, an I/O error) never spins a thread: a batch whose loop
// fails is marked failed with the error, and when the store cannot take even that record the
// target's thread keeps the record and tries it again after a pause that doubles from 1 s to
// 5 min (one log line per try), doing nothing else on that target meanwhile; reading the queue
// or recording a reboot check that fails waits the same way. Once the store takes the record
// the batch is failed with the error, which names the store's file system when it was full.
// (A restart meanwhile resumes the batch instead: the record was never made.)
//
// Thread safety: AddTarget, Wake, Cancel, Revert and Stop may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/log.h"
#include "common/status.h"
#include "orchestrator/config/daemon_config.h"
#include "orchestrator/loop/batch_loop.h"
#include "orchestrator/loop/batch_revert.h"
#include "orchestrator/loop/datastreams.h"
#include "orchestrator/loop/role_models.h"
#include "orchestrator/loop/ssh_hosts.h"
#include "orchestrator/loop/target_slots.h"
#include "orchestrator/store/journal.h"
#include "stig/scap/content.h"
#include "stig/scap/evaluator.h"

namespace temper {

class LoopRunner {
 public:
  // `models` and `hosts` may be null (no models.yaml; no SSH hosts registry). Everything referenced
  // must outlive the runner.
  LoopRunner(const DaemonConfig& config, Journal& journal, const RoleModels* models, const Logger& log,
             SshHosts* hosts = nullptr);
  ~LoopRunner();
  LoopRunner(const LoopRunner&) = delete;
  LoopRunner& operator=(const LoopRunner&) = delete;

  // The library of proven fixes the batches record kept fixes in and try first (fix_library.h);
  // without one (this default) nothing is recorded or tried. Call before Start; `library` must
  // outlive the runner.
  void UseLibrary(FixLibrary* library) { library_ = library; }
  // Starts the dispatcher (without models only apply batches and reboot checks run; see above).
  void Start();
  // A target that was not there at Start (an SSH host registered on submit): its slot is made now;
  // its thread starts once it has work.
  void AddTarget(const TargetConfig& target);
  // Closes `target` (unmounting a rootfs target) so its files may be deleted: a twin removed.
  // FailedPrecondition naming the holder while a batch or request uses it.
  Status CloseTarget(const std::string& target) { return slots_.Close(target); }
  // Target threads running now (for tests).
  size_t target_threads() const;
  // A batch was submitted: idle targets look for work now.
  void Wake();
  // Why `batch` has not started, for people and clients (Batch.waiting_reason): without models, "no
  // model is configured for the roles ..." naming temperd.yaml; with them, the batch running on its
  // target. "" when it is not queued, or nothing holds it up.
  std::string WhyWaiting(const BatchRecord& batch) const;
  // The batch was cancelled in the store: its loop stops at its next step.
  void Cancel(int64_t batch_id);
  // Idempotent; joins the threads.
  void Stop();
  // `temper revert` (batch_revert.h) on the batch's target. FailedPrecondition when a batch is
  // running on that target or the target is in use; otherwise as RevertBatch.
  Result<RevertOutcome> Revert(const RevertRequest& request);

  // The content `batch`'s datastream and profile load to, shared with its loop (datastreams.h).
  // Errors as Content::Load, or the datastream no longer trusted (stig/scap/content_trust.h).
  Result<const stig::Content*> ContentOf(const BatchRecord& batch);
  // The daemon's one reader of datastreams: the ids a submit is checked against, the content a
  // batch runs on.
  Datastreams& datastreams() { return datastreams_; }
  // The Worker role's endpoint and what it decodes at once, for sizing loop.parallel_attempts: auto
  // at a submit (parallel_attempts.h); an empty endpoint without models.
  EndpointCapacity WorkerEndpoint() const { return models_ ? models_->worker_capacity() : EndpointCapacity{}; }
  // Where loops keep OpenSCAP's results (LoopServices::results_root).
  std::string results_root() const { return config_.state_dir + "/results"; }

 private:
  // Why no queued batch can start on this daemon: its WhyWaiting without models; "" with them.
  std::string WhyQueued() const;
  // Whether this daemon can run `batch`: with models any; without, an apply batch only.
  bool CanRun(const BatchRecord& batch) const { return models_ != nullptr || batch.apply_from != 0; }
  void TargetThread(const TargetConfig& target);
  // Gives each target with work a thread, and joins the threads of targets whose work ran out.
  void DispatchThread();
  // Whether `target` has a queued (or interrupted) batch or a reboot to verify. A store that cannot
  // say counts as none; `error` gets its error.
  bool HasWork(const TargetConfig& target, Status& error);
  // Fleets (`temper apply`): at most a batch's at_once batches of its fleet run at a time. A batch
  // outside a fleet always has room. Call with mu_ held.
  bool FleetHasRoomLocked(const BatchRecord& batch) const;
  // Takes one of the fleet's places for `batch` (true), or says it must wait (false).
  bool TakeFleetPlace(const BatchRecord& batch);
  // A fleet's batch ended: its place goes to the next, and the targets look for work.
  void LeaveFleetPlace(int64_t fleet);
  // Starts `target`'s thread, or records why it could not (start_failures_). Call with mu_ held.
  void StartTargetThreadLocked(const TargetConfig* target);
  // Runs the batch to its end. Returns the step that records it failed when the state store
  // could not take it (the thread commits it again later), nullopt otherwise.
  std::optional<RefusedRecord> RunBatch(const TargetConfig& config, BatchRecord batch);
  // After the state store failed: logs `why` with the pause, then waits it out (only Stop ends the
  // wait early; submits do not). The pause doubles on each call, from 1 s to 5 min.
  void PauseAfterStoreError(const TargetConfig& config, std::chrono::seconds& pause, const std::string& why);
  // Errors only when the outcome could not be recorded.
  Status VerifyReboot(const TargetConfig& config, const BatchRecord& batch);
  // `batch`'s datastream trusted again (its directory or mode may have changed since the submit),
  // then its profile's content.
  Result<const Datastreams::Loaded*> ContentFor(const BatchRecord& batch);
  // Marks a batch that never started failed; the step when the store could not take it, as RunBatch.
  std::optional<RefusedRecord> FailBatch(const BatchRecord& batch, const Status& error);
  // After a batch on an SSH host: its state for `temper hosts`; closes a target that needs a human.
  void RecordHost(const TargetConfig& config, TargetSlots::Lease& lease, const BatchRecord& batch, const Status& ran);

  // After a batch on an SSH host: its state for `temper hosts`; drops a target that needs a human.
  void RecordHost(const TargetConfig& config, std::unique_ptr<stig::Target>& target, const BatchRecord& batch,
                  const Status& ran);

  const DaemonConfig& config_;
  Journal& journal_;
  const RoleModels* models_;
  const Logger& log_;
  SshHosts* hosts_;
  FixLibrary* library_ = nullptr;

  mutable std::mutex mu_;
  std::condition_variable wake_;
  uint64_t wake_count_ = 0;
  bool stopping_ = false;
  std::map<int64_t, BatchLoop*> running_;      // by batch id, while their loops run
  std::map<int64_t, uint32_t> fleet_running_;  // by fleet: its batches running now

  Datastreams datastreams_;

  bool started_ = false;
  TargetSlots slots_;
  struct TargetWorker {
    std::thread thread;
    bool done = false;  // its work ran out; the dispatcher joins it
  };
  std::map<std::string, TargetWorker> workers_;        // under mu_, by target name
  std::map<std::string, std::string> start_failures_;  // under mu_: targets whose thread did not start, why
  std::string dispatcher_failure_;                     // under mu_: why the dispatcher did not start
  std::thread dispatcher_;
};

}  // namespace temper
