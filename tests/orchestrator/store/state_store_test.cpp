#include "orchestrator/store/state_store.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "orchestrator/store/schema.h"
#include "orchestrator/temp_dir.h"

namespace temper {
namespace {

using testing::TempDir;

NewBatch SampleBatch(std::string request_id = "") {
  NewBatch b;
  b.name = "sample";
  b.target = "lab";
  b.datastream = "/usr/share/xml/scap/ssg/content/ssg-ubuntu2004-ds.xml";
  b.profile = "stig";
  b.rule_ids = {"xccdf_org.ssgproject.content_rule_a", "xccdf_org.ssgproject.content_rule_b"};
  b.request_id = std::move(request_id);
  return b;
}

TEST_CASE("a new file is migrated to the current schema") {
  TempDir dir;
  auto store = StateStore::Open(dir / "t.db");
  REQUIRE(store.ok());
  CHECK((*store)->schema_version() == CurrentSchemaVersion());
  CHECK(*(*store)->LastSeq() == 0);
}

TEST_CASE("a database of the previous schema is migrated with its data intact") {
  TempDir dir;
  std::string path = dir / "v1.db";
  {
    auto db = sqlite::Database::Open(path);
    REQUIRE(db.ok());
    REQUIRE(MigrateSchema(*db, 1).ok());
    REQUIRE(
        db->Exec(
              "INSERT INTO batches(name, target, datastream, profile, whole_profile, max_attempts, "
              "wall_time_s, max_tokens, state, created_at_ms, updated_at_ms) "
              "VALUES('old', 'lab', '/ds.xml', 'stig', 0, 3, 600, 5000, 'queued', 1000, 1000);"
              "INSERT INTO batch_rules(batch_id, position, rule_id, state) VALUES(1, 0, 'xccdf_a_rule_r', 'pending');"
              "INSERT INTO journal(time_ms, batch_id, type, data) VALUES(1000, 1, 'batch.submitted', '{}');")
            .ok());
    CHECK(*db->QueryInt("PRAGMA user_version") == 1);
  }
  auto store = StateStore::Open(path);
  REQUIRE(store.ok());
  CHECK((*store)->schema_version() == CurrentSchemaVersion());
  auto batch = (*store)->GetBatch(1);
  REQUIRE(batch.ok());
  CHECK(batch->name == "old");
  CHECK(batch->budgets.max_attempts == 3);
  CHECK(batch->request_id.empty());
  CHECK(batch->options.waivers.empty());
  CHECK_FALSE(batch->options.plan_only);
  CHECK(batch->options.parallel_attempts == 1);  // stored before it was an option: serial
  REQUIRE(batch->rules.size() == 1);
  CHECK(batch->rules[0].rule_id == "xccdf_a_rule_r");
  auto events = (*store)->ReadEvents(0, std::nullopt, 10);
  REQUIRE(events->size() == 1);
  CHECK((*events)[0].usage.cached_prompt_tokens == 0);
  // New seqs continue after the migrated ones.
  auto next = (*store)->AppendEvent(NewEvent{.type = "daemon.started"});
  REQUIRE(next.ok());
  CHECK(next->seq == 2);
}

TEST_CASE("a batch whose stored parallel_attempts is out of range is named as corrupt") {
  TempDir dir;
  std::string path = dir / "t.db";
  REQUIRE((*StateStore::Open(path))->SubmitBatch(SampleBatch()).ok());
  {
    auto db = sqlite::Database::Open(path);
    REQUIRE(db->Exec("UPDATE batches SET options = '{\"parallel_attempts\": 0}'").ok());
  }
  auto b = (*StateStore::Open(path))->GetBatch(1);
  REQUIRE_FALSE(b.ok());
  CHECK(b.status().code() == StatusCode::kDataLoss);
  CHECK(b.status().message() == "batch 1: stored options: parallel_attempts 0 is not 1 to 16");
}

TEST_CASE("a database from a newer temper is refused, not touched") {
  TempDir dir;
  std::string path = dir / "new.db";
  {
    auto db = sqlite::Database::Open(path);
    REQUIRE(db->Exec("PRAGMA user_version = 99").ok());
  }
  auto store = StateStore::Open(path);
  REQUIRE_FALSE(store.ok());
  CHECK(store.status().code() == StatusCode::kFailedPrecondition);
  CHECK(store.status().message().find("schema version 99") != std::string::npos);
  auto db = sqlite::Database::Open(path);
  CHECK(*db->QueryInt("PRAGMA user_version") == 99);
}

TEST_CASE("a file that is not a database is named as such") {
  TempDir dir;
  std::string path = dir.Write("junk.db", std::string(4096, 'x'));
  auto store = StateStore::Open(path);
  REQUIRE_FALSE(store.ok());
  CHECK(store.status().code() == StatusCode::kDataLoss);
  CHECK(store.status().message().find(path + " is not a temper state database") == 0);
}

TEST_CASE("submit stores the batch, its rules and one event atomically") {
  TempDir dir;
  auto store = *StateStore::Open(dir / "t.db");
  auto submitted = store->SubmitBatch(SampleBatch());
  REQUIRE(submitted.ok());
  const BatchRecord& b = submitted->batch;
  CHECK(b.id == 1);
  CHECK(b.state == BatchState::kQueued);
  CHECK(b.TotalRules() == 2);
  CHECK(b.Count(RuleState::kPending) == 2);
  REQUIRE(b.rules.size() == 2);
  CHECK(b.rules[1].rule_id == "xccdf_org.ssgproject.content_rule_b");
  REQUIRE(submitted->event.has_value());
  CHECK(submitted->event->type == "batch.submitted");
  CHECK(submitted->event->batch_id == 1);
  CHECK(*store->LastSeq() == submitted->event->seq);
}

TEST_CASE("a batch's waivers and opt-ins, and an attempt's changes, are stored and read back") {
  TempDir dir;
  auto opened = StateStore::Open(dir / "t.db");
  REQUIRE(opened.ok());
  StateStore* store = opened->get();
  NewBatch nb = SampleBatch();
  nb.options.waivers = {Waiver{"xccdf_org.ssgproject.content_rule_a", "kiosk", "secops", int64_t{1900000000000}},
                        Waiver{"xccdf_org.ssgproject.content_rule_b", "legacy app", "app team", std::nullopt}};
  nb.options.allow_disruptive = true;
  nb.options.plan_only = true;
  nb.options.parallel_attempts = 6;
  REQUIRE(store->SubmitBatch(nb).ok());
  auto b = store->GetBatch(1);
  REQUIRE(b.ok());
  REQUIRE(b->options.waivers.size() == 2);
  CHECK(b->options.waivers[0].owner == "secops");
  CHECK(b->options.waivers[0].expires_at == int64_t{1900000000000});
  CHECK_FALSE(b->options.waivers[1].expires_at.has_value());
  CHECK(b->options.waivers[1].ExpiredAt(NowMs()) == false);
  CHECK(b->options.waivers[0].ExpiredAt(int64_t{1900000000000}));
  CHECK(b->options.allow_disruptive);
  CHECK(b->options.plan_only);
  CHECK(b->options.parallel_attempts == 6);

  AttemptRecord a{.batch_id = 1, .rule_id = "xccdf_org.ssgproject.content_rule_a", .number = 1};
  a.changes_json = R"({"files":[{"path":"/etc/issue","change":"modified"}]})";
  REQUIRE(store->RecordAttempt(a).ok());
  auto attempts = store->BatchAttempts(1);
  REQUIRE(attempts.ok());
  REQUIRE(attempts->size() == 1);
  CHECK((*attempts)[0].changes_json == a.changes_json);
}

TEST_CASE("a repeated request_id returns the first batch and stores nothing new") {
  TempDir dir;
  auto store = *StateStore::Open(dir / "t.db");
  auto first = store->SubmitBatch(SampleBatch("key-1"));
  auto again = store->SubmitBatch(SampleBatch("key-1"));
  REQUIRE(again.ok());
  CHECK(again->batch.id == first->batch.id);
  CHECK_FALSE(again->event.has_value());
  CHECK(store->ReadEvents(0, std::nullopt, 100)->size() == 1);
  auto other = store->SubmitBatch(SampleBatch("key-2"));
  CHECK(other->batch.id == first->batch.id + 1);
}

TEST_CASE("listing pages newest first and filters by state") {
  TempDir dir;
  auto store = *StateStore::Open(dir / "t.db");
  for (int i = 0; i < 5; ++i) REQUIRE(store->SubmitBatch(SampleBatch()).ok());
  REQUIRE(store->CancelBatch(2, "test").ok());
  auto page1 = store->ListBatches(std::nullopt, 2, {});
  REQUIRE(page1->batches.size() == 2);
  CHECK(page1->batches[0].id == 5);
  CHECK(page1->batches[1].id == 4);
  CHECK(page1->batches[0].rules.empty());
  CHECK(page1->batches[0].TotalRules() == 2);
  REQUIRE(page1->next_before_id == 4);
  auto page2 = store->ListBatches(4, 2, {});
  CHECK(page2->batches[0].id == 3);
  auto last = store->ListBatches(2, 2, {});
  CHECK(last->batches.size() == 1);
  CHECK_FALSE(last->next_before_id.has_value());
  auto cancelled = store->ListBatches(std::nullopt, 10, {BatchState::kCancelled});
  REQUIRE(cancelled->batches.size() == 1);
  CHECK(cancelled->batches[0].id == 2);
  CHECK(cancelled->batches[0].Count(RuleState::kCancelled) == 2);
}

TEST_CASE("cancel ends a queued batch once, and unknown batches are NotFound") {
  TempDir dir;
  auto store = *StateStore::Open(dir / "t.db");
  REQUIRE(store->SubmitBatch(SampleBatch()).ok());
  auto cancelled = store->CancelBatch(1, "operator asked");
  REQUIRE(cancelled.ok());
  CHECK(cancelled->batch.state == BatchState::kCancelled);
  CHECK(cancelled->batch.error == "operator asked");
  CHECK(cancelled->event.type == "batch.cancelled");
  auto twice = store->CancelBatch(1, "again");
  CHECK(twice.status().code() == StatusCode::kFailedPrecondition);
  CHECK(twice.status().message() == "batch 1 already ended (cancelled); nothing to cancel");
  CHECK(store->CancelBatch(42, "x").status().message() == "batch 42 does not exist");
  CHECK(store->GetBatch(42).status().code() == StatusCode::kNotFound);
}

TEST_CASE("a batch's model calls are summed per role from its journal") {
  TempDir dir;
  auto store = *StateStore::Open(dir / "t.db");
  REQUIRE(store->SubmitBatch(SampleBatch()).ok());
  REQUIRE(store->SubmitBatch(SampleBatch()).ok());
  auto call = [&](int64_t batch, const char* role, TokenUsage usage) {
    REQUIRE(store->AppendEvent(NewEvent{.batch_id = batch, .rule_id = "r", .role = role, .type = "x", .usage = usage})
                .ok());
  };
  call(1, "worker", {100, 10, 40});
  call(1, "worker", {200, 20, 150});
  call(1, "architect", {50, 5, 0});
  call(2, "worker", {7, 7, 7});  // another batch
  call(1, "worker", {0, 0, 0});  // an event without a model call
  call(1, "", {9, 9, 0});        // no role
  REQUIRE(store->AppendEvent(NewEvent{.batch_id = 1, .type = "rule.fixed"}).ok());
  auto usage = store->BatchRoleUsage(1);
  REQUIRE(usage.ok());
  REQUIRE(usage->size() == 2);
  CHECK((*usage)[0].role == "architect");
  CHECK((*usage)[0].calls == 1);
  CHECK((*usage)[1].role == "worker");
  CHECK((*usage)[1].calls == 2);
  CHECK((*usage)[1].usage.prompt_tokens == 300);
  CHECK((*usage)[1].usage.completion_tokens == 30);
  CHECK((*usage)[1].usage.cached_prompt_tokens == 190);
  CHECK(store->BatchRoleUsage(3)->empty());
}

TEST_CASE("journal seqs increase, filter by batch, and survive reopening") {
  TempDir dir;
  std::string path = dir / "t.db";
  {
    auto store = *StateStore::Open(path);
    REQUIRE(store->SubmitBatch(SampleBatch()).ok());
    REQUIRE(store->SubmitBatch(SampleBatch()).ok());
    REQUIRE(store
                ->AppendEvent(NewEvent{.batch_id = 1,
                                       .rule_id = "r",
                                       .role = "worker",
                                       .type = "tool.call",
                                       .data_json = R"({"command":"ls"})",
                                       .usage = {10, 5, 2}})
                .ok());
    REQUIRE(store->AppendEvent(NewEvent{.type = "daemon.note"}).ok());
  }
  auto store = *StateStore::Open(path);
  auto all = *store->ReadEvents(0, std::nullopt, 100);
  REQUIRE(all.size() == 4);
  for (size_t i = 0; i < all.size(); ++i) CHECK(all[i].seq == i + 1);
  CHECK(all[2].usage.prompt_tokens == 10);
  CHECK(all[2].usage.cached_prompt_tokens == 2);
  CHECK_FALSE(all[3].batch_id.has_value());
  auto batch1 = *store->ReadEvents(0, 1, 100);
  REQUIRE(batch1.size() == 2);
  CHECK(batch1[1].data_json == R"({"command":"ls"})");
  CHECK(store->ReadEvents(3, std::nullopt, 100)->size() == 1);
  CHECK(store->ReadEvents(0, std::nullopt, 2)->size() == 2);
}

TEST_CASE("an event whose data is not a JSON object is refused") {
  TempDir dir;
  auto store = *StateStore::Open(dir / "t.db");
  auto r = store->AppendEvent(NewEvent{.type = "x", .data_json = "[1,2]"});
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  CHECK(r.status().message() == "journal event 'x': data is not a JSON object");
  CHECK(*store->LastSeq() == 0);
}

TEST_CASE("rule memory returns lessons and attempts newest first, with utility updates") {
  TempDir dir;
  auto store = *StateStore::Open(dir / "t.db");
  REQUIRE(store->SubmitBatch(SampleBatch()).ok());
  const std::string rule = "xccdf_org.ssgproject.content_rule_a";
  AttemptRecord a{.batch_id = 1,
                  .rule_id = rule,
                  .number = 1,
                  .approach = "edit sshd_config",
                  .commands = {"sed -i s/x/y/ /etc/ssh/sshd_config", "sshd -t"},
                  .verdict = "fail",
                  .outcome = AttemptOutcome::kReverted,
                  .evidence = "PermitRootLogin yes",
                  .reflection = "use a drop-in",
                  .usage = {100, 20, 0},
                  .started_at = 1,
                  .finished_at = 2};
  REQUIRE(store->RecordAttempt(a).ok());
  a.number = 2;
  a.verdict = "pass";
  a.outcome = AttemptOutcome::kKept;
  REQUIRE(store->RecordAttempt(a).ok());
  auto dup = store->RecordAttempt(a);
  CHECK(dup.status().code() == StatusCode::kAlreadyExists);
  auto lesson1 = store->AddLesson(LessonRecord{.rule_id = rule, .batch_id = 1, .text = "first"});
  auto lesson2 = store->AddLesson(LessonRecord{.rule_id = rule, .text = "second"});
  REQUIRE(store->AdjustLessonUtility(*lesson1, 0.4).ok());
  REQUIRE(store->AdjustLessonUtility(*lesson2, -0.3).ok());  // utility stays within [0, 1]
  CHECK(store->AdjustLessonUtility(999, 1.0).code() == StatusCode::kNotFound);
  REQUIRE(store->AddLesson(LessonRecord{.rule_id = "other", .text = "unrelated"}).ok());

  auto memory = store->GetRuleMemory(rule, 10, 1);
  REQUIRE(memory.ok());
  REQUIRE(memory->lessons.size() == 2);
  CHECK(memory->lessons[0].id == *lesson2);
  CHECK(memory->lessons[0].utility == Approx(0.0));
  CHECK(memory->lessons[1].utility == Approx(0.4));
  CHECK(memory->lessons[1].batch_id == 1);
  REQUIRE(memory->attempts.size() == 1);
  CHECK(memory->attempts[0].number == 2);
  CHECK(memory->attempts[0].commands.size() == 2);
  CHECK(memory->attempts[0].commands[1] == "sshd -t");
  CHECK(memory->attempts[0].usage.prompt_tokens == 100);
}

TEST_CASE("a loop step commits rule, batch, attempt, lesson and events together") {
  TempDir dir;
  auto store = *StateStore::Open(dir / "t.db");
  NewBatch nb = SampleBatch();
  nb.whole_profile = true;
  nb.rule_ids.clear();
  int64_t id = store->SubmitBatch(nb)->batch.id;

  auto next = store->NextBatchForTarget("lab");
  REQUIRE(next.ok());
  REQUIRE(next->has_value());
  CHECK((*next)->id == id);
  CHECK(store->NextBatchForTarget("elsewhere")->has_value() == false);

  LoopStep start;
  start.batch_id = id;
  start.batch_state = BatchState::kRunning;
  start.add_rules = {"xccdf_org.ssgproject.content_rule_a", "xccdf_org.ssgproject.content_rule_b"};
  start.good_snapshot = 3;
  start.results_dir = "/var/lib/temper/results/batch-1";
  start.events.push_back({id, "lab", "", "daemon", "batch.started", "{}", {}});
  auto started = store->CommitStep(start);
  REQUIRE(started.ok());
  CHECK(started->events.size() == 1);
  CHECK_FALSE(started->batch_ended);

  LoopStep step;
  step.batch_id = id;
  step.rules.push_back({"xccdf_org.ssgproject.content_rule_a", RuleState::kFixed, std::string("fixed on attempt 1"),
                        std::string("fail"), std::string("pass"), 1, 1234});
  AttemptRecord attempt;
  attempt.batch_id = id;
  attempt.rule_id = "xccdf_org.ssgproject.content_rule_a";
  attempt.number = 1;
  attempt.commands = {"sysctl -w a=1"};
  attempt.verdict = "pass";
  attempt.outcome = AttemptOutcome::kKept;
  step.attempt = attempt;
  LessonRecord lesson;
  lesson.rule_id = attempt.rule_id;
  lesson.group_id = "xccdf_org.ssgproject.content_group_g";
  lesson.batch_id = id;
  lesson.text = "use /etc/sysctl.d";
  lesson.utility = 0.5;
  lesson.target_class = "rootfs";
  lesson.target = "lab";
  lesson.learnt_by = "reflector (endpoint local)";
  step.lesson = lesson;
  step.events.push_back({id, "lab", attempt.rule_id, "evaluator", "attempt.kept", "{}", {}});
  step.events.push_back({id, "lab", attempt.rule_id, "daemon", "rule.fixed", "{}", {}});
  auto committed = store->CommitStep(step);
  REQUIRE(committed.ok());
  REQUIRE(committed->lesson_id.has_value());
  CHECK(committed->events.size() == 2);
  CHECK(committed->events[1].seq == committed->events[0].seq + 1);

  BatchRecord b = *store->GetBatch(id);
  CHECK(b.state == BatchState::kRunning);
  CHECK(b.good_snapshot == 3u);
  CHECK(b.results_dir == "/var/lib/temper/results/batch-1");
  REQUIRE(b.rules.size() == 2);
  CHECK(b.rules[0].state == RuleState::kFixed);
  CHECK(b.rules[0].attempts == 1);
  CHECK(b.rules[0].tokens_used == 1234);
  CHECK(b.rules[0].before_verdict == "fail");
  CHECK(b.rules[0].after_verdict == "pass");
  CHECK(b.rules[1].state == RuleState::kPending);
  CHECK(store->BatchAttempts(id)->size() == 1);
  CHECK(store->BatchLessons(id)->size() == 1);

  // Neighbouring rules find the lesson through its group; the rule itself through its id.
  const LessonScope rootfs{{"rootfs"}, std::nullopt};
  auto group =
      store->GroupLessons("xccdf_org.ssgproject.content_group_g", "xccdf_org.ssgproject.content_rule_b", rootfs, 5);
  REQUIRE(group->size() == 1);
  CHECK((*group)[0].text == "use /etc/sysctl.d");
  CHECK((*group)[0].target_class == "rootfs");
  CHECK((*group)[0].target == "lab");
  CHECK((*group)[0].learnt_by == "reflector (endpoint local)");
  CHECK(store->GroupLessons("xccdf_org.ssgproject.content_group_g", attempt.rule_id, rootfs, 5)->empty());
  // Out of scope: another class, or another target of the class.
  CHECK(store
            ->GroupLessons("xccdf_org.ssgproject.content_group_g", "xccdf_org.ssgproject.content_rule_b",
                           {{"ssh"}, std::nullopt}, 5)
            ->empty());
  CHECK(store
            ->GroupLessons("xccdf_org.ssgproject.content_group_g", "xccdf_org.ssgproject.content_rule_b",
                           {{"rootfs"}, "lab2"}, 5)
            ->empty());

  // A step that fails part-way stores nothing: the duplicate attempt aborts the whole transaction.
  LoopStep dup = step;
  dup.lesson.reset();
  dup.rules[0].add_attempts = 5;
  auto failed = store->CommitStep(dup);
  CHECK(failed.status().code() == StatusCode::kAlreadyExists);
  CHECK(store->GetBatch(id)->rules[0].attempts == 1);
  CHECK(*store->LastSeq() == committed->events[1].seq);

  // After a cancel, states stay cancelled, but the attempt that finished is still recorded.
  REQUIRE(store->CancelBatch(id, "operator").ok());
  LoopStep late;
  late.batch_id = id;
  late.rules.push_back({"xccdf_org.ssgproject.content_rule_b", RuleState::kFixed, {}, {}, {}, 1, 0});
  late.attempt = attempt;
  late.attempt->rule_id = "xccdf_org.ssgproject.content_rule_b";
  auto after_cancel = store->CommitStep(late);
  REQUIRE(after_cancel.ok());
  CHECK(after_cancel->batch_ended);
  CHECK(store->GetBatch(id)->rules[1].state == RuleState::kCancelled);
  CHECK(store->BatchAttempts(id)->size() == 2);

  LoopStep unknown;
  unknown.batch_id = id + 100;
  CHECK(store->CommitStep(unknown).status().code() == StatusCode::kNotFound);
}

TEST_CASE("an interrupted batch is resumed before queued ones") {
  TempDir dir;
  auto store = *StateStore::Open(dir / "t.db");
  int64_t first = store->SubmitBatch(SampleBatch())->batch.id;
  int64_t second = store->SubmitBatch(SampleBatch())->batch.id;
  LoopStep run;
  run.batch_id = second;
  run.batch_state = BatchState::kRunning;
  REQUIRE(store->CommitStep(run).ok());
  CHECK((*store->NextBatchForTarget("lab"))->id == second);
  run.batch_state = BatchState::kCompleted;
  REQUIRE(store->CommitStep(run).ok());
  CHECK((*store->NextBatchForTarget("lab"))->id == first);
}

TEST_CASE("start snapshots, the snapshots of kept fixes, fixpoint passes and reverts are stored per target") {
  TempDir dir;
  auto store = *StateStore::Open(dir / "t.db");
  const std::string a = "xccdf_org.ssgproject.content_rule_a", b = "xccdf_org.ssgproject.content_rule_b";
  int64_t first = store->SubmitBatch(SampleBatch())->batch.id;
  NewBatch plan = SampleBatch();
  plan.options.plan_only = true;
  int64_t second = store->SubmitBatch(plan)->batch.id;
  NewBatch elsewhere = SampleBatch();
  elsewhere.target = "other";
  int64_t third = store->SubmitBatch(elsewhere)->batch.id;
  CHECK_FALSE(store->GetBatch(first)->start_snapshot.has_value());
  CHECK_FALSE(store->LastStartedBatch("lab")->has_value());

  LoopStep start;
  start.batch_id = first;
  start.batch_state = BatchState::kRunning;
  start.good_snapshot = 0;
  start.start_snapshot = 0;
  REQUIRE(store->CommitStep(start).ok());
  CHECK(*store->RunningBatch("lab") == first);
  CHECK_FALSE(store->RunningBatch("other")->has_value());

  AttemptRecord kept;
  kept.batch_id = first;
  kept.rule_id = a;
  kept.number = 1;
  kept.outcome = AttemptOutcome::kKept;
  kept.snapshot = 1;
  LoopStep fix;
  fix.batch_id = first;
  fix.attempt = kept;
  fix.rules.push_back({.rule_id = a, .state = RuleState::kFixed});
  REQUIRE(store->CommitStep(fix).ok());
  AttemptRecord reverted = kept;
  reverted.rule_id = b;
  reverted.outcome = AttemptOutcome::kReverted;
  reverted.snapshot.reset();
  LoopStep pass1;
  pass1.batch_id = first;
  pass1.attempt = reverted;
  pass1.fixpoint_pass = FixpointPass{.pass = 1,
                                     .verdicts = {{"pass", 1}, {"fail", 1}},
                                     .attempts = 2,
                                     .fixed = 1,
                                     .flipped = {b},
                                     .requeued = {b}};
  REQUIRE(store->CommitStep(pass1).ok());
  LoopStep pass2;
  pass2.batch_id = first;
  pass2.batch_state = BatchState::kCompleted;
  pass2.fixpoint_pass = FixpointPass{.pass = 2, .final = true, .verdicts = {{"pass", 2}}};
  REQUIRE(store->CommitStep(pass2).ok());

  BatchRecord batch = *store->GetBatch(first);
  CHECK(batch.start_snapshot == 0u);
  REQUIRE(batch.fixpoint.size() == 2);
  CHECK(batch.fixpoint[0].pass == 1);
  CHECK_FALSE(batch.fixpoint[0].final);
  CHECK(batch.fixpoint[0].verdicts == std::map<std::string, uint32_t>{{"fail", 1}, {"pass", 1}});
  CHECK(batch.fixpoint[0].attempts == 2);
  CHECK(batch.fixpoint[0].fixed == 1);
  CHECK(batch.fixpoint[0].requeued == std::vector<std::string>{b});
  CHECK(batch.fixpoint[1].final);
  auto attempts = *store->BatchAttempts(first);
  REQUIRE(attempts.size() == 2);
  CHECK(attempts[0].snapshot == 1u);
  CHECK_FALSE(attempts[1].snapshot.has_value());

  LoopStep plan_start;
  plan_start.batch_id = second;
  plan_start.batch_state = BatchState::kRunning;
  plan_start.start_snapshot = 1;
  plan_start.attempt = kept;
  plan_start.attempt->batch_id = second;
  plan_start.attempt->snapshot = 2;
  REQUIRE(store->CommitStep(plan_start).ok());
  CHECK((*store->LastStartedBatch("lab"))->id == second);
  CHECK_FALSE(store->LastStartedBatch("other")->has_value());
  (void)third;

  auto owners = store->TargetSnapshotOwners("lab");
  REQUIRE(owners.ok());
  REQUIRE(owners->batches.size() == 2);
  CHECK(owners->batches[0].id == first);
  CHECK(owners->batches[0].start_snapshot == 0);
  CHECK_FALSE(owners->batches[0].plan_only);
  CHECK(owners->batches[1].plan_only);
  CHECK(owners->batches[1].state == BatchState::kRunning);
  REQUIRE(owners->fixes.size() == 2);  // the reverted attempt made no snapshot
  CHECK(owners->fixes[0].batch_id == first);
  CHECK(owners->fixes[0].rule_id == a);
  CHECK(owners->fixes[0].snapshot == 1);
  CHECK(owners->fixes[1].snapshot == 2);
  CHECK(store->TargetSnapshotOwners("other")->fixes.empty());

  // A revert of the ended batch: its rule and attempt are marked, its verdicts refreshed.
  RevertStep revert;
  revert.batch_id = first;
  revert.rules.push_back({.rule_id = a,
                          .state = RuleState::kReverted,
                          .detail = std::string("reverted"),
                          .after_verdict = std::string("fail")});
  revert.rules.push_back({.rule_id = b, .after_verdict = std::string("fail")});
  revert.reverted_attempts = {attempts[0].id};
  revert.batch_reverted = true;
  revert.results_dir = "/results/revert";
  revert.events.push_back({first, "lab", "", "daemon", "batch.reverted", "{}", {}});
  auto committed = store->CommitRevert(revert);
  REQUIRE(committed.ok());
  CHECK(committed->events.size() == 1);
  batch = *store->GetBatch(first);
  CHECK(batch.reverted_at.has_value());
  CHECK(batch.results_dir == "/results/revert");
  CHECK(batch.rules[0].state == RuleState::kReverted);
  CHECK(batch.rules[0].detail == "reverted");
  CHECK(batch.rules[0].after_verdict == "fail");
  CHECK(batch.Count(RuleState::kReverted) == 1);
  CHECK(store->BatchAttempts(first)->at(0).reverted_at.has_value());
  CHECK(store->TargetSnapshotOwners("lab")->fixes[0].reverted_at.has_value());

  // A revert naming a rule the batch lacks changes nothing.
  RevertStep wrong;
  wrong.batch_id = second;
  wrong.batch_reverted = true;
  wrong.rules.push_back({.rule_id = "xccdf_org.ssgproject.content_rule_zzz", .state = RuleState::kReverted});
  CHECK(store->CommitRevert(wrong).status().code() == StatusCode::kNotFound);
  CHECK_FALSE(store->GetBatch(second)->reverted_at.has_value());
}

TEST_CASE("a confirmed reboot queues one verification of the completed batch's reboot_pending rules") {
  TempDir dir;
  auto store = *StateStore::Open(dir / "t.db");
  int64_t id = store->SubmitBatch(SampleBatch())->batch.id;
  const std::string a = "xccdf_org.ssgproject.content_rule_a", b = "xccdf_org.ssgproject.content_rule_b";
  CHECK(store->ConfirmReboot(id, "").status().message() ==
        "batch 1 is queued: only a completed batch has fixes staged for a reboot");
  LoopStep done;
  done.batch_id = id;
  done.batch_state = BatchState::kCompleted;
  done.rules.push_back({a, RuleState::kFixed, {}, {}, {}, 1, 0});
  done.rules.push_back({b, RuleState::kFixed, {}, {}, {}, 1, 0});
  REQUIRE(store->CommitStep(done).ok());
  Result<StateStore::RebootConfirmed> none = store->ConfirmReboot(id, "");
  CHECK(none.status().code() == StatusCode::kFailedPrecondition);
  CHECK(none.status().message() == "batch 1 has no rule waiting for a reboot (reboot_pending)");
  CHECK(store->ConfirmReboot(id + 7, "").status().code() == StatusCode::kNotFound);

  // A completed batch with one rule staged for a reboot (set directly: the loop's own steps cannot
  // change a completed batch).
  LoopStep staged;
  staged.batch_id = id;
  staged.reboot_verified = true;
  staged.rules.push_back({b, RuleState::kRebootPending, std::string("staged"), {}, {}, 0, 0});
  REQUIRE(store->CommitStep(staged).ok());
  CHECK_FALSE(store->NextRebootCheckForTarget("lab")->has_value());

  auto confirmed = store->ConfirmReboot(id, "rebooted by alice, CHG-7");
  REQUIRE(confirmed.ok());
  REQUIRE(confirmed->event.has_value());
  CHECK(confirmed->event->type == "reboot.confirmed");
  CHECK(nlohmann::json::parse(confirmed->event->data_json) ==
        nlohmann::json{{"rules", {b}}, {"note", "rebooted by alice, CHG-7"}});
  CHECK(confirmed->seq == confirmed->event->seq);
  CHECK(confirmed->batch.reboot_confirmed_seq == confirmed->seq);
  // Again before the verification ran: the same confirmation, no second event.
  auto again = store->ConfirmReboot(id, "twice");
  REQUIRE(again.ok());
  CHECK_FALSE(again->event.has_value());
  CHECK(again->seq == confirmed->seq);
  CHECK(*store->LastSeq() == confirmed->seq);

  auto next = store->NextRebootCheckForTarget("lab");
  REQUIRE(next.ok());
  REQUIRE(next->has_value());
  CHECK((*next)->id == id);
  CHECK_FALSE(store->NextRebootCheckForTarget("elsewhere")->has_value());

  // The verification's step changes the completed batch's rule and clears the confirmation.
  LoopStep verified;
  verified.batch_id = id;
  verified.reboot_verified = true;
  verified.rules.push_back(
      {b, RuleState::kFixed, std::string("verified after the reboot"), {}, std::string("pass"), 0, 0});
  verified.events.push_back({id, "lab", "", "evaluator", "reboot.verified", "{}", {}});
  auto committed = store->CommitStep(verified);
  REQUIRE(committed.ok());
  BatchRecord after = *store->GetBatch(id);
  CHECK(after.state == BatchState::kCompleted);
  CHECK(after.rules[1].state == RuleState::kFixed);
  CHECK(after.rules[1].after_verdict == "pass");
  CHECK_FALSE(after.reboot_confirmed_seq.has_value());
  CHECK_FALSE(store->NextRebootCheckForTarget("lab")->has_value());
  // A plain step still cannot change the completed batch.
  LoopStep late;
  late.batch_id = id;
  late.rules.push_back({b, RuleState::kEscalated, {}, {}, {}, 0, 0});
  REQUIRE(store->CommitStep(late).ok());
  CHECK(store->GetBatch(id)->rules[1].state == RuleState::kFixed);
}

}  // namespace
}  // namespace temper
