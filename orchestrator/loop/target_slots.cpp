#include "orchestrator/loop/target_slots.h"

#include <fmt/format.h>

#include "orchestrator/loop/plan_only.h"
#include "orchestrator/loop/target_factory.h"

namespace temper {

TargetSlots::Lease::~Lease() {
  if (!lock_.owns_lock()) return;  // moved from
  std::lock_guard guard(slot_->holder_mu);
  slot_->holder.clear();
}

TargetSlots::TargetSlots(const DaemonConfig& config, Journal& journal, const Logger& log)
    : config_(config), journal_(journal), log_(log) {
  for (const TargetConfig& t : config_.targets) Add(t);
}

std::pair<const TargetConfig*, bool> TargetSlots::Add(const TargetConfig& target) {
  std::lock_guard lock(slots_mu_);
  auto [it, added] = slots_.try_emplace(target.name);
  if (added) {
    it->second = std::make_unique<Slot>();
    it->second->config = target;
    order_.push_back(&it->second->config);
  }
  return {&it->second->config, added};
}

std::vector<const TargetConfig*> TargetSlots::Targets() const {
  std::lock_guard lock(slots_mu_);
  return order_;
}

Result<TargetSlots::Slot*> TargetSlots::Find(const std::string& target) {
  std::lock_guard lock(slots_mu_);
  auto it = slots_.find(target);
  if (it == slots_.end()) {
    return Status::NotFound(
        fmt::format("target '{}' is neither configured in {} nor an SSH host named on submit", target, config_.source));
  }
  return it->second.get();
}

Result<TargetSlots::Lease> TargetSlots::Acquire(const std::string& target, const std::string& holder) {
  TEMPER_ASSIGN_OR_RETURN(Slot * slot, Find(target));
  return Ready(slot, std::unique_lock(slot->mu), holder);
}

Result<TargetSlots::Lease> TargetSlots::TryAcquire(const std::string& target, const std::string& holder) {
  TEMPER_ASSIGN_OR_RETURN(Slot * slot, Find(target));
  std::unique_lock lock(slot->mu, std::try_to_lock);
  if (!lock.owns_lock()) {
    std::lock_guard guard(slot->holder_mu);
    return Status::FailedPrecondition(fmt::format("target {} is in use by {}; try again when it is done", target,
                                                  slot->holder.empty() ? "another request" : slot->holder));
  }
  return Ready(slot, std::move(lock), holder);
}

Status TargetSlots::Close(const std::string& target) {
  Result<Slot*> slot = Find(target);
  if (!slot.ok()) return Status::OK();
  std::unique_lock lock((*slot)->mu, std::try_to_lock);
  if (!lock.owns_lock()) {
    std::lock_guard guard((*slot)->holder_mu);
    return Status::FailedPrecondition(fmt::format("target {} is in use by {}; try again when it is done", target,
                                                  (*slot)->holder.empty() ? "another request" : (*slot)->holder));
  }
  (*slot)->target.reset();
  return Status::OK();
}

Result<TargetSlots::Lease> TargetSlots::Ready(Slot* slot, std::unique_lock<std::mutex> lock,
                                              const std::string& holder) {
  {
    std::lock_guard guard(slot->holder_mu);
    slot->holder = holder;
  }
  Lease lease(slot, std::move(lock));
  const TargetConfig& config = slot->config;
  if (!slot->target) {
    TEMPER_ASSIGN_OR_RETURN(slot->target, OpenTarget(config, config_, log_));
  }
  Result<bool> reverted = RevertEndedPlan(journal_, *slot->target, config.name);
  if (!reverted.ok()) {
    return reverted.status().WithContext(fmt::format("target {}: reverting what a plan-only batch left", config.name));
  }
  if (*reverted) log_.Warning("target {}: reverted the changes an interrupted plan-only batch left", config.name);
  return lease;
}

}  // namespace temper
