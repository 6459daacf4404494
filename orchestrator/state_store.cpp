#include "orchestrator/state_store.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "orchestrator/schema.h"

namespace temper {

namespace {

constexpr const char* kBatchColumns =
    "id, name, target, datastream, profile, whole_profile, max_attempts, wall_time_s, max_tokens, "
    "state, error, created_at_ms, updated_at_ms, request_id";

Result<BatchRecord> ReadBatchRow(const sqlite::Statement& row) {
  BatchRecord b;
  b.id = row.ColumnInt(0);
  b.name = row.ColumnText(1);
  b.target = row.ColumnText(2);
  b.datastream = row.ColumnText(3);
  b.profile = row.ColumnText(4);
  b.whole_profile = row.ColumnInt(5) != 0;
  b.budgets.max_attempts = static_cast<uint32_t>(row.ColumnInt(6));
  b.budgets.wall_time = std::chrono::seconds(row.ColumnInt(7));
  b.budgets.max_tokens = static_cast<uint64_t>(row.ColumnInt(8));
  std::string state = row.ColumnText(9);
  std::optional<BatchState> parsed = ParseBatchState(state);
  if (!parsed) return Status::DataLoss(fmt::format("batch {} has unknown state '{}'", b.id, state));
  b.state = *parsed;
  b.error = row.ColumnText(10);
  b.created_at = row.ColumnInt(11);
  b.updated_at = row.ColumnInt(12);
  b.request_id = row.ColumnText(13);
  return b;
}

constexpr const char* kEventColumns =
    "seq, time_ms, batch_id, target, rule_id, role, type, data, prompt_tokens, completion_tokens, "
    "cached_prompt_tokens";

EventRecord ReadEventRow(const sqlite::Statement& row) {
  EventRecord e;
  e.seq = static_cast<uint64_t>(row.ColumnInt(0));
  e.time = row.ColumnInt(1);
  if (!row.ColumnIsNull(2)) e.batch_id = row.ColumnInt(2);
  e.target = row.ColumnText(3);
  e.rule_id = row.ColumnText(4);
  e.role = row.ColumnText(5);
  e.type = row.ColumnText(6);
  e.data_json = row.ColumnText(7);
  e.usage.prompt_tokens = static_cast<uint64_t>(row.ColumnInt(8));
  e.usage.completion_tokens = static_cast<uint64_t>(row.ColumnInt(9));
  e.usage.cached_prompt_tokens = static_cast<uint64_t>(row.ColumnInt(10));
  return e;
}

// An event the daemon itself records about a batch (submitted, cancelled).
NewEvent DaemonEvent(int64_t batch_id, const std::string& target, std::string type, const nlohmann::json& data) {
  NewEvent event;
  event.batch_id = batch_id;
  event.target = target;
  event.role = "daemon";
  event.type = std::move(type);
  event.data_json = data.dump();
  return event;
}

}  // namespace

Result<std::unique_ptr<StateStore>> StateStore::Open(const std::string& path) {
  TEMPER_ASSIGN_OR_RETURN(sqlite::Database db, sqlite::Database::Open(path));
  // A wrong file (not SQLite) shows up on the first read; name it plainly.
  Result<int64_t> version = db.QueryInt("PRAGMA user_version");
  if (!version.ok()) {
    return version.status().WithContext(fmt::format("{} is not a temper state database", path));
  }
  TEMPER_RETURN_IF_ERROR(db.Exec("PRAGMA journal_mode = WAL"));
  TEMPER_RETURN_IF_ERROR(db.Exec("PRAGMA synchronous = FULL"));
  TEMPER_RETURN_IF_ERROR(db.Exec("PRAGMA foreign_keys = ON"));
  // Another process holding the write lock (a second temperd, a backup) is waited for, briefly.
  TEMPER_RETURN_IF_ERROR(db.Exec("PRAGMA busy_timeout = 5000"));
  TEMPER_RETURN_IF_ERROR(MigrateSchema(db));
  TEMPER_ASSIGN_OR_RETURN(int64_t migrated, db.QueryInt("PRAGMA user_version"));
  return std::unique_ptr<StateStore>(new StateStore(std::move(db), static_cast<int>(migrated)));
}

Result<StateStore::Submitted> StateStore::SubmitBatch(const NewBatch& nb) {
  std::lock_guard lock(mu_);
  if (!nb.request_id.empty()) {
    TEMPER_ASSIGN_OR_RETURN(sqlite::Statement find,
                            db_.Prepare("SELECT id FROM batches WHERE request_id = ?"));
    find.Bind(1, nb.request_id);
    TEMPER_ASSIGN_OR_RETURN(bool found, find.Step());
    if (found) {
      TEMPER_ASSIGN_OR_RETURN(BatchRecord existing, LoadBatchLocked(find.ColumnInt(0), true));
      return Submitted{std::move(existing), std::nullopt};
    }
  }
  TimeMs now = NowMs();
  TEMPER_ASSIGN_OR_RETURN(sqlite::Transaction txn, sqlite::Transaction::Begin(db_));
  TEMPER_ASSIGN_OR_RETURN(
      sqlite::Statement insert,
      db_.Prepare("INSERT INTO batches(name, target, datastream, profile, whole_profile, max_attempts, "
                  "wall_time_s, max_tokens, state, created_at_ms, updated_at_ms, request_id) "
                  "VALUES(?, ?, ?, ?, ?, ?, ?, ?, 'queued', ?, ?, ?)"));
  insert.Bind(1, nb.name).Bind(2, nb.target).Bind(3, nb.datastream).Bind(4, nb.profile);
  insert.Bind(5, nb.whole_profile ? 1 : 0).Bind(6, nb.budgets.max_attempts);
  insert.Bind(7, nb.budgets.wall_time.count()).Bind(8, nb.budgets.max_tokens);
  insert.Bind(9, now).Bind(10, now);
  if (nb.request_id.empty()) {
    insert.BindNull(11);
  } else {
    insert.Bind(11, nb.request_id);
  }
  TEMPER_RETURN_IF_ERROR(insert.Run());
  int64_t id = db_.LastInsertRowId();

  TEMPER_ASSIGN_OR_RETURN(
      sqlite::Statement rule,
      db_.Prepare("INSERT INTO batch_rules(batch_id, position, rule_id, state) VALUES(?, ?, ?, 'pending')"));
  for (size_t i = 0; i < nb.rule_ids.size(); ++i) {
    rule.Reset();
    rule.Bind(1, id).Bind(2, i).Bind(3, nb.rule_ids[i]);
    TEMPER_RETURN_IF_ERROR(rule.Run());
  }

  nlohmann::json data = {{"name", nb.name},
                         {"datastream", nb.datastream},
                         {"profile", nb.profile},
                         {"whole_profile", nb.whole_profile},
                         {"rules", nb.rule_ids.size()},
                         {"budgets",
                          {{"max_attempts", nb.budgets.max_attempts},
                           {"wall_time_seconds", nb.budgets.wall_time.count()},
                           {"max_tokens", nb.budgets.max_tokens}}}};
  TEMPER_ASSIGN_OR_RETURN(EventRecord stored, AppendEventLocked(DaemonEvent(id, nb.target, "batch.submitted", data)));
  TEMPER_RETURN_IF_ERROR(txn.Commit());
  TEMPER_ASSIGN_OR_RETURN(BatchRecord batch, LoadBatchLocked(id, true));
  return Submitted{std::move(batch), std::move(stored)};
}

Result<BatchRecord> StateStore::GetBatch(int64_t id) {
  std::lock_guard lock(mu_);
  return LoadBatchLocked(id, true);
}

Result<BatchRecord> StateStore::LoadBatchLocked(int64_t id, bool with_rules) {
  TEMPER_ASSIGN_OR_RETURN(sqlite::Statement q,
                          db_.Prepare(fmt::format("SELECT {} FROM batches WHERE id = ?", kBatchColumns)));
  q.Bind(1, id);
  TEMPER_ASSIGN_OR_RETURN(bool found, q.Step());
  if (!found) return Status::NotFound(fmt::format("batch {} does not exist", id));
  TEMPER_ASSIGN_OR_RETURN(BatchRecord batch, ReadBatchRow(q));
  TEMPER_RETURN_IF_ERROR(FillRuleCountsLocked(batch));
  if (!with_rules) return batch;
  TEMPER_ASSIGN_OR_RETURN(
      sqlite::Statement rules,
      db_.Prepare("SELECT rule_id, state, attempts, tokens_used, detail FROM batch_rules "
                  "WHERE batch_id = ? ORDER BY position"));
  rules.Bind(1, id);
  while (true) {
    TEMPER_ASSIGN_OR_RETURN(bool row, rules.Step());
    if (!row) break;
    BatchRuleRecord r;
    r.rule_id = rules.ColumnText(0);
    std::string state = rules.ColumnText(1);
    std::optional<RuleState> parsed = ParseRuleState(state);
    if (!parsed) {
      return Status::DataLoss(fmt::format("batch {} rule {} has unknown state '{}'", id, r.rule_id, state));
    }
    r.state = *parsed;
    r.attempts = static_cast<uint32_t>(rules.ColumnInt(2));
    r.tokens_used = static_cast<uint64_t>(rules.ColumnInt(3));
    r.detail = rules.ColumnText(4);
    batch.rules.push_back(std::move(r));
  }
  return batch;
}

Status StateStore::FillRuleCountsLocked(BatchRecord& batch) {
  TEMPER_ASSIGN_OR_RETURN(
      sqlite::Statement q,
      db_.Prepare("SELECT state, COUNT(*) FROM batch_rules WHERE batch_id = ? GROUP BY state"));
  q.Bind(1, batch.id);
  while (true) {
    TEMPER_ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    std::optional<RuleState> state = ParseRuleState(q.ColumnText(0));
    if (!state) return Status::DataLoss(fmt::format("batch {} has a rule in unknown state '{}'", batch.id, q.ColumnText(0)));
    batch.rule_counts[static_cast<int>(*state)] = static_cast<uint32_t>(q.ColumnInt(1));
  }
  return Status::OK();
}

Result<StateStore::BatchPage> StateStore::ListBatches(std::optional<int64_t> before_id, uint32_t limit,
                                                      const std::vector<BatchState>& states) {
  std::lock_guard lock(mu_);
  std::string sql = fmt::format("SELECT {} FROM batches WHERE id < ?", kBatchColumns);
  if (!states.empty()) {
    sql += " AND state IN (";
    for (size_t i = 0; i < states.size(); ++i) sql += i == 0 ? "?" : ", ?";
    sql += ")";
  }
  sql += " ORDER BY id DESC LIMIT ?";
  TEMPER_ASSIGN_OR_RETURN(sqlite::Statement q, db_.Prepare(sql));
  int param = 1;
  q.Bind(param++, before_id.value_or(INT64_MAX));
  for (BatchState s : states) q.Bind(param++, BatchStateName(s));
  q.Bind(param++, static_cast<int64_t>(limit) + 1);  // one extra tells whether another page exists
  BatchPage page;
  while (true) {
    TEMPER_ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    TEMPER_ASSIGN_OR_RETURN(BatchRecord b, ReadBatchRow(q));
    page.batches.push_back(std::move(b));
  }
  if (page.batches.size() > limit) {
    page.batches.pop_back();
    page.next_before_id = page.batches.back().id;
  }
  for (BatchRecord& b : page.batches) TEMPER_RETURN_IF_ERROR(FillRuleCountsLocked(b));
  return page;
}

Result<StateStore::Cancelled> StateStore::CancelBatch(int64_t id, const std::string& reason) {
  std::lock_guard lock(mu_);
  TEMPER_ASSIGN_OR_RETURN(BatchRecord before, LoadBatchLocked(id, false));
  if (IsFinal(before.state)) {
    return Status::FailedPrecondition(fmt::format("batch {} already ended ({}); nothing to cancel", id,
                                                  BatchStateName(before.state)));
  }
  TEMPER_ASSIGN_OR_RETURN(sqlite::Transaction txn, sqlite::Transaction::Begin(db_));
  TEMPER_ASSIGN_OR_RETURN(sqlite::Statement b, db_.Prepare(
      "UPDATE batches SET state = 'cancelled', error = ?, updated_at_ms = ? WHERE id = ?"));
  b.Bind(1, reason).Bind(2, NowMs()).Bind(3, id);
  TEMPER_RETURN_IF_ERROR(b.Run());
  TEMPER_ASSIGN_OR_RETURN(sqlite::Statement r, db_.Prepare(
      "UPDATE batch_rules SET state = 'cancelled' WHERE batch_id = ? AND state IN ('pending', 'running')"));
  r.Bind(1, id);
  TEMPER_RETURN_IF_ERROR(r.Run());
  int rules_cancelled = db_.Changes();
  nlohmann::json data = {{"reason", reason}, {"previous_state", BatchStateName(before.state)},
                         {"rules_cancelled", rules_cancelled}};
  TEMPER_ASSIGN_OR_RETURN(EventRecord stored,
                          AppendEventLocked(DaemonEvent(id, before.target, "batch.cancelled", data)));
  TEMPER_RETURN_IF_ERROR(txn.Commit());
  TEMPER_ASSIGN_OR_RETURN(BatchRecord after, LoadBatchLocked(id, true));
  return Cancelled{std::move(after), std::move(stored)};
}

Result<EventRecord> StateStore::AppendEvent(const NewEvent& event) {
  std::lock_guard lock(mu_);
  TEMPER_ASSIGN_OR_RETURN(sqlite::Transaction txn, sqlite::Transaction::Begin(db_));
  TEMPER_ASSIGN_OR_RETURN(EventRecord stored, AppendEventLocked(event));
  TEMPER_RETURN_IF_ERROR(txn.Commit());
  return stored;
}

Result<EventRecord> StateStore::AppendEventLocked(const NewEvent& event) {
  if (!nlohmann::json::accept(event.data_json) || !nlohmann::json::parse(event.data_json).is_object()) {
    return Status::InvalidArgument(fmt::format("journal event '{}': data is not a JSON object", event.type));
  }
  EventRecord e{.time = NowMs(), .batch_id = event.batch_id, .target = event.target,
                .rule_id = event.rule_id, .role = event.role, .type = event.type,
                .data_json = event.data_json, .usage = event.usage};
  TEMPER_ASSIGN_OR_RETURN(
      sqlite::Statement insert,
      db_.Prepare("INSERT INTO journal(time_ms, batch_id, target, rule_id, role, type, data, "
                  "prompt_tokens, completion_tokens, cached_prompt_tokens) "
                  "VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  insert.Bind(1, e.time);
  if (e.batch_id) {
    insert.Bind(2, *e.batch_id);
  } else {
    insert.BindNull(2);
  }
  insert.Bind(3, e.target).Bind(4, e.rule_id).Bind(5, e.role).Bind(6, e.type).Bind(7, e.data_json);
  insert.Bind(8, e.usage.prompt_tokens).Bind(9, e.usage.completion_tokens);
  insert.Bind(10, e.usage.cached_prompt_tokens);
  TEMPER_RETURN_IF_ERROR(insert.Run());
  e.seq = static_cast<uint64_t>(db_.LastInsertRowId());
  return e;
}

Result<std::vector<EventRecord>> StateStore::ReadEvents(uint64_t after_seq,
                                                        std::optional<int64_t> batch_id,
                                                        uint32_t limit) {
  std::lock_guard lock(mu_);
  std::string sql = fmt::format("SELECT {} FROM journal WHERE seq > ?", kEventColumns);
  if (batch_id) sql += " AND batch_id = ?";
  sql += " ORDER BY seq LIMIT ?";
  TEMPER_ASSIGN_OR_RETURN(sqlite::Statement q, db_.Prepare(sql));
  int param = 1;
  q.Bind(param++, after_seq);
  if (batch_id) q.Bind(param++, *batch_id);
  q.Bind(param++, limit);
  std::vector<EventRecord> out;
  while (true) {
    TEMPER_ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    out.push_back(ReadEventRow(q));
  }
  return out;
}

Result<uint64_t> StateStore::LastSeq() {
  std::lock_guard lock(mu_);
  TEMPER_ASSIGN_OR_RETURN(int64_t seq, db_.QueryInt("SELECT COALESCE(MAX(seq), 0) FROM journal"));
  return static_cast<uint64_t>(seq);
}

Result<int64_t> StateStore::RecordAttempt(const AttemptRecord& a) {
  std::lock_guard lock(mu_);
  TEMPER_ASSIGN_OR_RETURN(
      sqlite::Statement q,
      db_.Prepare("INSERT INTO attempts(batch_id, rule_id, number, approach, commands, verdict, outcome, "
                  "evidence, reflection, prompt_tokens, completion_tokens, cached_prompt_tokens, "
                  "started_at_ms, finished_at_ms) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  q.Bind(1, a.batch_id).Bind(2, a.rule_id).Bind(3, a.number).Bind(4, a.approach);
  q.Bind(5, nlohmann::json(a.commands).dump()).Bind(6, a.verdict).Bind(7, a.outcome);
  q.Bind(8, a.evidence).Bind(9, a.reflection).Bind(10, a.usage.prompt_tokens);
  q.Bind(11, a.usage.completion_tokens).Bind(12, a.usage.cached_prompt_tokens);
  q.Bind(13, a.started_at).Bind(14, a.finished_at);
  Status s = q.Run();
  if (s.code() == StatusCode::kAlreadyExists) {
    return Status::AlreadyExists(fmt::format("attempt {} of rule {} in batch {} is already recorded",
                                             a.number, a.rule_id, a.batch_id));
  }
  TEMPER_RETURN_IF_ERROR(s);
  return db_.LastInsertRowId();
}

Result<int64_t> StateStore::AddLesson(const LessonRecord& l) {
  std::lock_guard lock(mu_);
  TimeMs now = NowMs();
  TEMPER_ASSIGN_OR_RETURN(
      sqlite::Statement q,
      db_.Prepare("INSERT INTO lessons(rule_id, batch_id, text, utility, created_at_ms, updated_at_ms) "
                  "VALUES(?, ?, ?, ?, ?, ?)"));
  q.Bind(1, l.rule_id);
  if (l.batch_id) {
    q.Bind(2, *l.batch_id);
  } else {
    q.BindNull(2);
  }
  q.Bind(3, l.text).Bind(4, l.utility).Bind(5, now).Bind(6, now);
  TEMPER_RETURN_IF_ERROR(q.Run());
  return db_.LastInsertRowId();
}

Status StateStore::AdjustLessonUtility(int64_t lesson_id, double delta) {
  std::lock_guard lock(mu_);
  TEMPER_ASSIGN_OR_RETURN(
      sqlite::Statement q,
      db_.Prepare("UPDATE lessons SET utility = utility + ?, updated_at_ms = ? WHERE id = ?"));
  q.Bind(1, delta).Bind(2, NowMs()).Bind(3, lesson_id);
  TEMPER_RETURN_IF_ERROR(q.Run());
  if (db_.Changes() == 0) return Status::NotFound(fmt::format("lesson {} does not exist", lesson_id));
  return Status::OK();
}

Result<RuleMemoryRecord> StateStore::GetRuleMemory(const std::string& rule_id, uint32_t max_lessons,
                                                   uint32_t max_attempts) {
  std::lock_guard lock(mu_);
  RuleMemoryRecord memory;
  memory.rule_id = rule_id;
  TEMPER_ASSIGN_OR_RETURN(
      sqlite::Statement lessons,
      db_.Prepare("SELECT id, rule_id, batch_id, text, utility, created_at_ms, updated_at_ms "
                  "FROM lessons WHERE rule_id = ? ORDER BY id DESC LIMIT ?"));
  lessons.Bind(1, rule_id).Bind(2, max_lessons);
  while (true) {
    TEMPER_ASSIGN_OR_RETURN(bool row, lessons.Step());
    if (!row) break;
    LessonRecord l;
    l.id = lessons.ColumnInt(0);
    l.rule_id = lessons.ColumnText(1);
    if (!lessons.ColumnIsNull(2)) l.batch_id = lessons.ColumnInt(2);
    l.text = lessons.ColumnText(3);
    l.utility = lessons.ColumnDouble(4);
    l.created_at = lessons.ColumnInt(5);
    l.updated_at = lessons.ColumnInt(6);
    memory.lessons.push_back(std::move(l));
  }
  TEMPER_ASSIGN_OR_RETURN(
      sqlite::Statement attempts,
      db_.Prepare("SELECT id, batch_id, rule_id, number, approach, commands, verdict, outcome, evidence, "
                  "reflection, prompt_tokens, completion_tokens, cached_prompt_tokens, started_at_ms, "
                  "finished_at_ms FROM attempts WHERE rule_id = ? ORDER BY id DESC LIMIT ?"));
  attempts.Bind(1, rule_id).Bind(2, max_attempts);
  while (true) {
    TEMPER_ASSIGN_OR_RETURN(bool row, attempts.Step());
    if (!row) break;
    AttemptRecord a;
    a.id = attempts.ColumnInt(0);
    a.batch_id = attempts.ColumnInt(1);
    a.rule_id = attempts.ColumnText(2);
    a.number = static_cast<uint32_t>(attempts.ColumnInt(3));
    a.approach = attempts.ColumnText(4);
    std::string commands = attempts.ColumnText(5);
    nlohmann::json parsed = nlohmann::json::parse(commands, nullptr, /*allow_exceptions=*/false);
    if (!parsed.is_array()) {
      return Status::DataLoss(fmt::format("attempt {}: stored commands are not a JSON array", a.id));
    }
    for (const auto& c : parsed) {
      if (c.is_string()) a.commands.push_back(c.get<std::string>());
    }
    a.verdict = attempts.ColumnText(6);
    a.outcome = attempts.ColumnText(7);
    a.evidence = attempts.ColumnText(8);
    a.reflection = attempts.ColumnText(9);
    a.usage.prompt_tokens = static_cast<uint64_t>(attempts.ColumnInt(10));
    a.usage.completion_tokens = static_cast<uint64_t>(attempts.ColumnInt(11));
    a.usage.cached_prompt_tokens = static_cast<uint64_t>(attempts.ColumnInt(12));
    a.started_at = attempts.ColumnInt(13);
    a.finished_at = attempts.ColumnInt(14);
    memory.attempts.push_back(std::move(a));
  }
  return memory;
}

}  // namespace temper
