// Journal: the ordered record of everything temperd does, and the wake-up signal for its watchers.
//
// The invariant users rely on: an event is committed to the state store before any watcher can see
// it. Append() commits first and only then wakes watchers; watchers always read events back from the
// store (never from memory), so a watcher that resumes from seq N gets exactly the events after N.
//
// Thread safety: all methods may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "common/status.h"
#include "orchestrator/records.h"
#include "orchestrator/state_store.h"

namespace temper {

class Journal {
 public:
  // `store` must outlive the journal.
  static Result<std::unique_ptr<Journal>> Open(StateStore& store);
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  // Commits the event, then wakes watchers.
  Result<EventRecord> Append(const NewEvent& event);
  // Wakes watchers for an event the store committed as part of a larger transaction
  // (StateStore::SubmitBatch, CancelBatch). Call only after that commit.
  void Published(uint64_t seq);

  // Blocks until an event with seq > `seq` has been committed (true), or until `deadline` or Close()
  // (false when nothing new).
  bool WaitBeyond(uint64_t seq, std::chrono::steady_clock::time_point deadline);
  // Wakes every waiter and makes later waits return at once: used at shutdown.
  void Close();
  bool closed() const;
  // The highest seq known committed. Every event up to it is readable from the store.
  uint64_t last_seq() const;

  StateStore& store() { return store_; }

 private:
  Journal(StateStore& store, uint64_t last_seq) : store_(store), last_seq_(last_seq) {}

  StateStore& store_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t last_seq_;
  bool closed_ = false;
};

}  // namespace temper
