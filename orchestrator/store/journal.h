// Journal: the ordered record of everything temperd does, and the wake-up signal for its watchers.
//
// The invariant users rely on: an event is committed to the state store before any watcher can see
// it. Append() commits first, then appends the event to its JSON Lines file, and only then wakes
// watchers; watchers always read events back from the store (never from memory), so a watcher that
// resumes from seq N gets exactly the events after N. Every commit that makes events goes through
// the journal, which holds one lock from the commit to the publication: the files receive their
// lines in seq order even when several loops and clients commit at once.
//
// Thread safety: all methods may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "common/log.h"
#include "common/status.h"
#include "orchestrator/records.h"
#include "orchestrator/store/journal_files.h"
#include "orchestrator/store/state_store.h"

namespace temper {

class Journal {
 public:
  // `store`, `files` and `log` must outlive the journal. Brings the files up to date with the store.
  static Result<std::unique_ptr<Journal>> Open(StateStore& store, JournalFiles& files, const Logger& log);
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  // Commits the event, writes its file line, then wakes watchers.
  Result<EventRecord> Append(const NewEvent& event);
  // Commits a loop step (StateStore::CommitStep), then publishes its events.
  Result<StepCommitted> Commit(const LoopStep& step);
  // Commits a revert (StateStore::CommitRevert), then publishes its events.
  Result<StepCommitted> CommitRevert(const RevertStep& step);
  // The state store's methods of the same names, then publishes the event each committed (if any).
  Result<StateStore::Submitted> SubmitBatch(const NewBatch& batch);
  Result<std::vector<StateStore::Submitted>> SubmitFleet(const std::vector<NewBatch>& batches);
  Result<StateStore::Cancelled> CancelBatch(int64_t id, const std::string& reason);
  Result<StateStore::RebootConfirmed> ConfirmReboot(int64_t id, const std::string& note);

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
  Journal(StateStore& store, JournalFiles& files, const Logger& log, uint64_t last_seq)
      : store_(store), files_(files), log_(log), last_seq_(last_seq) {}

  // Writes the file line and wakes watchers for an event just committed. Call with order_mu_ held.
  // A failed file write is logged, not returned: the event is committed, and the file's next append
  // (or the next start-up) writes it (journal_files.h).
  void Published(const EventRecord& event);

  StateStore& store_;
  JournalFiles& files_;
  const Logger& log_;
  std::mutex order_mu_;  // held from each commit to its publication: events are published in seq order
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t last_seq_;
  bool closed_ = false;
};

}  // namespace temper
