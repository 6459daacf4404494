// StateStore: everything temperd must not lose, in one SQLite file: batches and their rules, the
// journal, attempts, lessons and the library of proven fixes.
//
// Durability: WAL with synchronous=FULL, so a call that returned has reached the disk and survives
// kill -9 and power loss. Each call is one transaction: a batch and its "batch.submitted" event are
// stored together or not at all. Journal seqs come from AUTOINCREMENT under the store's lock, so they
// are strictly increasing, never reused, and committed in seq order: a reader that has seen seq N
// has seen every event before it.
//
// The file goes through a temper::Env (platform/env.h): SQLite's writes, fsyncs, truncates and deletes
// pass through it (sqlite_env_vfs.h), and so does the clock the store's timestamps come from; the
// real Env unless a test passes its own. A write or fsync that fails is an IOError for that call
// alone: its transaction is rolled back (though a commit whose WAL fsync failed may be found after
// a restart: whole, never in part), nothing returned before is lost, and the store takes the next
// call without a restart.
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
#include "orchestrator/store/sqlite.h"
#include "orchestrator/store/sqlite_env_vfs.h"
#include "platform/env.h"

namespace temper {

class StateStore {
 public:
  // Opens or creates the database, migrating it to the current schema. Creates no directories.
  // `env` must outlive the store.
  static Result<std::unique_ptr<StateStore>> Open(const std::string& path, temper::Env& env = temper::Env::Default());

  StateStore(const StateStore&) = delete;
  StateStore& operator=(const StateStore&) = delete;

  struct Submitted {
    BatchRecord batch;
    std::optional<EventRecord> event;  // "batch.submitted"; nullopt when the request_id existed
  };
  // Stores a validated batch as queued with its rules pending, plus its "batch.submitted" event.
  // A request_id that is already stored returns that batch unchanged (and no event).
  Result<Submitted> SubmitBatch(const NewBatch& batch);
  // `temper apply`'s batches, all stored in one transaction or none, each with its
  // "batch.submitted" event; their fleet is the first one's id. request_id is not used.
  Result<std::vector<Submitted>> SubmitFleet(const std::vector<NewBatch>& batches);

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

  struct RebootConfirmed {
    BatchRecord batch;
    uint64_t seq = 0;                  // of the batch's pending "reboot.confirmed" event
    std::optional<EventRecord> event;  // that event; nullopt when a confirmation was already pending
  };
  // Records that the host of completed batch `id` rebooted, so its reboot_pending rules are verified
  // again (NextRebootCheckForTarget). Confirming again while one is pending returns that one.
  // FailedPrecondition when the batch has not completed or has no reboot_pending rule; NotFound.
  Result<RebootConfirmed> ConfirmReboot(int64_t id, const std::string& note);
  // The oldest batch on `target` with a confirmed reboot not verified yet; nullopt when none.
  Result<std::optional<BatchRecord>> NextRebootCheckForTarget(const std::string& target);

  Result<EventRecord> AppendEvent(const NewEvent& event);
  // Events with seq > after_seq, oldest first, at most `limit`; only `batch_id`'s when given.
  Result<std::vector<EventRecord>> ReadEvents(uint64_t after_seq, std::optional<int64_t> batch_id, uint32_t limit);
  // The highest seq committed, 0 when the journal is empty.
  Result<uint64_t> LastSeq();

  // Episodic memory. Both return the new row's id.
  Result<int64_t> RecordAttempt(const AttemptRecord& attempt);
  Result<int64_t> AddLesson(const LessonRecord& lesson);
  // Moves a lesson's utility by `delta`, kept within [0, 1].
  Status AdjustLessonUtility(int64_t lesson_id, double delta);
  // Every lesson and attempt of the rule, whichever target taught it: what an operator asks for.
  Result<RuleMemoryRecord> GetRuleMemory(const std::string& rule_id, uint32_t max_lessons, uint32_t max_attempts);
  // What a prompt may recall (episodic_memory.h): the rule's lessons within `scope`, newest first;
  // lessons learnt on other rules of XCCDF group `group_id` within `scope`, most useful first; the
  // rule's attempts in batches on `target`, newest first.
  Result<std::vector<LessonRecord>> RuleLessons(const std::string& rule_id, const LessonScope& scope, uint32_t limit);
  Result<std::vector<LessonRecord>> GroupLessons(const std::string& group_id, const std::string& except_rule,
                                                 const LessonScope& scope, uint32_t limit);
  Result<std::vector<AttemptRecord>> RuleAttemptsOnTarget(const std::string& rule_id, const std::string& target,
                                                          uint32_t limit);
  // Every attempt and lesson of a batch, oldest first: what its report shows.
  Result<std::vector<AttemptRecord>> BatchAttempts(int64_t batch_id);
  Result<std::vector<LessonRecord>> BatchLessons(int64_t batch_id);
  // The batch's journalled model calls (events with usage) summed per role, by role name.
  Result<std::vector<RoleUsageRecord>> BatchRoleUsage(int64_t batch_id);
  // How many batches are in each state, and how many rules of all batches (temperd's metrics). The
  // states as stored; none missing from the maps' keys means none in that state.
  struct StateCounts {
    std::map<std::string, uint64_t> batches;
    std::map<std::string, uint64_t> rules;
  };
  Result<StateCounts> CountStates();
  // A page of them: the batch's attempts with an id above `after_id`, oldest first, at most
  // `limit` (an attempt may hold megabytes, so a report is read a page at a time).
  Result<std::vector<AttemptRecord>> BatchAttempts(int64_t batch_id, int64_t after_id, uint32_t limit);
  // Rule `rule_id`'s attempts in every batch with an id below `before_id`, newest first, at most
  // `limit`: GetRuleMemory's pages.
  Result<std::vector<AttemptRecord>> RuleAttempts(const std::string& rule_id, int64_t before_id, uint32_t limit);

  // The loop's work queue for a target: an interrupted (running) batch first, then the oldest
  // queued one; nullopt when there is none.
  Result<std::optional<BatchRecord>> NextBatchForTarget(const std::string& target);
  // Applies one loop step atomically (see LoopStep). NotFound for an unknown batch or rule.
  Result<StepCommitted> CommitStep(const LoopStep& step);

  // Undo (`temper revert`), plan-only and the fixpoint.

  // Who made the snapshots a target holds: the batches on `target` that recorded the snapshot
  // they started from, and their kept attempts with the snapshot each made. Oldest first.
  struct SnapshotOwners {
    struct Batch {
      int64_t id = 0;
      BatchState state = BatchState::kQueued;
      bool plan_only = false;
      uint32_t start_snapshot = 0;
      std::optional<TimeMs> reverted_at;
    };
    struct Fix {
      int64_t attempt_id = 0;
      int64_t batch_id = 0;
      std::string rule_id;
      uint32_t number = 0;
      uint32_t snapshot = 0;
      std::optional<TimeMs> reverted_at;
    };
    std::vector<Batch> batches;
    std::vector<Fix> fixes;
  };
  Result<SnapshotOwners> TargetSnapshotOwners(const std::string& target);
  // The batch on `target` that started last (the highest id with a start snapshot), with its
  // rules; nullopt when none did.
  Result<std::optional<BatchRecord>> LastStartedBatch(const std::string& target);
  // The batch running on `target` (started, not ended: it resumes at the next start), if any.
  Result<std::optional<int64_t>> RunningBatch(const std::string& target);
  // Applies a revert to a batch that has ended, atomically. NotFound for an unknown batch or rule.
  Result<StepCommitted> CommitRevert(const RevertStep& step);

  // Fleets: the batches of one `temper apply` call (those whose `fleet` is `fleet`), in id order,
  // without rules; empty when there are none.
  Result<std::vector<BatchRecord>> FleetBatches(int64_t fleet);

  // The library of proven fixes (orchestrator/library/fix_library.h), one transaction each.

  // Stores `fix` (its id, counters and times ignored; created now) unless a live entry has the same
  // rule, content id, platform and bundle, whose id is then returned instead.
  Result<int64_t> AddFix(const FixRecord& fix);
  // The live entries of `rule_id` under `content_id`, newest first.
  Result<std::vector<FixRecord>> LiveFixes(const std::string& rule_id, const std::string& content_id);
  // NotFound for an unknown id.
  Result<FixRecord> GetFix(int64_t id);
  // Entries newest first, at most `limit`, with an id below `before_id` when given (a page after
  // another); only `rule_id`'s unless it is empty; retired ones only when `include_retired`.
  Result<std::vector<FixRecord>> ListFixes(const std::string& rule_id, bool include_retired, uint32_t limit,
                                           std::optional<int64_t> before_id = std::nullopt);
  // Marks a live entry retired now, with `reason`, and returns it. NotFound for an unknown id;
  // FailedPrecondition naming when and why for one already retired.
  Result<FixRecord> RetireFix(int64_t id, const std::string& reason);
  // A reuse's outcome: kept adds a use and the entry's model_tokens to tokens_saved; not kept adds
  // a failure and records `why` as the last failure. NotFound for an unknown id.
  Status NoteFixOutcome(int64_t id, bool kept, const std::string& why);

  int schema_version() const { return schema_version_; }
  const std::string& path() const { return db_.path(); }

 private:
  StateStore(temper::Env& env, std::unique_ptr<sqlite::EnvVfs> vfs, sqlite::Database db, int schema_version)
      : env_(env), vfs_(std::move(vfs)), db_(std::move(db)), schema_version_(schema_version) {}

  // The Env's wall clock, as stored.
  TimeMs EnvNowMs() const;
  // True when `seq` is above every other seq stored (the debug check of the seq invariant).
  bool IsNewestSeqLocked(uint64_t seq);

  struct InsertedBatch {
    int64_t id = 0;
    EventRecord event;  // its "batch.submitted"
  };
  // A batch, its rules and its event, inside the caller's transaction.
  Result<InsertedBatch> InsertBatchLocked(const NewBatch& nb, TimeMs now);
  Result<BatchRecord> LoadBatchLocked(int64_t id, bool with_rules);
  Result<FixRecord> LoadFixLocked(int64_t id);
  Result<EventRecord> AppendEventLocked(const NewEvent& event);
  Status FillRuleCountsLocked(BatchRecord& batch);
  Result<int64_t> RecordAttemptLocked(const AttemptRecord& attempt);
  // CommitStep's start snapshot and fixpoint pass.
  Status CommitUndoFieldsLocked(const LoopStep& step);
  Result<int64_t> AddLessonLocked(const LessonRecord& lesson);
  Status AdjustLessonUtilityLocked(int64_t lesson_id, double delta);
  // `where` binds `texts` in order, then the limit.
  Result<std::vector<LessonRecord>> QueryLessonsLocked(const std::string& where, const std::vector<std::string>& texts,
                                                       uint32_t limit);
  // `where` binds `key`, then the limit.
  template <typename Key>
  Result<std::vector<AttemptRecord>> QueryAttemptsLocked(const std::string& where, const Key& key, uint32_t limit);

  std::mutex mu_;
  temper::Env& env_;
  std::unique_ptr<sqlite::EnvVfs> vfs_;  // outlives db_, which is opened through it
  sqlite::Database db_;
  const int schema_version_;
};

}  // namespace temper
