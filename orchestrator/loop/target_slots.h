// TargetSlots: each target's one open stig::Target, and who is using it. Targets are the
// configured ones and the SSH hosts named on submit (Add).
//
// A target is driven by one owner at a time (stig/target.h): its loop thread while a batch runs,
// or a request such as `temper revert` in between batches. A slot holds the target, opened on
// first use and kept open (opening mounts it), behind a mutex: Acquire waits for it, TryAcquire
// refuses at once and says who holds it. Before handing a target out, the slot reverts what an
// ended plan-only batch may have left on it (plan_only.h), so nothing builds on a plan.
//
// Thread safety: all methods may be called from any thread. A Lease is used by one thread.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/log.h"
#include "common/status.h"
#include "orchestrator/config/daemon_config.h"
#include "orchestrator/store/journal.h"
#include "stig/target.h"

namespace temper {

class TargetSlots {
  struct Slot;

 public:
  // Exclusive use of one target until destroyed.
  class Lease {
   public:
    Lease(Lease&&) noexcept = default;
    Lease& operator=(Lease&&) = delete;
    ~Lease();
    stig::Target& target() { return *slot_->target; }
    // Closes the target: the next lease opens it afresh (an SSH host a person must look at first).
    void CloseTarget() { slot_->target.reset(); }

   private:
    friend class TargetSlots;
    Lease(Slot* slot, std::unique_lock<std::mutex> lock) : slot_(slot), lock_(std::move(lock)) {}
    Slot* slot_;
    std::unique_lock<std::mutex> lock_;
  };

  // One slot per target of `config`. Everything referenced must outlive the slots.
  TargetSlots(const DaemonConfig& config, Journal& journal, const Logger& log);

  // A slot for a target that is not configured (an SSH host named on submit). Returns the slot's
  // copy of `target`, which lives as long as the slots, and whether it is new (false: a slot of
  // that name was there, and is kept as it was).
  std::pair<const TargetConfig*, bool> Add(const TargetConfig& target);
  // Every slot's target, configured ones first.
  std::vector<const TargetConfig*> Targets() const;

  // Waits until the target is free, opens it if needed, and hands it to `holder` ("batch 7").
  // NotFound for a target that is not configured; the target's Open errors.
  Result<Lease> Acquire(const std::string& target, const std::string& holder);
  // As Acquire, but FailedPrecondition at once, naming the holder, when the target is in use.
  Result<Lease> TryAcquire(const std::string& target, const std::string& holder);
  // Closes the target's open stig::Target (a rootfs target unmounts), without opening one that is
  // not open, so that its files may be deleted (a twin removed). FailedPrecondition naming the
  // holder when it is in use; OK for a target without a slot.
  Status Close(const std::string& target);

 private:
  struct Slot {
    TargetConfig config;
    std::mutex mu;                         // held by the lease
    std::unique_ptr<stig::Target> target;  // under mu
    std::mutex holder_mu;
    std::string holder;  // under holder_mu; empty when free
  };

  Result<Slot*> Find(const std::string& target);
  // With `lock` held: opens the target if needed and reverts an ended plan's leftovers.
  Result<Lease> Ready(Slot* slot, std::unique_lock<std::mutex> lock, const std::string& holder);

  const DaemonConfig& config_;
  Journal& journal_;
  const Logger& log_;
  mutable std::mutex slots_mu_;
  std::map<std::string, std::unique_ptr<Slot>, std::less<>> slots_;  // under slots_mu_; never removed
  std::vector<const TargetConfig*> order_;                           // under slots_mu_
};

}  // namespace temper
