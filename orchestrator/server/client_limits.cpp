#include "orchestrator/server/client_limits.h"

#include <algorithm>

#include <fmt/format.h>

namespace temper {

ClientLimits::WatchSlot::~WatchSlot() {
  if (limits_ != nullptr) limits_->CloseWatch(client_);
}

ClientLimits::BatchTicket::~BatchTicket() {
  if (limits_ != nullptr) limits_->ReleaseTicket(client_);
}

void ClientLimits::BatchTicket::Submitted(int64_t id) {
  if (limits_ == nullptr) return;
  limits_->AddBatch(client_, id);
  limits_ = nullptr;  // the reservation became the batch: counted once, not twice
}

Result<ClientLimits::WatchSlot> ClientLimits::OpenWatch(const std::string& client, bool exempt) {
  std::lock_guard lock(mu_);
  if (watch_streams_total_ >= limits_.watch_streams_total) {
    return Status::ResourceExhausted(
        fmt::format("temperd already serves {} watch streams, its limit for all clients together "
                    "(limits.watch_streams_total in temperd.yaml); close one and retry",
                    watch_streams_total_));
  }
  Client& c = clients_[client];
  if (!exempt && c.watch_streams >= limits_.watch_streams_per_client) {
    return Status::ResourceExhausted(
        fmt::format("{} already has {} watch streams open, the limit per client "
                    "(limits.watch_streams_per_client in temperd.yaml); close one and retry",
                    client, limits_.watch_streams_per_client));
  }
  ++c.watch_streams;
  ++watch_streams_total_;
  return WatchSlot(this, client);
}

void ClientLimits::CloseWatch(const std::string& client) {
  std::lock_guard lock(mu_);
  auto it = clients_.find(client);
  if (it == clients_.end()) return;
  --it->second.watch_streams;
  --watch_streams_total_;
  ForgetIfIdle(it);
}

void ClientLimits::ForgetIfIdle(std::map<std::string, Client>::iterator it) {
  const Client& c = it->second;
  if (c.calls == 0 && c.watch_streams == 0 && c.reserved_batches == 0 && c.active_batches.empty()) clients_.erase(it);
}

ClientLimits::CallSlot::~CallSlot() {
  if (limits_ != nullptr) limits_->LeaveCall(client_);
}

uint32_t ClientLimits::ThreadsKeptForAdmins() const { return std::max<uint32_t>(1, limits_.server_threads / 4); }

Result<ClientLimits::CallSlot> ClientLimits::EnterCall(const std::string& client, bool exempt) {
  if (exempt) return CallSlot(nullptr, client);
  std::lock_guard lock(mu_);
  auto held = clients_.find(client);
  if (held != clients_.end() && held->second.calls >= limits_.calls_per_client) {
    return Status::ResourceExhausted(
        fmt::format("{} already has {} calls in progress, the limit per client (limits.calls_per_client in "
                    "temperd.yaml); finish reading one and retry",
                    client, limits_.calls_per_client));
  }
  const uint32_t shared = limits_.server_threads - ThreadsKeptForAdmins();
  if (calls_counted_ >= shared) {
    return Status::ResourceExhausted(
        fmt::format("temperd's clients hold all {} of its call threads that are not kept for admins "
                    "(limits.server_threads in temperd.yaml, less a quarter); retry in a moment",
                    shared));
  }
  ++clients_[client].calls;
  ++calls_counted_;
  return CallSlot(this, client);
}

void ClientLimits::LeaveCall(const std::string& client) {
  std::lock_guard lock(mu_);
  auto it = clients_.find(client);
  if (it == clients_.end()) return;
  --it->second.calls;
  --calls_counted_;
  ForgetIfIdle(it);
}

Result<ClientLimits::BatchTicket> ClientLimits::ReserveBatch(const std::string& client, bool exempt, size_t rules,
                                                             uint32_t parallel_attempts,
                                                             const std::function<bool(int64_t)>& still_active) {
  if (exempt) return BatchTicket(nullptr, client);
  if (rules > limits_.rules_per_batch) {
    return Status::ResourceExhausted(fmt::format(
        "rule_ids: {} rules, above the limit of {} per batch (limits.rules_per_batch in temperd.yaml); submit them "
        "in several batches",
        rules, limits_.rules_per_batch));
  }
  if (parallel_attempts > limits_.parallel_attempts_per_batch) {
    return Status::ResourceExhausted(
        fmt::format("parallel_attempts: {}, above the limit of {} per batch (limits.parallel_attempts_per_batch in "
                    "temperd.yaml)",
                    parallel_attempts, limits_.parallel_attempts_per_batch));
  }
  std::lock_guard lock(mu_);
  Client& c = clients_[client];
  std::erase_if(c.active_batches, [&](int64_t id) { return !still_active(id); });
  if (c.active_batches.size() + c.reserved_batches >= limits_.active_batches_per_client) {
    const size_t active = c.active_batches.size() + c.reserved_batches;
    return Status::ResourceExhausted(
        fmt::format("{} already has {} batches queued or running, the limit per client "
                    "(limits.active_batches_per_client in temperd.yaml); wait for one to end or cancel one",
                    client, active));
  }
  ++c.reserved_batches;
  return BatchTicket(this, client);
}

void ClientLimits::AddBatch(const std::string& client, int64_t id) {
  std::lock_guard lock(mu_);
  Client& c = clients_[client];
  --c.reserved_batches;
  c.active_batches.insert(id);
}

void ClientLimits::ReleaseTicket(const std::string& client) {
  std::lock_guard lock(mu_);
  auto it = clients_.find(client);
  if (it == clients_.end()) return;
  --it->second.reserved_batches;
  ForgetIfIdle(it);
}

uint32_t ClientLimits::watch_streams(const std::string& client) const {
  std::lock_guard lock(mu_);
  auto it = clients_.find(client);
  return it == clients_.end() ? 0 : it->second.watch_streams;
}

uint32_t ClientLimits::watch_streams_total() const {
  std::lock_guard lock(mu_);
  return watch_streams_total_;
}

}  // namespace temper
