// ClientLimits: how much of temperd each client holds (active batches, open watch streams) against
// temperd.yaml's `limits:` (ClientLimitsConfig), so that no member of the socket's group can exhaust
// the daemon for the others (issue 46). A client is its ClientIdentity's key ("unix:1000",
// "token:ci"); an exempt client (an admin: root) passes every per-client limit, so root is always
// served, but its streams still count towards limits.watch_streams_total.
//
// Past a limit the call is refused with ResourceExhausted naming the limit and its config key.
// Counts live in memory: a restarted temperd starts every client's active batches at zero again
// (batches carry no submitter in the store), and counts the batches each client submits from then on.
//
// Thread safety: all methods may be called from any thread. A WatchSlot or BatchTicket is used by
// one thread at a time and must not outlive the ClientLimits.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "common/status.h"
#include "orchestrator/config/daemon_config.h"

namespace temper {

class ClientLimits {
 public:
  explicit ClientLimits(const ClientLimitsConfig& limits) : limits_(limits) {}
  ClientLimits(const ClientLimits&) = delete;
  ClientLimits& operator=(const ClientLimits&) = delete;

  // One open watch stream, counted until destroyed.
  class WatchSlot {
   public:
    WatchSlot(WatchSlot&& other) noexcept : limits_(other.limits_), client_(std::move(other.client_)) {
      other.limits_ = nullptr;
    }
    WatchSlot& operator=(WatchSlot&&) = delete;
    ~WatchSlot();

   private:
    friend class ClientLimits;
    WatchSlot(ClientLimits* limits, std::string client) : limits_(limits), client_(std::move(client)) {}
    ClientLimits* limits_;
    std::string client_;
  };

  // A slot for one more stream of `client`; ResourceExhausted past limits.watch_streams_per_client
  // (unless `exempt`) or limits.watch_streams_total.
  Result<WatchSlot> OpenWatch(const std::string& client, bool exempt);

  // A batch being submitted: it counts against its client from Reserve until the ticket dies, and
  // for as long as the batch is active once Submitted names it.
  class BatchTicket {
   public:
    BatchTicket(BatchTicket&& other) noexcept : limits_(other.limits_), client_(std::move(other.client_)) {
      other.limits_ = nullptr;
    }
    BatchTicket& operator=(BatchTicket&&) = delete;
    ~BatchTicket();
    // The store took the batch as `id` (an idempotent resubmit names the batch it already had):
    // the reservation becomes that batch, counted while it is active. Once only.
    void Submitted(int64_t id);

   private:
    friend class ClientLimits;
    BatchTicket(ClientLimits* limits, std::string client) : limits_(limits), client_(std::move(client)) {}
    ClientLimits* limits_;
    std::string client_;
  };

  // Checks a submit of `rules` rules and `parallel_attempts` against the limits and reserves one of
  // the client's active batches. `still_active(id)` says whether a batch counted earlier is still
  // queued or running (called under this object's lock, for this client's batches only: it must not
  // call back into ClientLimits). Exempt clients pass every check and are not counted.
  Result<BatchTicket> ReserveBatch(const std::string& client, bool exempt, size_t rules, uint32_t parallel_attempts,
                                   const std::function<bool(int64_t)>& still_active);

  // One call in progress on one of the sync server's threads (every call but WatchJournal), counted
  // until destroyed. A stream whose client stops reading (a report, an export) holds its thread as
  // long as the client likes, so a client is held to limits.calls_per_client at once, and all
  // clients but admins together to the sync threads less a quarter kept for admins: whatever the
  // others hold, root's calls find a thread.
  class CallSlot {
   public:
    CallSlot(CallSlot&& other) noexcept : limits_(other.limits_), client_(std::move(other.client_)) {
      other.limits_ = nullptr;
    }
    CallSlot& operator=(CallSlot&&) = delete;
    ~CallSlot();

   private:
    friend class ClientLimits;
    CallSlot(ClientLimits* limits, std::string client) : limits_(limits), client_(std::move(client)) {}
    ClientLimits* limits_;
    std::string client_;
  };

  // A slot for one more call of `client`; exempt clients are not counted. ResourceExhausted past
  // limits.calls_per_client, or when the clients who are not exempt hold every thread not kept for
  // admins (ThreadsKeptForAdmins).
  Result<CallSlot> EnterCall(const std::string& client, bool exempt);
  // The sync threads no client but an admin may take: a quarter of limits.server_threads, one at least.
  uint32_t ThreadsKeptForAdmins() const;

  // Streams open now, of `client` and of everyone (for tests and the bench).
  uint32_t watch_streams(const std::string& client) const;
  uint32_t watch_streams_total() const;

 private:
  struct Client {
    uint32_t calls = 0;
    uint32_t watch_streams = 0;
    uint32_t reserved_batches = 0;  // tickets not yet destroyed
    std::set<int64_t> active_batches;
  };
  void CloseWatch(const std::string& client);
  void LeaveCall(const std::string& client);
  // Drops `client`'s entry once it holds nothing. Called under mu_.
  void ForgetIfIdle(std::map<std::string, Client>::iterator it);
  void ReleaseTicket(const std::string& client);
  void AddBatch(const std::string& client, int64_t id);

  const ClientLimitsConfig limits_;
  mutable std::mutex mu_;
  std::map<std::string, Client> clients_;  // a client is dropped once it holds nothing
  uint32_t watch_streams_total_ = 0;
  uint32_t calls_counted_ = 0;  // calls of clients that are not exempt
};

}  // namespace temper
