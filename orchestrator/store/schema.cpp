#include "orchestrator/store/schema.h"

#include <fmt/format.h>

namespace temper {

namespace {

// Never edit a migration that has shipped; append a new one.
constexpr const char* kMigrations[] = {
    // 1: batches, their rules, and the journal.
    R"sql(
CREATE TABLE batches(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL DEFAULT '',
  target TEXT NOT NULL,
  datastream TEXT NOT NULL,
  profile TEXT NOT NULL,
  whole_profile INTEGER NOT NULL,
  max_attempts INTEGER NOT NULL,
  wall_time_s INTEGER NOT NULL,
  max_tokens INTEGER NOT NULL,
  state TEXT NOT NULL CHECK(state IN ('queued','running','completed','cancelled','failed')),
  error TEXT NOT NULL DEFAULT '',
  created_at_ms INTEGER NOT NULL,
  updated_at_ms INTEGER NOT NULL);
CREATE TABLE batch_rules(
  batch_id INTEGER NOT NULL REFERENCES batches(id),
  position INTEGER NOT NULL,
  rule_id TEXT NOT NULL,
  state TEXT NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  tokens_used INTEGER NOT NULL DEFAULT 0,
  detail TEXT NOT NULL DEFAULT '',
  PRIMARY KEY(batch_id, rule_id));
CREATE TABLE journal(
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  time_ms INTEGER NOT NULL,
  batch_id INTEGER REFERENCES batches(id),
  target TEXT NOT NULL DEFAULT '',
  rule_id TEXT NOT NULL DEFAULT '',
  role TEXT NOT NULL DEFAULT '',
  type TEXT NOT NULL,
  data TEXT NOT NULL DEFAULT '{}',
  prompt_tokens INTEGER NOT NULL DEFAULT 0,
  completion_tokens INTEGER NOT NULL DEFAULT 0);
CREATE INDEX journal_by_batch ON journal(batch_id, seq);
)sql",
    // 2: idempotent submission, cached-token accounting, and episodic memory (attempts, lessons).
    R"sql(
ALTER TABLE batches ADD COLUMN request_id TEXT;
CREATE UNIQUE INDEX batches_by_request_id ON batches(request_id) WHERE request_id IS NOT NULL;
ALTER TABLE journal ADD COLUMN cached_prompt_tokens INTEGER NOT NULL DEFAULT 0;
CREATE TABLE attempts(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  batch_id INTEGER NOT NULL REFERENCES batches(id),
  rule_id TEXT NOT NULL,
  number INTEGER NOT NULL,
  approach TEXT NOT NULL DEFAULT '',
  commands TEXT NOT NULL DEFAULT '[]',
  verdict TEXT NOT NULL DEFAULT '',
  outcome TEXT NOT NULL DEFAULT '',
  evidence TEXT NOT NULL DEFAULT '',
  reflection TEXT NOT NULL DEFAULT '',
  prompt_tokens INTEGER NOT NULL DEFAULT 0,
  completion_tokens INTEGER NOT NULL DEFAULT 0,
  cached_prompt_tokens INTEGER NOT NULL DEFAULT 0,
  started_at_ms INTEGER NOT NULL,
  finished_at_ms INTEGER NOT NULL,
  UNIQUE(batch_id, rule_id, number));
CREATE INDEX attempts_by_rule ON attempts(rule_id, id);
CREATE TABLE lessons(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  rule_id TEXT NOT NULL,
  batch_id INTEGER REFERENCES batches(id),
  text TEXT NOT NULL,
  utility REAL NOT NULL DEFAULT 0,
  created_at_ms INTEGER NOT NULL,
  updated_at_ms INTEGER NOT NULL);
CREATE INDEX lessons_by_rule ON lessons(rule_id, id);
)sql",
    // 3: what the loop needs to resume and report: the target's last known-good snapshot, where the
    // batch's OpenSCAP results are, each rule's verdicts before and after, and lessons by XCCDF
    // group so neighbouring rules can learn from each other.
    R"sql(
ALTER TABLE batches ADD COLUMN good_snapshot INTEGER;
ALTER TABLE batches ADD COLUMN results_dir TEXT NOT NULL DEFAULT '';
ALTER TABLE batch_rules ADD COLUMN before_verdict TEXT NOT NULL DEFAULT '';
ALTER TABLE batch_rules ADD COLUMN after_verdict TEXT NOT NULL DEFAULT '';
ALTER TABLE lessons ADD COLUMN group_id TEXT NOT NULL DEFAULT '';
CREATE INDEX lessons_by_group ON lessons(group_id, utility);
)sql",
    // 4: what assessors and operators ask for: a batch's waivers and opt-ins (JSON, as
    // BatchOptions), and what each attempt changed on the target (JSON, as stig::ChangeSet).
    R"sql(
ALTER TABLE batches ADD COLUMN options TEXT NOT NULL DEFAULT '{}';
ALTER TABLE attempts ADD COLUMN changes TEXT NOT NULL DEFAULT '';
)sql",
    // 5: undo and fixpoint: the target snapshot each batch started from and each kept fix made, so
    // `temper revert` can take a batch or one rule back out (and when it did), and the fixpoint's
    // passes (JSON, as FixpointPass).
    R"sql(
ALTER TABLE batches ADD COLUMN start_snapshot INTEGER;
ALTER TABLE batches ADD COLUMN fixpoint TEXT NOT NULL DEFAULT '[]';
ALTER TABLE batches ADD COLUMN reverted_at_ms INTEGER;
ALTER TABLE attempts ADD COLUMN snapshot INTEGER;
ALTER TABLE attempts ADD COLUMN reverted_at_ms INTEGER;
CREATE INDEX batches_by_target ON batches(target, id);
)sql",
    // 6: the operator said the host of a completed batch rebooted (temper rebooted): the seq of that
    // "reboot.confirmed" event until the batch's reboot_pending rules are verified again.
    R"sql(
ALTER TABLE batches ADD COLUMN reboot_confirmed_seq INTEGER;
)sql",
    // 7: where each lesson was learnt (issue 46): the class and name of its target and the role and
    // endpoint that wrote it, so a lesson reaches only prompts for targets it may speak to. Lessons
    // stored before keep their rows with class 'unknown', which no SSH host's prompt recalls.
    R"sql(
ALTER TABLE lessons ADD COLUMN target_class TEXT NOT NULL DEFAULT 'unknown';
ALTER TABLE lessons ADD COLUMN target TEXT NOT NULL DEFAULT '';
ALTER TABLE lessons ADD COLUMN learnt_by TEXT NOT NULL DEFAULT '';
CREATE INDEX lessons_by_scope ON lessons(rule_id, target_class, target, id);
)sql",
    // 8: fleets and the library of proven fixes (issue 50). Each kept attempt's replayable change
    // (stig::FixBundle as JSON, '' when none was captured); a batch that replays another batch's
    // kept fixes (apply_from), the `temper apply` call it belongs to (fleet: that call's first
    // batch id) and how many of that fleet run at once; and the library's entries, each the fix of
    // one rule under one content version on one platform, with how often it was reused since.
    R"sql(
ALTER TABLE attempts ADD COLUMN fix TEXT NOT NULL DEFAULT '';
ALTER TABLE batches ADD COLUMN apply_from INTEGER NOT NULL DEFAULT 0;
ALTER TABLE batches ADD COLUMN fleet INTEGER NOT NULL DEFAULT 0;
ALTER TABLE batches ADD COLUMN at_once INTEGER NOT NULL DEFAULT 0;
CREATE INDEX batches_by_fleet ON batches(fleet, id) WHERE fleet != 0;
CREATE TABLE fixes(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  rule_id TEXT NOT NULL,
  content_id TEXT NOT NULL,
  platform TEXT NOT NULL,
  bundle TEXT NOT NULL,
  evidence TEXT NOT NULL DEFAULT '',
  source_batch INTEGER NOT NULL DEFAULT 0,
  source_attempt INTEGER NOT NULL DEFAULT 0,
  source_target TEXT NOT NULL DEFAULT '',
  model_tokens INTEGER NOT NULL DEFAULT 0,
  uses INTEGER NOT NULL DEFAULT 0,
  failures INTEGER NOT NULL DEFAULT 0,
  tokens_saved INTEGER NOT NULL DEFAULT 0,
  last_failure TEXT NOT NULL DEFAULT '',
  created_at_ms INTEGER NOT NULL,
  retired_at_ms INTEGER,
  retired_reason TEXT NOT NULL DEFAULT '');
CREATE INDEX fixes_by_rule ON fixes(rule_id, content_id, id);
)sql",
};

}  // namespace

int CurrentSchemaVersion() { return static_cast<int>(std::size(kMigrations)); }

Status MigrateSchema(sqlite::Database& db, int target_version) {
  if (target_version < 0) target_version = CurrentSchemaVersion();
  TEMPER_ASSIGN_OR_RETURN(int64_t version, db.QueryInt("PRAGMA user_version"));
  if (version > CurrentSchemaVersion()) {
    return Status::FailedPrecondition(
        fmt::format("{} has schema version {}, but this temper knows versions up to {}; it was written by a "
                    "newer temper: upgrade temper, or point `database:` at another file",
                    db.path(), version, CurrentSchemaVersion()));
  }
  for (int64_t v = version; v < target_version; ++v) {
    TEMPER_ASSIGN_OR_RETURN(sqlite::Transaction txn, sqlite::Transaction::Begin(db));
    Status s = db.Exec(kMigrations[v]);
    if (s.ok()) s = db.Exec(fmt::format("PRAGMA user_version = {}", v + 1));
    if (s.ok()) s = txn.Commit();
    if (!s.ok()) return s.WithContext(fmt::format("migrating {} to schema version {}", db.path(), v + 1));
  }
  return Status::OK();
}

}  // namespace temper
