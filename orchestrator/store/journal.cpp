#include "orchestrator/store/journal.h"

#include <algorithm>

#include "common/dcheck.h"
#include "orchestrator/store/journal_event_bounds.h"

namespace temper {

Result<std::unique_ptr<Journal>> Journal::Open(StateStore& store, JournalFiles& files, const Logger& log) {
  TEMPER_ASSIGN_OR_RETURN(JournalFiles::Reconciled reconciled, files.Reconcile(store));
  for (const JournalFiles::FileRepair& r : reconciled.repairs) {
    if (r.torn_bytes > 0) {
      log.Warning(
          "journal file {}: cut a torn last line of {} bytes at byte {} (a crash stopped its append); "
          "its event is appended again from the state store",
          r.path, r.torn_bytes, r.torn_offset);
    }
    for (const JournalLineProblem& p : r.problems) {
      log.Warning("{}:{}: {} (byte {}, {} bytes); left in place, the state store holds every committed event", r.path,
                  p.line, p.what, p.offset, p.bytes);
    }
    if (r.longest_line > kMaxJournalLineBytes) {
      log.Info(
          "journal file {}: holds a line of {} bytes, over today's bound of {} (written by an older temperd); read "
          "whole",
          r.path, r.longest_line, kMaxJournalLineBytes);
    }
    if (r.problem_count > r.problems.size()) {
      log.Warning("journal file {}: {} more lines are not journal events", r.path, r.problem_count - r.problems.size());
    }
  }
  if (reconciled.appended > 0) {
    log.Info("journal files: re-appended {} events committed before the last stop", reconciled.appended);
  }
  TEMPER_ASSIGN_OR_RETURN(uint64_t last, store.LastSeq());
  return std::unique_ptr<Journal>(new Journal(store, files, log, last));
}

Result<EventRecord> Journal::Append(const NewEvent& event) {
  std::lock_guard order(order_mu_);
  TEMPER_ASSIGN_OR_RETURN(EventRecord stored, store_.AppendEvent(event));
  Published(stored);
  return stored;
}

Result<StepCommitted> Journal::Commit(const LoopStep& step) {
  std::lock_guard order(order_mu_);
  TEMPER_ASSIGN_OR_RETURN(StepCommitted committed, store_.CommitStep(step));
  for (const EventRecord& event : committed.events) Published(event);
  return committed;
}

Result<StepCommitted> Journal::CommitRevert(const RevertStep& step) {
  std::lock_guard order(order_mu_);
  TEMPER_ASSIGN_OR_RETURN(StepCommitted committed, store_.CommitRevert(step));
  for (const EventRecord& event : committed.events) Published(event);
  return committed;
}

Result<StateStore::Submitted> Journal::SubmitBatch(const NewBatch& batch) {
  std::lock_guard order(order_mu_);
  TEMPER_ASSIGN_OR_RETURN(StateStore::Submitted submitted, store_.SubmitBatch(batch));
  if (submitted.event) Published(*submitted.event);
  return submitted;
}

Result<std::vector<StateStore::Submitted>> Journal::SubmitFleet(const std::vector<NewBatch>& batches) {
  std::lock_guard order(order_mu_);
  TEMPER_ASSIGN_OR_RETURN(std::vector<StateStore::Submitted> submitted, store_.SubmitFleet(batches));
  for (const StateStore::Submitted& s : submitted) {
    if (s.event) Published(*s.event);
  }
  return submitted;
}

Result<StateStore::Cancelled> Journal::CancelBatch(int64_t id, const std::string& reason) {
  std::lock_guard order(order_mu_);
  TEMPER_ASSIGN_OR_RETURN(StateStore::Cancelled cancelled, store_.CancelBatch(id, reason));
  Published(cancelled.event);
  return cancelled;
}

Result<StateStore::RebootConfirmed> Journal::ConfirmReboot(int64_t id, const std::string& note) {
  std::lock_guard order(order_mu_);
  TEMPER_ASSIGN_OR_RETURN(StateStore::RebootConfirmed confirmed, store_.ConfirmReboot(id, note));
  if (confirmed.event) Published(*confirmed.event);
  return confirmed;
}

void Journal::Published(const EventRecord& event) {
  TEMPER_DCHECK(event.seq > 0, "an event is committed to the state store before any watcher can see it");
  TEMPER_DCHECK(JournalFiles::ToJsonLine(event).size() <= kMaxJournalLineBytes,
                "an event the store bounded fits a journal line (journal_event_bounds.h)");
  Status written = files_.Append(event);
  if (!written.ok()) log_.Error("journal file for event {}: {}", event.seq, written.message());
  {
    std::lock_guard lock(mu_);
    last_seq_ = std::max(last_seq_, event.seq);
  }
  cv_.notify_all();
}

bool Journal::WaitBeyond(uint64_t seq, std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mu_);
  cv_.wait_until(lock, deadline, [&] { return closed_ || last_seq_ > seq; });
  return last_seq_ > seq;
}

void Journal::Close() {
  {
    std::lock_guard lock(mu_);
    closed_ = true;
  }
  cv_.notify_all();
}

bool Journal::closed() const {
  std::lock_guard lock(mu_);
  return closed_;
}

}  // namespace temper

namespace temper {

uint64_t Journal::last_seq() const {
  std::lock_guard lock(mu_);
  return last_seq_;
}

}  // namespace temper
