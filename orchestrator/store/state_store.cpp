#include "orchestrator/store/state_store.h"

#include <chrono>

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/dcheck.h"
#include "orchestrator/journal_event_types.h"
#include "orchestrator/store/journal_event_bounds.h"
#include "orchestrator/store/schema.h"

namespace temper {

namespace {

constexpr const char* kBatchColumns =
    "id, name, target, datastream, profile, whole_profile, max_attempts, wall_time_s, max_tokens, "
    "state, error, created_at_ms, updated_at_ms, request_id, good_snapshot, results_dir, options, "
    "start_snapshot, fixpoint, reverted_at_ms, reboot_confirmed_seq, apply_from, fleet, at_once";

std::string OptionsToJson(const BatchOptions& options) {
  nlohmann::json waivers = nlohmann::json::array();
  for (const Waiver& w : options.waivers) {
    nlohmann::json j = {{"rule_id", w.rule_id}, {"reason", w.reason}, {"owner", w.owner}};
    if (w.expires_at) j["expires_at_ms"] = *w.expires_at;
    waivers.push_back(std::move(j));
  }
  return nlohmann::json{{"waivers", waivers},
                        {"allow_disruptive", options.allow_disruptive},
                        {"plan_only", options.plan_only},
                        {"parallel_attempts", options.parallel_attempts}}
      .dump();
}

Result<BatchOptions> OptionsFromJson(int64_t batch_id, const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto corrupt = [&](std::string_view what) {
    return Status::DataLoss(fmt::format("batch {}: stored options: {}", batch_id, what));
  };
  if (!j.is_object()) return corrupt("not a JSON object");
  BatchOptions options;
  options.allow_disruptive = j.value("allow_disruptive", false);
  options.plan_only = j.value("plan_only", false);
  if (j.contains("parallel_attempts")) {  // batches stored before it was an option ran serially
    const nlohmann::json& n = j["parallel_attempts"];
    if (!n.is_number_unsigned() || n.get<uint64_t>() < 1 || n.get<uint64_t>() > kMaxParallelAttempts) {
      return corrupt(fmt::format("parallel_attempts {} is not 1 to {}", n.dump(), kMaxParallelAttempts));
    }
    options.parallel_attempts = n.get<uint32_t>();
  }
  const nlohmann::json& waivers = j.contains("waivers") ? j["waivers"] : nlohmann::json::array();
  if (!waivers.is_array()) return corrupt("waivers is not an array");
  for (const nlohmann::json& w : waivers) {
    if (!w.is_object() || !w.contains("rule_id") || !w["rule_id"].is_string())
      return corrupt("a waiver has no rule_id");
    Waiver waiver;
    waiver.rule_id = w["rule_id"].get<std::string>();
    waiver.reason = w.value("reason", "");
    waiver.owner = w.value("owner", "");
    if (w.contains("expires_at_ms") && w["expires_at_ms"].is_number_integer()) {
      waiver.expires_at = w["expires_at_ms"].get<TimeMs>();
    }
    options.waivers.push_back(std::move(waiver));
  }
  return options;
}

nlohmann::json FixpointPassToJson(const FixpointPass& p) {
  return {{"pass", p.pass},   {"final", p.final},     {"verdicts", p.verdicts}, {"attempts", p.attempts},
          {"fixed", p.fixed}, {"flipped", p.flipped}, {"requeued", p.requeued}, {"escalated", p.escalated}};
}

Result<std::vector<FixpointPass>> FixpointFromJson(int64_t batch_id, const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array())
    return Status::DataLoss(fmt::format("batch {}: stored fixpoint passes are not a JSON array", batch_id));
  std::vector<FixpointPass> out;
  for (const nlohmann::json& p : j) {
    if (!p.is_object() || !p.contains("pass") || !p["pass"].is_number_unsigned()) {
      return Status::DataLoss(fmt::format("batch {}: a stored fixpoint pass has no pass number", batch_id));
    }
    FixpointPass pass;
    pass.pass = p["pass"].get<uint32_t>();
    pass.final = p.value("final", false);
    pass.attempts = p.value("attempts", 0u);
    pass.fixed = p.value("fixed", 0u);
    if (p.contains("verdicts") && p["verdicts"].is_object()) {
      for (const auto& [verdict, n] : p["verdicts"].items()) {
        if (n.is_number_unsigned()) pass.verdicts[verdict] = n.get<uint32_t>();
      }
    }
    for (auto [key, into] : {std::pair{"flipped", &pass.flipped}, std::pair{"requeued", &pass.requeued},
                             std::pair{"escalated", &pass.escalated}}) {
      if (!p.contains(key) || !p[key].is_array()) continue;
      for (const nlohmann::json& id : p[key]) {
        if (id.is_string()) into->push_back(id.get<std::string>());
      }
    }
    out.push_back(std::move(pass));
  }
  return out;
}

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
  if (!row.ColumnIsNull(14)) b.good_snapshot = static_cast<uint32_t>(row.ColumnInt(14));
  b.results_dir = row.ColumnText(15);
  TEMPER_ASSIGN_OR_RETURN(b.options, OptionsFromJson(b.id, row.ColumnText(16)));
  if (!row.ColumnIsNull(17)) b.start_snapshot = static_cast<uint32_t>(row.ColumnInt(17));
  TEMPER_ASSIGN_OR_RETURN(b.fixpoint, FixpointFromJson(b.id, row.ColumnText(18)));
  if (!row.ColumnIsNull(19)) b.reverted_at = row.ColumnInt(19);
  if (!row.ColumnIsNull(20)) b.reboot_confirmed_seq = static_cast<uint64_t>(row.ColumnInt(20));
  b.apply_from = row.ColumnInt(21);
  b.fleet = row.ColumnInt(22);
  b.at_once = static_cast<uint32_t>(row.ColumnInt(23));
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

constexpr const char* kLessonColumns =
    "id, rule_id, group_id, batch_id, text, utility, created_at_ms, updated_at_ms, target_class, target, learnt_by";

Result<std::vector<LessonRecord>> ReadLessons(sqlite::Statement& q) {
  std::vector<LessonRecord> out;
  while (true) {
    TEMPER_ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    LessonRecord l;
    l.id = q.ColumnInt(0);
    l.rule_id = q.ColumnText(1);
    l.group_id = q.ColumnText(2);
    if (!q.ColumnIsNull(3)) l.batch_id = q.ColumnInt(3);
    l.text = q.ColumnText(4);
    l.utility = q.ColumnDouble(5);
    l.created_at = q.ColumnInt(6);
    l.updated_at = q.ColumnInt(7);
    l.target_class = q.ColumnText(8);
    l.target = q.ColumnText(9);
    l.learnt_by = q.ColumnText(10);
    out.push_back(std::move(l));
  }
  return out;
}

constexpr const char* kAttemptColumns =
    "id, batch_id, rule_id, number, approach, commands, verdict, outcome, evidence, reflection, "
    "prompt_tokens, completion_tokens, cached_prompt_tokens, started_at_ms, finished_at_ms, changes, snapshot, "
    "reverted_at_ms, fix";

Result<AttemptRecord> ReadAttemptRow(const sqlite::Statement& q) {
  AttemptRecord a;
  a.id = q.ColumnInt(0);
  a.batch_id = q.ColumnInt(1);
  a.rule_id = q.ColumnText(2);
  a.number = static_cast<uint32_t>(q.ColumnInt(3));
  a.approach = q.ColumnText(4);
  nlohmann::json commands = nlohmann::json::parse(q.ColumnText(5), nullptr, /*allow_exceptions=*/false);
  if (!commands.is_array()) {
    return Status::DataLoss(fmt::format("attempt {}: stored commands are not a JSON array", a.id));
  }
  for (const auto& c : commands) {
    if (c.is_string()) a.commands.push_back(c.get<std::string>());
  }
  a.verdict = q.ColumnText(6);
  std::optional<AttemptOutcome> outcome = ParseAttemptOutcome(q.ColumnText(7));
  if (!outcome) return Status::DataLoss(fmt::format("attempt {}: unknown stored outcome '{}'", a.id, q.ColumnText(7)));
  a.outcome = *outcome;
  a.evidence = q.ColumnText(8);
  a.reflection = q.ColumnText(9);
  a.usage.prompt_tokens = static_cast<uint64_t>(q.ColumnInt(10));
  a.usage.completion_tokens = static_cast<uint64_t>(q.ColumnInt(11));
  a.usage.cached_prompt_tokens = static_cast<uint64_t>(q.ColumnInt(12));
  a.started_at = q.ColumnInt(13);
  a.finished_at = q.ColumnInt(14);
  a.changes_json = q.ColumnText(15);
  if (!q.ColumnIsNull(16)) a.snapshot = static_cast<uint32_t>(q.ColumnInt(16));
  if (!q.ColumnIsNull(17)) a.reverted_at = q.ColumnInt(17);
  a.fix_json = q.ColumnText(18);
  return a;
}

// Every row `q` (a SELECT of kAttemptColumns, its parameters bound) yields.
Result<std::vector<AttemptRecord>> ReadAttemptRows(sqlite::Statement& q) {
  std::vector<AttemptRecord> out;
  while (true) {
    TEMPER_ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    TEMPER_ASSIGN_OR_RETURN(AttemptRecord a, ReadAttemptRow(q));
    out.push_back(std::move(a));
  }
  return out;
}

// An event the daemon itself records about a batch (submitted, cancelled).
NewEvent DaemonEvent(int64_t batch_id, const std::string& target, EventType type, const nlohmann::json& data) {
  NewEvent event;
  event.batch_id = batch_id;
  event.target = target;
  event.role = "daemon";
  event.type = EventTypeName(type);
  event.data_json = EventDataJson(data);
  return event;
}

}  // namespace

Result<std::unique_ptr<StateStore>> StateStore::Open(const std::string& path, temper::Env& env) {
  TEMPER_ASSIGN_OR_RETURN(std::unique_ptr<sqlite::EnvVfs> vfs, sqlite::EnvVfs::Register(env));
  TEMPER_ASSIGN_OR_RETURN(sqlite::Database db, sqlite::Database::Open(path, vfs->name()));
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
  return std::unique_ptr<StateStore>(new StateStore(env, std::move(vfs), std::move(db), static_cast<int>(migrated)));
}

TimeMs StateStore::EnvNowMs() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(env_.Now().time_since_epoch()).count();
}

bool StateStore::IsNewestSeqLocked(uint64_t seq) {
  Result<int64_t> newest = db_.QueryInt("SELECT COALESCE(MAX(seq), 0) FROM journal");
  return newest.ok() && static_cast<uint64_t>(*newest) == seq;
}

Result<StateStore::Submitted> StateStore::SubmitBatch(const NewBatch& nb) {
  std::lock_guard lock(mu_);
  if (!nb.request_id.empty()) {
    TEMPER_ASSIGN_OR_RETURN(sqlite::Statement find, db_.Prepare("SELECT id FROM batches WHERE request_id = ?"));
    find.Bind(1, nb.request_id);
    TEMPER_ASSIGN_OR_RETURN(bool found, find.Step());
    if (found) {
      TEMPER_ASSIGN_OR_RETURN(BatchRecord existing, LoadBatchLocked(find.ColumnInt(0), true));
      return Submitted{std::move(existing), std::nullopt};
    }
  }
  TEMPER_ASSIGN_OR_RETURN(sqlite::Transaction txn, sqlite::Transaction::Begin(db_));
  TEMPER_ASSIGN_OR_RETURN(InsertedBatch inserted, InsertBatchLocked(nb, EnvNowMs()));
  TEMPER_RETURN_IF_ERROR(txn.Commit());
  TEMPER_ASSIGN_OR_RETURN(BatchRecord batch, LoadBatchLocked(inserted.id, true));
  return Submitted{std::move(batch), std::move(inserted.event)};
}

Result<std::vector<StateStore::Submitted>> StateStore::SubmitFleet(const std::vector<NewBatch>& batches) {
  std::lock_guard lock(mu_);
  if (batches.empty()) return Status::InvalidArgument("a fleet of no batches");
  const TimeMs now = EnvNowMs();
  TEMPER_ASSIGN_OR_RETURN(sqlite::Transaction txn, sqlite::Transaction::Begin(db_));
  std::vector<InsertedBatch> inserted;
  for (NewBatch nb : batches) {
    nb.request_id.clear();  // one call is one fleet: idempotency is not per batch
    nb.fleet = inserted.empty() ? 0 : inserted.front().id;
    TEMPER_ASSIGN_OR_RETURN(InsertedBatch one, InsertBatchLocked(nb, now));
    inserted.push_back(std::move(one));
  }
  // The fleet is named by its first batch, whose id only the insert tells.
  TEMPER_ASSIGN_OR_RETURN(sqlite::Statement name_fleet, db_.Prepare("UPDATE batches SET fleet = ? WHERE id = ?"));
  name_fleet.Bind(1, inserted.front().id).Bind(2, inserted.front().id);
  TEMPER_RETURN_IF_ERROR(name_fleet.Run());
  TEMPER_RETURN_IF_ERROR(txn.Commit());
  std::vector<Submitted> submitted;
  for (InsertedBatch& one : inserted) {
    TEMPER_ASSIGN_OR_RETURN(BatchRecord batch, LoadBatchLocked(one.id, true));
    submitted.push_back(Submitted{std::move(batch), std::move(one.event)});
  }
  return submitted;
}

Result<StateStore::InsertedBatch> StateStore::InsertBatchLocked(const NewBatch& nb, TimeMs now) {
  TEMPER_ASSIGN_OR_RETURN(
      sqlite::Statement insert,
      db_.Prepare("INSERT INTO batches(name, target, datastream, profile, whole_profile, max_attempts, "
                  "wall_time_s, max_tokens, state, created_at_ms, updated_at_ms, request_id, options, apply_from, "
                  "fleet, at_once) VALUES(?, ?, ?, ?, ?, ?, ?, ?, 'queued', ?, ?, ?, ?, ?, ?, ?)"));
  insert.Bind(1, nb.name).Bind(2, nb.target).Bind(3, nb.datastream).Bind(4, nb.profile);
  insert.Bind(5, nb.whole_profile ? 1 : 0).Bind(6, nb.budgets.max_attempts);
  insert.Bind(7, nb.budgets.wall_time.count()).Bind(8, nb.budgets.max_tokens);
  insert.Bind(9, now).Bind(10, now);
  if (nb.request_id.empty()) {
    insert.BindNull(11);
  } else {
    insert.Bind(11, nb.request_id);
  }
  insert.Bind(12, OptionsToJson(nb.options));
  insert.Bind(13, nb.apply_from).Bind(14, nb.fleet).Bind(15, nb.at_once);
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
                         {"waivers", nb.options.waivers.size()},
                         {"allow_disruptive", nb.options.allow_disruptive},
                         {"plan_only", nb.options.plan_only},
                         {"parallel_attempts", nb.options.parallel_attempts},
                         {"budgets",
                          {{"max_attempts", nb.budgets.max_attempts},
                           {"wall_time_seconds", nb.budgets.wall_time.count()},
                           {"max_tokens", nb.budgets.max_tokens}}}};
  if (nb.apply_from != 0) {
    data["apply_from"] = nb.apply_from;
    data["at_once"] = nb.at_once;
  }
  TEMPER_ASSIGN_OR_RETURN(EventRecord stored,
                          AppendEventLocked(DaemonEvent(id, nb.target, EventType::kBatchSubmitted, data)));
  return InsertedBatch{id, std::move(stored)};
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
      db_.Prepare("SELECT rule_id, state, attempts, tokens_used, detail, before_verdict, after_verdict "
                  "FROM batch_rules WHERE batch_id = ? ORDER BY position"));
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
    r.before_verdict = rules.ColumnText(5);
    r.after_verdict = rules.ColumnText(6);
    batch.rules.push_back(std::move(r));
  }
  return batch;
}

Status StateStore::FillRuleCountsLocked(BatchRecord& batch) {
  TEMPER_ASSIGN_OR_RETURN(sqlite::Statement q,
                          db_.Prepare("SELECT state, COUNT(*) FROM batch_rules WHERE batch_id = ? GROUP BY state"));
  q.Bind(1, batch.id);
  while (true) {
    TEMPER_ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    std::optional<RuleState> state = ParseRuleState(q.ColumnText(0));
    if (!state)
      return Status::DataLoss(fmt::format("batch {} has a rule in unknown state '{}'", batch.id, q.ColumnText(0)));
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
    return Status::FailedPrecondition(
        fmt::format("batch {} already ended ({}); nothing to cancel", id, BatchStateName(before.state)));
  }
  TEMPER_ASSIGN_OR_RETURN(sqlite::Transaction txn, sqlite::Transaction::Begin(db_));
  TEMPER_ASSIGN_OR_RETURN(
      sqlite::Statement b,
      db_.Prepare("UPDATE batches SET state = 'cancelled', error = ?, updated_at_ms = ? WHERE id = ?"));
  b.Bind(1, reason).Bind(2, EnvNowMs()).Bind(3, id);
  TEMPER_RETURN_IF_ERROR(b.Run());
  TEMPER_ASSIGN_OR_RETURN(
      sqlite::Statement r,
      db_.Prepare("UPDATE batch_rules SET state = 'cancelled' WHERE batch_id = ? AND state IN ('pending', 'running')"));
  r.Bind(1, id);
  TEMPER_RETURN_IF_ERROR(r.Run());
  int rules_cancelled = db_.Changes();
  nlohmann::json data = {{"reason", reason},
                         {"previous_state", BatchStateName(before.state)},
                         {"rules_cancelled", rules_cancelled}};
  TEMPER_ASSIGN_OR_RETURN(EventRecord stored,
                          AppendEventLocked(DaemonEvent(id, before.target, EventType::kBatchCancelled, data)));
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

Result<EventRecord> StateStore::AppendEventLocked(const NewEvent& unbounded) {
  if (!nlohmann::json::accept(unbounded.data_json) || !nlohmann::json::parse(unbounded.data_json).is_object()) {
    return Status::InvalidArgument(fmt::format("journal event '{}': data is not a JSON object", unbounded.type));
  }
  // Every event enters the journal here, so this is where each one is bounded (journal_event_bounds.h).
  const NewEvent event = BoundJournalEvent(unbounded);
  EventRecord e{.time = EnvNowMs(),
                .batch_id = event.batch_id,
                .target = event.target,
                .rule_id = event.rule_id,
                .role = event.role,
                .type = event.type,
                .data_json = event.data_json,
                .usage = event.usage};
  TEMPER_ASSIGN_OR_RETURN(sqlite::Statement insert,
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
  TEMPER_DCHECK(IsNewestSeqLocked(e.seq), "journal seqs are strictly increasing and committed in seq order");
  return e;
}

Result<std::vector<EventRecord>> StateStore::ReadEvents(uint64_t after_seq, std::optional<int64_t> batch_id,
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
  return RecordAttemptLocked(a);
}

Result<int64_t> StateStore::RecordAttemptLocked(const AttemptRecord& a) {
  TEMPER_ASSIGN_OR_RETURN(
      sqlite::Statement q,
      db_.Prepare("INSERT INTO attempts(batch_id, rule_id, number, approach, commands, verdict, outcome, "
                  "evidence, reflection, prompt_tokens, completion_tokens, cached_prompt_tokens, "
                  "started_at_ms, finished_at_ms, changes, snapshot, fix) "
                  "VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  q.Bind(1, a.batch_id).Bind(2, a.rule_id).Bind(3, a.number).Bind(4, a.approach);
  q.Bind(5, EventDataJson(nlohmann::json(a.commands)))
      .Bind(6, a.verdict)
      .Bind(7, std::string(AttemptOutcomeName(a.outcome)));
  q.Bind(8, a.evidence).Bind(9, a.reflection).Bind(10, a.usage.prompt_tokens);
  q.Bind(11, a.usage.completion_tokens).Bind(12, a.usage.cached_prompt_tokens);
  q.Bind(13, a.started_at).Bind(14, a.finished_at).Bind(15, a.changes_json);
  if (a.snapshot) {
    q.Bind(16, *a.snapshot);
  } else {
    q.BindNull(16);
  }
  q.Bind(17, a.fix_json);
  Status s = q.Run();
  if (s.code() == StatusCode::kAlreadyExists) {
    return Status::AlreadyExists(
        fmt::format("attempt {} of rule {} in batch {} is already recorded", a.number, a.rule_id, a.batch_id));
  }
  TEMPER_RETURN_IF_ERROR(s);
  return db_.LastInsertRowId();
}

Result<int64_t> StateStore::AddLesson(const LessonRecord& l) {
  std::lock_guard lock(mu_);
  return AddLessonLocked(l);
}

Result<int64_t> StateStore::AddLessonLocked(const LessonRecord& l) {
  TimeMs now = EnvNowMs();
  TEMPER_ASSIGN_OR_RETURN(
      sqlite::Statement q,
      db_.Prepare("INSERT INTO lessons(rule_id, group_id, batch_id, text, utility, created_at_ms, updated_at_ms, "
                  "target_class, target, learnt_by) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  q.Bind(1, l.rule_id).Bind(2, l.group_id);
  if (l.batch_id) {
    q.Bind(3, *l.batch_id);
  } else {
    q.BindNull(3);
  }
  q.Bind(4, l.text).Bind(5, l.utility).Bind(6, now).Bind(7, now);
  q.Bind(8, l.target_class).Bind(9, l.target).Bind(10, l.learnt_by);
  TEMPER_RETURN_IF_ERROR(q.Run());
  return db_.LastInsertRowId();
}

Status StateStore::AdjustLessonUtility(int64_t lesson_id, double delta) {
  std::lock_guard lock(mu_);
  return AdjustLessonUtilityLocked(lesson_id, delta);
}

Status StateStore::AdjustLessonUtilityLocked(int64_t lesson_id, double delta) {
  TEMPER_ASSIGN_OR_RETURN(
      sqlite::Statement q,
      db_.Prepare("UPDATE lessons SET utility = MIN(1.0, MAX(0.0, utility + ?)), updated_at_ms = ? WHERE id = ?"));
  q.Bind(1, delta).Bind(2, EnvNowMs()).Bind(3, lesson_id);
  TEMPER_RETURN_IF_ERROR(q.Run());
  if (db_.Changes() == 0) return Status::NotFound(fmt::format("lesson {} does not exist", lesson_id));
  return Status::OK();
}

Result<RuleMemoryRecord> StateStore::GetRuleMemory(const std::string& rule_id, uint32_t max_lessons,
                                                   uint32_t max_attempts) {
  std::lock_guard lock(mu_);
  RuleMemoryRecord memory;
  memory.rule_id = rule_id;
  TEMPER_ASSIGN_OR_RETURN(memory.lessons,
                          QueryLessonsLocked("WHERE rule_id = ? ORDER BY id DESC LIMIT ?", {rule_id}, max_lessons));
  TEMPER_ASSIGN_OR_RETURN(memory.attempts,
                          QueryAttemptsLocked("WHERE rule_id = ? ORDER BY id DESC LIMIT ?", rule_id, max_attempts));
  return memory;
}

namespace {

// `scope` as SQL conditions on the lessons table (AND-ed to a WHERE clause) and their values, in order.
std::pair<std::string, std::vector<std::string>> ScopeCondition(const LessonScope& scope) {
  std::vector<std::string> values = scope.classes;
  std::vector<std::string> marks(scope.classes.size(), "?");
  // No class at all: nothing is in scope.
  std::string sql = scope.classes.empty() ? " AND 0" : fmt::format(" AND target_class IN ({})", fmt::join(marks, ", "));
  if (scope.target) {
    sql += " AND target = ?";
    values.push_back(*scope.target);
  }
  return {sql, values};
}

}  // namespace

Result<std::vector<LessonRecord>> StateStore::RuleLessons(const std::string& rule_id, const LessonScope& scope,
                                                          uint32_t limit) {
  std::lock_guard lock(mu_);
  auto [condition, values] = ScopeCondition(scope);
  values.insert(values.begin(), rule_id);
  return QueryLessonsLocked(fmt::format("WHERE rule_id = ?{} ORDER BY id DESC LIMIT ?", condition), values, limit);
}

Result<std::vector<LessonRecord>> StateStore::GroupLessons(const std::string& group_id, const std::string& except_rule,
                                                           const LessonScope& scope, uint32_t limit) {
  std::lock_guard lock(mu_);
  if (group_id.empty()) return std::vector<LessonRecord>{};
  auto [condition, values] = ScopeCondition(scope);
  values.insert(values.begin(), {group_id, except_rule});
  return QueryLessonsLocked(
      fmt::format("WHERE group_id = ? AND rule_id != ?{} ORDER BY utility DESC, id DESC LIMIT ?", condition), values,
      limit);
}

Result<std::vector<AttemptRecord>> StateStore::RuleAttemptsOnTarget(const std::string& rule_id,
                                                                    const std::string& target, uint32_t limit) {
  std::lock_guard lock(mu_);
  TEMPER_ASSIGN_OR_RETURN(sqlite::Statement q,
                          db_.Prepare(fmt::format("SELECT {} FROM attempts WHERE rule_id = ? AND batch_id IN "
                                                  "(SELECT id FROM batches WHERE target = ?) ORDER BY id DESC LIMIT ?",
                                                  kAttemptColumns)));
  q.Bind(1, rule_id).Bind(2, target).Bind(3, limit);
  return ReadAttemptRows(q);
}

Result<std::vector<AttemptRecord>> StateStore::BatchAttempts(int64_t batch_id) {
  std::lock_guard lock(mu_);
  return QueryAttemptsLocked("WHERE batch_id = ? ORDER BY id LIMIT ?", batch_id, UINT32_MAX);
}

Result<std::vector<AttemptRecord>> StateStore::BatchAttempts(int64_t batch_id, int64_t after_id, uint32_t limit) {
  std::lock_guard lock(mu_);
  return QueryAttemptsLocked(fmt::format("WHERE batch_id = ? AND id > {} ORDER BY id LIMIT ?", after_id), batch_id,
                             limit);
}

Result<std::vector<AttemptRecord>> StateStore::RuleAttempts(const std::string& rule_id, int64_t before_id,
                                                            uint32_t limit) {
  std::lock_guard lock(mu_);
  return QueryAttemptsLocked(fmt::format("WHERE rule_id = ? AND id < {} ORDER BY id DESC LIMIT ?", before_id), rule_id,
                             limit);
}

Result<std::vector<LessonRecord>> StateStore::BatchLessons(int64_t batch_id) {
  std::lock_guard lock(mu_);
  TEMPER_ASSIGN_OR_RETURN(
      sqlite::Statement q,
      db_.Prepare(fmt::format("SELECT {} FROM lessons WHERE batch_id = ? ORDER BY id", kLessonColumns)));
  q.Bind(1, batch_id);
  return ReadLessons(q);
}

Result<std::vector<RoleUsageRecord>> StateStore::BatchRoleUsage(int64_t batch_id) {
  std::lock_guard lock(mu_);
  TEMPER_ASSIGN_OR_RETURN(
      sqlite::Statement q,
      db_.Prepare("SELECT role, COUNT(*), SUM(prompt_tokens), SUM(completion_tokens), SUM(cached_prompt_tokens) "
                  "FROM journal WHERE batch_id = ? AND role != '' AND (prompt_tokens > 0 OR completion_tokens > 0) "
                  "GROUP BY role ORDER BY role"));
  q.Bind(1, batch_id);
  std::vector<RoleUsageRecord> out;
  while (true) {
    TEMPER_ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    RoleUsageRecord r;
    r.role = q.ColumnText(0);
    r.calls = static_cast<uint64_t>(q.ColumnInt(1));
    r.usage.prompt_tokens = static_cast<uint64_t>(q.ColumnInt(2));
    r.usage.completion_tokens = static_cast<uint64_t>(q.ColumnInt(3));
    r.usage.cached_prompt_tokens = static_cast<uint64_t>(q.ColumnInt(4));
    out.push_back(std::move(r));
  }
  return out;
}

Result<StateStore::StateCounts> StateStore::CountStates() {
  std::lock_guard lock(mu_);
  StateCounts out;
  for (auto [table, counts] : {std::pair{"batches", &out.batches}, std::pair{"batch_rules", &out.rules}}) {
    TEMPER_ASSIGN_OR_RETURN(sqlite::Statement q,
                            db_.Prepare(fmt::format("SELECT state, COUNT(*) FROM {} GROUP BY state", table)));
    while (true) {
      TEMPER_ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      (*counts)[q.ColumnText(0)] = static_cast<uint64_t>(q.ColumnInt(1));
    }
  }
  return out;
}

Result<std::vector<LessonRecord>> StateStore::QueryLessonsLocked(const std::string& where,
                                                                 const std::vector<std::string>& texts,
                                                                 uint32_t limit) {
  TEMPER_ASSIGN_OR_RETURN(sqlite::Statement q,
                          db_.Prepare(fmt::format("SELECT {} FROM lessons {}", kLessonColumns, where)));
  int param = 1;
  for (const std::string& t : texts) q.Bind(param++, t);
  q.Bind(param, limit);
  return ReadLessons(q);
}

template <typename Key>
Result<std::vector<AttemptRecord>> StateStore::QueryAttemptsLocked(const std::string& where, const Key& key,
                                                                   uint32_t limit) {
  TEMPER_ASSIGN_OR_RETURN(sqlite::Statement q,
                          db_.Prepare(fmt::format("SELECT {} FROM attempts {}", kAttemptColumns, where)));
  q.Bind(1, key).Bind(2, limit);
  return ReadAttemptRows(q);
}

Result<StateStore::RebootConfirmed> StateStore::ConfirmReboot(int64_t id, const std::string& note) {
  std::lock_guard lock(mu_);
  TEMPER_ASSIGN_OR_RETURN(BatchRecord batch, LoadBatchLocked(id, true));
  if (batch.state != BatchState::kCompleted) {
    return Status::FailedPrecondition(fmt::format(
        "batch {} is {}: only a completed batch has fixes staged for a reboot", id, BatchStateName(batch.state)));
  }
  std::vector<std::string> pending;
  for (const BatchRuleRecord& r : batch.rules) {
    if (r.state == RuleState::kRebootPending) pending.push_back(r.rule_id);
  }
  if (pending.empty()) {
    return Status::FailedPrecondition(fmt::format("batch {} has no rule waiting for a reboot (reboot_pending)", id));
  }
  if (batch.reboot_confirmed_seq) return RebootConfirmed{batch, *batch.reboot_confirmed_seq, std::nullopt};
  TEMPER_ASSIGN_OR_RETURN(sqlite::Transaction txn, sqlite::Transaction::Begin(db_));
  TEMPER_ASSIGN_OR_RETURN(EventRecord stored,
                          AppendEventLocked(DaemonEvent(id, batch.target, EventType::kRebootConfirmed,
                                                        {{"rules", pending}, {"note", note}})));
  TEMPER_ASSIGN_OR_RETURN(sqlite::Statement b,
                          db_.Prepare("UPDATE batches SET reboot_confirmed_seq = ?, updated_at_ms = ? WHERE id = ?"));
  b.Bind(1, static_cast<int64_t>(stored.seq)).Bind(2, EnvNowMs()).Bind(3, id);
  TEMPER_RETURN_IF_ERROR(b.Run());
  TEMPER_RETURN_IF_ERROR(txn.Commit());
  TEMPER_ASSIGN_OR_RETURN(BatchRecord after, LoadBatchLocked(id, true));
  return RebootConfirmed{std::move(after), stored.seq, std::move(stored)};
}

Result<std::optional<BatchRecord>> StateStore::NextRebootCheckForTarget(const std::string& target) {
  std::lock_guard lock(mu_);
  TEMPER_ASSIGN_OR_RETURN(
      sqlite::Statement q,
      db_.Prepare("SELECT id FROM batches WHERE target = ? AND reboot_confirmed_seq IS NOT NULL ORDER BY id LIMIT 1"));
  q.Bind(1, target);
  TEMPER_ASSIGN_OR_RETURN(bool found, q.Step());
  if (!found) return std::optional<BatchRecord>{};
  TEMPER_ASSIGN_OR_RETURN(BatchRecord batch, LoadBatchLocked(q.ColumnInt(0), true));
  return std::optional<BatchRecord>(std::move(batch));
}

Result<std::optional<BatchRecord>> StateStore::NextBatchForTarget(const std::string& target) {
  std::lock_guard lock(mu_);
  // A running batch is one a crash interrupted: it resumes before anything queued behind it.
  TEMPER_ASSIGN_OR_RETURN(sqlite::Statement q,
                          db_.Prepare("SELECT id FROM batches WHERE target = ? AND state IN ('running', 'queued') "
                                      "ORDER BY state = 'running' DESC, id LIMIT 1"));
  q.Bind(1, target);
  TEMPER_ASSIGN_OR_RETURN(bool found, q.Step());
  if (!found) return std::optional<BatchRecord>{};
  TEMPER_ASSIGN_OR_RETURN(BatchRecord batch, LoadBatchLocked(q.ColumnInt(0), true));
  return std::optional<BatchRecord>(std::move(batch));
}

Result<StepCommitted> StateStore::CommitStep(const LoopStep& step) {
  std::lock_guard lock(mu_);
  TEMPER_ASSIGN_OR_RETURN(BatchRecord batch, LoadBatchLocked(step.batch_id, false));
  StepCommitted out;
  out.batch_ended = IsFinal(batch.state);
  TimeMs now = EnvNowMs();
  TEMPER_ASSIGN_OR_RETURN(sqlite::Transaction txn, sqlite::Transaction::Begin(db_));
  if (step.reboot_verified) {
    TEMPER_ASSIGN_OR_RETURN(
        sqlite::Statement c,
        db_.Prepare("UPDATE batches SET reboot_confirmed_seq = NULL, updated_at_ms = ? WHERE id = ?"));
    c.Bind(1, now).Bind(2, step.batch_id);
    TEMPER_RETURN_IF_ERROR(c.Run());
  }
  if (!out.batch_ended || step.reboot_verified) {
    if (!step.add_rules.empty()) {
      TEMPER_ASSIGN_OR_RETURN(
          int64_t next,
          db_.QueryInt(fmt::format("SELECT COALESCE(MAX(position) + 1, 0) FROM batch_rules WHERE batch_id = {}",
                                   step.batch_id)));
      TEMPER_ASSIGN_OR_RETURN(
          sqlite::Statement add,
          db_.Prepare(
              "INSERT OR IGNORE INTO batch_rules(batch_id, position, rule_id, state) VALUES(?, ?, ?, 'pending')"));
      for (const std::string& rule_id : step.add_rules) {
        add.Reset();
        add.Bind(1, step.batch_id).Bind(2, next++).Bind(3, rule_id);
        TEMPER_RETURN_IF_ERROR(add.Run());
      }
    }
    for (const RuleUpdate& r : step.rules) {
      TEMPER_ASSIGN_OR_RETURN(
          sqlite::Statement u,
          db_.Prepare("UPDATE batch_rules SET state = COALESCE(?, state), detail = COALESCE(?, detail), "
                      "before_verdict = COALESCE(?, before_verdict), after_verdict = COALESCE(?, after_verdict), "
                      "attempts = attempts + ?, tokens_used = tokens_used + ? WHERE batch_id = ? AND rule_id = ?"));
      auto bind_optional = [&u](int index, const std::optional<std::string>& value) {
        if (value) {
          u.Bind(index, *value);
        } else {
          u.BindNull(index);
        }
      };
      bind_optional(1, r.state ? std::optional<std::string>(std::string(RuleStateName(*r.state))) : std::nullopt);
      bind_optional(2, r.detail);
      bind_optional(3, r.before_verdict);
      bind_optional(4, r.after_verdict);
      u.Bind(5, r.add_attempts).Bind(6, r.add_tokens).Bind(7, step.batch_id).Bind(8, r.rule_id);
      TEMPER_RETURN_IF_ERROR(u.Run());
      if (db_.Changes() == 0) {
        return Status::NotFound(fmt::format("batch {} has no rule {}", step.batch_id, r.rule_id));
      }
    }
    if (step.batch_state || step.good_snapshot || step.results_dir) {
      TEMPER_ASSIGN_OR_RETURN(
          sqlite::Statement b,
          db_.Prepare(
              "UPDATE batches SET state = COALESCE(?, state), error = CASE WHEN ? IS NULL THEN error ELSE ? END, "
              "good_snapshot = COALESCE(?, good_snapshot), results_dir = COALESCE(?, results_dir), "
              "updated_at_ms = ? WHERE id = ?"));
      if (step.batch_state) {
        b.Bind(1, BatchStateName(*step.batch_state)).Bind(2, 1).Bind(3, step.batch_error);
      } else {
        b.BindNull(1).BindNull(2).BindNull(3);
      }
      if (step.good_snapshot) {
        b.Bind(4, *step.good_snapshot);
      } else {
        b.BindNull(4);
      }
      if (step.results_dir) {
        b.Bind(5, *step.results_dir);
      } else {
        b.BindNull(5);
      }
      b.Bind(6, now).Bind(7, step.batch_id);
      TEMPER_RETURN_IF_ERROR(b.Run());
    }
    TEMPER_RETURN_IF_ERROR(CommitUndoFieldsLocked(step));
  }
  if (step.attempt) {
    TEMPER_ASSIGN_OR_RETURN(int64_t attempt_id, RecordAttemptLocked(*step.attempt));
    out.attempt_id = attempt_id;
  }
  if (step.lesson) {
    TEMPER_ASSIGN_OR_RETURN(int64_t lesson_id, AddLessonLocked(*step.lesson));
    out.lesson_id = lesson_id;
  }
  for (const auto& [lesson_id, delta] : step.utility_changes) {
    TEMPER_RETURN_IF_ERROR(AdjustLessonUtilityLocked(lesson_id, delta));
  }
  for (const NewEvent& event : step.events) {
    TEMPER_ASSIGN_OR_RETURN(EventRecord stored, AppendEventLocked(event));
    out.events.push_back(std::move(stored));
  }
  TEMPER_RETURN_IF_ERROR(txn.Commit());
  return out;
}

Status StateStore::CommitUndoFieldsLocked(const LoopStep& step) {
  if (step.start_snapshot) {
    TEMPER_ASSIGN_OR_RETURN(sqlite::Statement u, db_.Prepare("UPDATE batches SET start_snapshot = ? WHERE id = ?"));
    u.Bind(1, *step.start_snapshot).Bind(2, step.batch_id);
    TEMPER_RETURN_IF_ERROR(u.Run());
  }
  if (step.fixpoint_pass) {
    TEMPER_ASSIGN_OR_RETURN(sqlite::Statement q, db_.Prepare("SELECT fixpoint FROM batches WHERE id = ?"));
    q.Bind(1, step.batch_id);
    TEMPER_ASSIGN_OR_RETURN(bool found, q.Step());
    if (!found) return Status::NotFound(fmt::format("batch {} does not exist", step.batch_id));
    nlohmann::json passes = nlohmann::json::parse(q.ColumnText(0), nullptr, /*allow_exceptions=*/false);
    if (!passes.is_array()) {
      return Status::DataLoss(fmt::format("batch {}: stored fixpoint passes are not a JSON array", step.batch_id));
    }
    passes.push_back(FixpointPassToJson(*step.fixpoint_pass));
    TEMPER_ASSIGN_OR_RETURN(sqlite::Statement u, db_.Prepare("UPDATE batches SET fixpoint = ? WHERE id = ?"));
    u.Bind(1, passes.dump()).Bind(2, step.batch_id);
    TEMPER_RETURN_IF_ERROR(u.Run());
  }
  return Status::OK();
}

Result<StateStore::SnapshotOwners> StateStore::TargetSnapshotOwners(const std::string& target) {
  std::lock_guard lock(mu_);
  SnapshotOwners out;
  TEMPER_ASSIGN_OR_RETURN(sqlite::Statement b,
                          db_.Prepare("SELECT id, state, options, start_snapshot, reverted_at_ms FROM batches "
                                      "WHERE target = ? AND start_snapshot IS NOT NULL ORDER BY id"));
  b.Bind(1, target);
  while (true) {
    TEMPER_ASSIGN_OR_RETURN(bool row, b.Step());
    if (!row) break;
    SnapshotOwners::Batch batch;
    batch.id = b.ColumnInt(0);
    std::optional<BatchState> state = ParseBatchState(b.ColumnText(1));
    if (!state) return Status::DataLoss(fmt::format("batch {} has unknown state '{}'", batch.id, b.ColumnText(1)));
    batch.state = *state;
    TEMPER_ASSIGN_OR_RETURN(BatchOptions options, OptionsFromJson(batch.id, b.ColumnText(2)));
    batch.plan_only = options.plan_only;
    batch.start_snapshot = static_cast<uint32_t>(b.ColumnInt(3));
    if (!b.ColumnIsNull(4)) batch.reverted_at = b.ColumnInt(4);
    out.batches.push_back(std::move(batch));
  }
  TEMPER_ASSIGN_OR_RETURN(
      sqlite::Statement f,
      db_.Prepare("SELECT a.id, a.batch_id, a.rule_id, a.number, a.snapshot, a.reverted_at_ms FROM attempts a "
                  "JOIN batches b ON b.id = a.batch_id WHERE b.target = ? AND a.snapshot IS NOT NULL ORDER BY a.id"));
  f.Bind(1, target);
  while (true) {
    TEMPER_ASSIGN_OR_RETURN(bool row, f.Step());
    if (!row) break;
    SnapshotOwners::Fix fix;
    fix.attempt_id = f.ColumnInt(0);
    fix.batch_id = f.ColumnInt(1);
    fix.rule_id = f.ColumnText(2);
    fix.number = static_cast<uint32_t>(f.ColumnInt(3));
    fix.snapshot = static_cast<uint32_t>(f.ColumnInt(4));
    if (!f.ColumnIsNull(5)) fix.reverted_at = f.ColumnInt(5);
    out.fixes.push_back(std::move(fix));
  }
  return out;
}

Result<std::optional<BatchRecord>> StateStore::LastStartedBatch(const std::string& target) {
  std::lock_guard lock(mu_);
  TEMPER_ASSIGN_OR_RETURN(
      sqlite::Statement q,
      db_.Prepare("SELECT id FROM batches WHERE target = ? AND start_snapshot IS NOT NULL ORDER BY id DESC LIMIT 1"));
  q.Bind(1, target);
  TEMPER_ASSIGN_OR_RETURN(bool found, q.Step());
  if (!found) return std::optional<BatchRecord>{};
  TEMPER_ASSIGN_OR_RETURN(BatchRecord batch, LoadBatchLocked(q.ColumnInt(0), true));
  return std::optional<BatchRecord>(std::move(batch));
}

Result<std::optional<int64_t>> StateStore::RunningBatch(const std::string& target) {
  std::lock_guard lock(mu_);
  TEMPER_ASSIGN_OR_RETURN(
      sqlite::Statement q,
      db_.Prepare("SELECT id FROM batches WHERE target = ? AND state = 'running' ORDER BY id LIMIT 1"));
  q.Bind(1, target);
  TEMPER_ASSIGN_OR_RETURN(bool found, q.Step());
  if (!found) return std::optional<int64_t>{};
  return std::optional<int64_t>(q.ColumnInt(0));
}

Result<StepCommitted> StateStore::CommitRevert(const RevertStep& step) {
  std::lock_guard lock(mu_);
  TEMPER_ASSIGN_OR_RETURN(BatchRecord batch, LoadBatchLocked(step.batch_id, false));
  TimeMs now = EnvNowMs();
  StepCommitted out;
  TEMPER_ASSIGN_OR_RETURN(sqlite::Transaction txn, sqlite::Transaction::Begin(db_));
  for (const RuleUpdate& r : step.rules) {
    TEMPER_ASSIGN_OR_RETURN(
        sqlite::Statement u,
        db_.Prepare("UPDATE batch_rules SET state = COALESCE(?, state), detail = COALESCE(?, detail), "
                    "after_verdict = COALESCE(?, after_verdict) WHERE batch_id = ? AND rule_id = ?"));
    if (r.state) {
      u.Bind(1, RuleStateName(*r.state));
    } else {
      u.BindNull(1);
    }
    if (r.detail) {
      u.Bind(2, *r.detail);
    } else {
      u.BindNull(2);
    }
    if (r.after_verdict) {
      u.Bind(3, *r.after_verdict);
    } else {
      u.BindNull(3);
    }
    u.Bind(4, step.batch_id).Bind(5, r.rule_id);
    TEMPER_RETURN_IF_ERROR(u.Run());
    if (db_.Changes() == 0) return Status::NotFound(fmt::format("batch {} has no rule {}", step.batch_id, r.rule_id));
  }
  for (int64_t attempt : step.reverted_attempts) {
    TEMPER_ASSIGN_OR_RETURN(sqlite::Statement u,
                            db_.Prepare("UPDATE attempts SET reverted_at_ms = ? WHERE id = ? AND batch_id = ?"));
    u.Bind(1, now).Bind(2, attempt).Bind(3, step.batch_id);
    TEMPER_RETURN_IF_ERROR(u.Run());
    if (db_.Changes() == 0) {
      return Status::NotFound(fmt::format("batch {} has no attempt with id {}", step.batch_id, attempt));
    }
  }
  TEMPER_ASSIGN_OR_RETURN(sqlite::Statement b,
                          db_.Prepare("UPDATE batches SET reverted_at_ms = CASE WHEN ? THEN ? ELSE reverted_at_ms END, "
                                      "results_dir = COALESCE(?, results_dir), updated_at_ms = ? WHERE id = ?"));
  b.Bind(1, step.batch_reverted ? 1 : 0).Bind(2, now);
  if (step.results_dir) {
    b.Bind(3, *step.results_dir);
  } else {
    b.BindNull(3);
  }
  b.Bind(4, now).Bind(5, batch.id);
  TEMPER_RETURN_IF_ERROR(b.Run());
  for (const NewEvent& event : step.events) {
    TEMPER_ASSIGN_OR_RETURN(EventRecord stored, AppendEventLocked(event));
    out.events.push_back(std::move(stored));
  }
  TEMPER_RETURN_IF_ERROR(txn.Commit());
  return out;
}

Result<std::vector<BatchRecord>> StateStore::FleetBatches(int64_t fleet) {
  std::lock_guard lock(mu_);
  std::vector<BatchRecord> out;
  if (fleet == 0) return out;  // 0 marks a batch outside any fleet, not a fleet
  TEMPER_ASSIGN_OR_RETURN(
      sqlite::Statement q,
      db_.Prepare(fmt::format("SELECT {} FROM batches WHERE fleet = ? ORDER BY id", kBatchColumns)));
  q.Bind(1, fleet);
  while (true) {
    TEMPER_ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    TEMPER_ASSIGN_OR_RETURN(BatchRecord b, ReadBatchRow(q));
    out.push_back(std::move(b));
  }
  for (BatchRecord& b : out) TEMPER_RETURN_IF_ERROR(FillRuleCountsLocked(b));
  return out;
}

namespace {

constexpr const char* kFixColumns =
    "id, rule_id, content_id, platform, bundle, evidence, source_batch, source_attempt, source_target, model_tokens, "
    "uses, failures, tokens_saved, last_failure, created_at_ms, retired_at_ms, retired_reason";

FixRecord ReadFixRow(const sqlite::Statement& q) {
  FixRecord f;
  f.id = q.ColumnInt(0);
  f.rule_id = q.ColumnText(1);
  f.content_id = q.ColumnText(2);
  f.platform_json = q.ColumnText(3);
  f.bundle_json = q.ColumnText(4);
  f.evidence = q.ColumnText(5);
  f.source_batch = q.ColumnInt(6);
  f.source_attempt = q.ColumnInt(7);
  f.source_target = q.ColumnText(8);
  f.model_tokens = static_cast<uint64_t>(q.ColumnInt(9));
  f.uses = static_cast<uint32_t>(q.ColumnInt(10));
  f.failures = static_cast<uint32_t>(q.ColumnInt(11));
  f.tokens_saved = static_cast<uint64_t>(q.ColumnInt(12));
  f.last_failure = q.ColumnText(13);
  f.created_at = q.ColumnInt(14);
  if (!q.ColumnIsNull(15)) f.retired_at = q.ColumnInt(15);
  f.retired_reason = q.ColumnText(16);
  return f;
}

Result<std::vector<FixRecord>> ReadFixRows(sqlite::Statement& q) {
  std::vector<FixRecord> out;
  while (true) {
    TEMPER_ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    out.push_back(ReadFixRow(q));
  }
  return out;
}

}  // namespace

Result<int64_t> StateStore::AddFix(const FixRecord& fix) {
  std::lock_guard lock(mu_);
  TEMPER_ASSIGN_OR_RETURN(sqlite::Transaction txn, sqlite::Transaction::Begin(db_));
  // The same fix proven again (another batch on the same image) is one entry, not a second.
  TEMPER_ASSIGN_OR_RETURN(sqlite::Statement find,
                          db_.Prepare("SELECT id FROM fixes WHERE rule_id = ? AND content_id = ? AND platform = ? "
                                      "AND bundle = ? AND retired_at_ms IS NULL ORDER BY id DESC LIMIT 1"));
  find.Bind(1, fix.rule_id).Bind(2, fix.content_id).Bind(3, fix.platform_json).Bind(4, fix.bundle_json);
  TEMPER_ASSIGN_OR_RETURN(bool found, find.Step());
  if (found) return find.ColumnInt(0);
  TEMPER_ASSIGN_OR_RETURN(
      sqlite::Statement insert,
      db_.Prepare("INSERT INTO fixes(rule_id, content_id, platform, bundle, evidence, source_batch, source_attempt, "
                  "source_target, model_tokens, created_at_ms) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  insert.Bind(1, fix.rule_id).Bind(2, fix.content_id).Bind(3, fix.platform_json).Bind(4, fix.bundle_json);
  insert.Bind(5, fix.evidence).Bind(6, fix.source_batch).Bind(7, fix.source_attempt).Bind(8, fix.source_target);
  insert.Bind(9, fix.model_tokens).Bind(10, EnvNowMs());
  TEMPER_RETURN_IF_ERROR(insert.Run());
  int64_t id = db_.LastInsertRowId();
  TEMPER_RETURN_IF_ERROR(txn.Commit());
  return id;
}

Result<std::vector<FixRecord>> StateStore::LiveFixes(const std::string& rule_id, const std::string& content_id) {
  std::lock_guard lock(mu_);
  TEMPER_ASSIGN_OR_RETURN(sqlite::Statement q,
                          db_.Prepare(fmt::format("SELECT {} FROM fixes WHERE rule_id = ? AND content_id = ? AND "
                                                  "retired_at_ms IS NULL ORDER BY id DESC",
                                                  kFixColumns)));
  q.Bind(1, rule_id).Bind(2, content_id);
  return ReadFixRows(q);
}

Result<FixRecord> StateStore::LoadFixLocked(int64_t id) {
  TEMPER_ASSIGN_OR_RETURN(sqlite::Statement q,
                          db_.Prepare(fmt::format("SELECT {} FROM fixes WHERE id = ?", kFixColumns)));
  q.Bind(1, id);
  TEMPER_ASSIGN_OR_RETURN(bool found, q.Step());
  if (!found) return Status::NotFound(fmt::format("library entry {} does not exist", id));
  return ReadFixRow(q);
}

Result<FixRecord> StateStore::GetFix(int64_t id) {
  std::lock_guard lock(mu_);
  return LoadFixLocked(id);
}

Result<std::vector<FixRecord>> StateStore::ListFixes(const std::string& rule_id, bool include_retired, uint32_t limit,
                                                     std::optional<int64_t> before_id) {
  std::lock_guard lock(mu_);
  std::string where = fmt::format("WHERE id < {}", before_id.value_or(INT64_MAX));
  if (!rule_id.empty()) where += " AND rule_id = ?";
  if (!include_retired) where += " AND retired_at_ms IS NULL";
  TEMPER_ASSIGN_OR_RETURN(
      sqlite::Statement q,
      db_.Prepare(fmt::format("SELECT {} FROM fixes {} ORDER BY id DESC LIMIT ?", kFixColumns, where)));
  int param = 1;
  if (!rule_id.empty()) q.Bind(param++, rule_id);
  q.Bind(param, limit);
  return ReadFixRows(q);
}

Result<FixRecord> StateStore::RetireFix(int64_t id, const std::string& reason) {
  std::lock_guard lock(mu_);
  TEMPER_ASSIGN_OR_RETURN(sqlite::Transaction txn, sqlite::Transaction::Begin(db_));
  TEMPER_ASSIGN_OR_RETURN(FixRecord fix, LoadFixLocked(id));
  if (fix.retired_at) {
    return Status::FailedPrecondition(
        fmt::format("library entry {} was already retired at {:%Y-%m-%d %H:%M:%S} UTC: {}", id,
                    fmt::gmtime(static_cast<std::time_t>(*fix.retired_at / 1000)), fix.retired_reason));
  }
  TimeMs now = EnvNowMs();
  TEMPER_ASSIGN_OR_RETURN(sqlite::Statement u,
                          db_.Prepare("UPDATE fixes SET retired_at_ms = ?, retired_reason = ? WHERE id = ?"));
  u.Bind(1, now).Bind(2, reason).Bind(3, id);
  TEMPER_RETURN_IF_ERROR(u.Run());
  TEMPER_RETURN_IF_ERROR(txn.Commit());
  fix.retired_at = now;
  fix.retired_reason = reason;
  return fix;
}

Status StateStore::NoteFixOutcome(int64_t id, bool kept, const std::string& why) {
  std::lock_guard lock(mu_);
  TEMPER_ASSIGN_OR_RETURN(sqlite::Transaction txn, sqlite::Transaction::Begin(db_));
  TEMPER_ASSIGN_OR_RETURN(
      sqlite::Statement u,
      db_.Prepare(kept ? "UPDATE fixes SET uses = uses + 1, tokens_saved = tokens_saved + model_tokens WHERE id = ?"
                       : "UPDATE fixes SET failures = failures + 1, last_failure = ? WHERE id = ?"));
  if (kept) {
    u.Bind(1, id);
  } else {
    u.Bind(1, why).Bind(2, id);
  }
  TEMPER_RETURN_IF_ERROR(u.Run());
  if (db_.Changes() == 0) return Status::NotFound(fmt::format("library entry {} does not exist", id));
  return txn.Commit();
}

}  // namespace temper
