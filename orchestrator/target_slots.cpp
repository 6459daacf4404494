#include "orchestrator/target_slots.h"

#include <fmt/format.h>

#include "orchestrator/plan_only.h"
#include "stig/rootfs_target.h"

namespace temper {

TargetSlots::Lease::~Lease() {
  if (!lock_.owns_lock()) return;  // moved from
  std::lock_guard guard(slot_->holder_mu);
  slot_->holder.clear();
}

TargetSlots::TargetSlots(const DaemonConfig& config, Journal& journal, const Logger& log)
    : config_(config), journal_(journal), log_(log) {
  for (const TargetConfig& t : config_.targets) {
    auto slot = std::make_unique<Slot>();
    slot->config = &t;
    slots_.emplace(t.name, std::move(slot));
  }
}

Result<TargetSlots::Slot*> TargetSlots::Find(const std::string& target) {
  auto it = slots_.find(target);
  if (it == slots_.end()) {
    return Status::NotFound(fmt::format("target '{}' is not configured in {}", target, config_.source));
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

Result<TargetSlots::Lease> TargetSlots::Ready(Slot* slot, std::unique_lock<std::mutex> lock, const std::string& holder) {
  {
    std::lock_guard guard(slot->holder_mu);
    slot->holder = holder;
  }
  Lease lease(slot, std::move(lock));
  const TargetConfig& config = *slot->config;
  if (!slot->target) {
    // `temper target create` lays a rootfs target out as <path>/root (the root) and <path>/state.
    Result<std::unique_ptr<stig::RootfsTarget>> opened =
        stig::RootfsTarget::Open(config.name, config.path + "/state", config.path + "/root", config_.package_cache);
    if (!opened.ok()) return opened.status().WithContext(fmt::format("target {} ({})", config.name, config.path));
    slot->target = std::move(*opened);
  }
  Result<bool> reverted = RevertEndedPlan(journal_, *slot->target, config.name);
  if (!reverted.ok()) {
    return reverted.status().WithContext(fmt::format("target {}: reverting what a plan-only batch left", config.name));
  }
  if (*reverted) log_.Warning("target {}: reverted the changes an interrupted plan-only batch left", config.name);
  return lease;
}

}  // namespace temper
