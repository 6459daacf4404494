// StateStore: everything temperd must not lose, in one SQLite file: batches and their rules, the
// journal, attempts and lessons.
//
// Durability: WAL with synchronous=FULL, so a call that returned has reached the disk and survives
// kill -9 and power loss. Each call is one transaction: a batch and its "batch.submitted" event are
// stored together or not at all. Journal seqs come from AUTOINCREMENT under the store's lock, so they
// are strictly increasing, never reused, and committed in seq order: a reader that has seen seq N
// has seen every event before it.
//
// Thread safety: all methods may be called from any thread; they are serialized internally.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "orchestrator/records.h"
#include "orchestrator/sqlite.h"

namespace temper {

class StateStore {
 public:
  // Opens or creates the database, migrating it to the current schema. Creates no directories.
  static Result<std::unique_ptr<StateStore>> Open(const std::string& path);

  StateStore(const StateStore&) = delete;
  StateStore& operator=(const StateStore&) = delete;

  struct Submitted {
    BatchRecord batch;
    std::optional<EventRecord> event;  // "batch.submitted"; nullopt when the request_id existed
  };
  // Stores a validated batch as queued with its rules pending, plus its "batch.submitted" event.
  // A request_id that is already stored returns that batch unchanged (and no event).
  Result<Submitted> SubmitBatch(const NewBatch& batch);

  // NotFound when there is no such batch.
  Result<BatchRecord> GetBatch(int64_t id);

  struct BatchPage {
    std::vector<BatchRecord> batches;  // newest first, without rules
    std::optional<int64_t> next_before_id;
  };
  // Batches with id < before_id (all when nullopt), filtered by state when `states` is not empty.
  Result<BatchPage> ListBatches(std::optional<int64_t> before_id, uint32_t limit,
                                const std::vector<BatchState>& states);

  struct Cancelled {
    BatchRecord batch;
    EventRecord event;  // "batch.cancelled"
  };
  // Marks a queued or running batch cancelled and its unfinished rules cancelled, with an event.
  // FailedPrecondition when the batch already ended; NotFound when it does not exist.
  Result<Cancelled> CancelBatch(int64_t id, const std::string& reason);

  Result<EventRecord> AppendEvent(const NewEvent& event);
  // Events with seq > after_seq, oldest first, at most `limit`; only `batch_id`'s when given.
  Result<std::vector<EventRecord>> ReadEvents(uint64_t after_seq, std::optional<int64_t> batch_id,
                                              uint32_t limit);
  // The highest seq committed, 0 when the journal is empty.
  Result<uint64_t> LastSeq();

  // Episodic memory. Both return the new row's id.
  Result<int64_t> RecordAttempt(const AttemptRecord& attempt);
  Result<int64_t> AddLesson(const LessonRecord& lesson);
  Status AdjustLessonUtility(int64_t lesson_id, double delta);
  Result<RuleMemoryRecord> GetRuleMemory(const std::string& rule_id, uint32_t max_lessons,
                                         uint32_t max_attempts);

  int schema_version() const { return schema_version_; }
  const std::string& path() const { return db_.path(); }

 private:
  StateStore(sqlite::Database db, int schema_version)
      : db_(std::move(db)), schema_version_(schema_version) {}

  Result<BatchRecord> LoadBatchLocked(int64_t id, bool with_rules);
  Result<EventRecord> AppendEventLocked(const NewEvent& event);
  Status FillRuleCountsLocked(BatchRecord& batch);

  std::mutex mu_;
  sqlite::Database db_;
  const int schema_version_;
};

}  // namespace temper
