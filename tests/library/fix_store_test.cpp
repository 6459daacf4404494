// The state store's part of issue 50: each kept attempt's bundle (attempts.fix), the fleet fields of
// a batch (apply_from, fleet, at_once) and FleetBatches, and the library's table of proven fixes:
// stored once, found live newest first, retired, outcomes counted; and every call whole or not at
// all when a write fails under it (platform/fault_env.h), as the store's other calls are.
#include <catch2/catch.hpp>

#include <filesystem>
#include "orchestrator/store/schema.h"
#include "orchestrator/store/state_store.h"

#include "platform/fault_env.h"
#include "scratch_space.h"

namespace temper {
namespace {

// A fresh directory for one case's database, removed after it.
class TempDir {
 public:
  TempDir() : scratch_("library-store") { std::filesystem::create_directories(scratch_.path()); }
  std::string operator/(const std::string& name) const { return scratch_.path() + "/" + name; }

 private:
  testing::ScratchPath scratch_;
};

constexpr const char* kRule = "xccdf_org.ssgproject.content_rule_banner_etc_issue_net";
constexpr const char* kContent = "xccdf_org.ssgproject.content_benchmark_UBUNTU-20-04 0.1.66";

NewBatch Batch(const std::string& target, int64_t apply_from = 0, int64_t fleet = 0, uint32_t at_once = 0) {
  NewBatch b;
  b.name = "fleet";
  b.target = target;
  b.datastream = "/usr/share/xml/scap/ssg/content/ssg-ubuntu2004-ds.xml";
  b.profile = "stig";
  b.rule_ids = {kRule};
  b.apply_from = apply_from;
  b.fleet = fleet;
  b.at_once = at_once;
  return b;
}

FixRecord Fix(const std::string& bundle = R"({"files":[]})", const std::string& platform = R"({"os":"ubuntu"})") {
  FixRecord f;
  f.rule_id = kRule;
  f.content_id = kContent;
  f.platform_json = platform;
  f.bundle_json = bundle;
  f.evidence = "pass";
  f.source_batch = 1;
  f.source_attempt = 7;
  f.source_target = "twin";
  f.model_tokens = 1200;
  return f;
}

TEST_CASE("a kept attempt's bundle is stored and read back with it") {
  TempDir dir;
  auto store = StateStore::Open(dir / "t.db");
  REQUIRE(store.ok());
  auto batch = (*store)->SubmitBatch(Batch("lab"));
  REQUIRE(batch.ok());
  AttemptRecord kept;
  kept.batch_id = batch->batch.id;
  kept.rule_id = kRule;
  kept.number = 1;
  kept.outcome = AttemptOutcome::kKept;
  kept.fix_json = R"({"files":[{"path":"/etc/issue.net"}]})";
  REQUIRE((*store)->RecordAttempt(kept).ok());
  AttemptRecord reverted = kept;
  reverted.number = 2;
  reverted.outcome = AttemptOutcome::kReverted;
  reverted.fix_json.clear();
  LoopStep step;
  step.batch_id = batch->batch.id;
  step.attempt = reverted;
  REQUIRE((*store)->CommitStep(step).ok());

  auto attempts = (*store)->BatchAttempts(batch->batch.id);
  REQUIRE(attempts.ok());
  REQUIRE(attempts->size() == 2);
  CHECK((*attempts)[0].fix_json == kept.fix_json);
  CHECK((*attempts)[1].fix_json.empty());
  auto memory = (*store)->GetRuleMemory(kRule, 10, 10);
  REQUIRE(memory.ok());
  REQUIRE(memory->attempts.size() == 2);
  CHECK(memory->attempts[1].fix_json == kept.fix_json);  // newest first
}

TEST_CASE("a batch's fleet fields are stored, defaulted on older rows, and a fleet is listed in id order") {
  TempDir dir;
  auto store = StateStore::Open(dir / "t.db");
  REQUIRE(store.ok());
  auto twin = (*store)->SubmitBatch(Batch("twin"));
  REQUIRE(twin.ok());
  CHECK(twin->batch.apply_from == 0);
  CHECK(twin->batch.fleet == 0);
  CHECK(twin->batch.at_once == 0);
  const int64_t from = twin->batch.id;
  auto first = (*store)->SubmitBatch(Batch("web1", from, 0, 3));
  REQUIRE(first.ok());
  const int64_t fleet = first->batch.id;
  // The first batch of an apply call names itself as the fleet once its id is known; the others at submit.
  auto second = (*store)->SubmitBatch(Batch("web2", from, fleet, 3));
  REQUIRE(second.ok());
  auto other = (*store)->SubmitBatch(Batch("db1", from, 0, 1));
  REQUIRE(other.ok());
  CHECK(second->batch.apply_from == from);
  CHECK(second->batch.fleet == fleet);
  CHECK(second->batch.at_once == 3);

  auto members = (*store)->FleetBatches(second->batch.fleet);
  REQUIRE(members.ok());
  REQUIRE(members->size() == 1);
  CHECK((*members)[0].id == second->batch.id);
  CHECK((*members)[0].target == "web2");
  CHECK((*members)[0].rules.empty());
  CHECK((*members)[0].TotalRules() == 1);
  auto none = (*store)->FleetBatches(0);
  REQUIRE(none.ok());
  CHECK(none->empty());  // 0 is "no fleet", not a fleet of every ordinary batch

  auto listed = (*store)->ListBatches(std::nullopt, 10, {});
  REQUIRE(listed.ok());
  REQUIRE(listed->batches.size() == 4);
  CHECK(listed->batches[2].apply_from == from);  // newest first: db1, web2, web1, twin
  CHECK(listed->batches[2].at_once == 3);
}

TEST_CASE("a database of schema 7 gains the fleet and library columns with defaults") {
  TempDir dir;
  std::string path = dir / "v7.db";
  {
    auto db = sqlite::Database::Open(path);
    REQUIRE(db.ok());
    REQUIRE(MigrateSchema(*db, 7).ok());
    REQUIRE(db->Exec("INSERT INTO batches(name, target, datastream, profile, whole_profile, max_attempts, "
                     "wall_time_s, max_tokens, state, created_at_ms, updated_at_ms) "
                     "VALUES('old', 'lab', '/ds.xml', 'stig', 0, 3, 600, 5000, 'completed', 1000, 1000);"
                     "INSERT INTO attempts(batch_id, rule_id, number, outcome, started_at_ms, finished_at_ms) "
                     "VALUES(1, 'r', 1, 'kept', 1000, 1001);")
                .ok());
  }
  auto store = StateStore::Open(path);
  REQUIRE(store.ok());
  CHECK((*store)->schema_version() == CurrentSchemaVersion());
  auto batch = (*store)->GetBatch(1);
  REQUIRE(batch.ok());
  CHECK(batch->apply_from == 0);
  CHECK(batch->fleet == 0);
  CHECK(batch->at_once == 0);
  auto attempts = (*store)->BatchAttempts(1);
  REQUIRE(attempts.ok());
  REQUIRE(attempts->size() == 1);
  CHECK(attempts->front().fix_json.empty());
  auto fixes = (*store)->ListFixes("", true, 10);
  REQUIRE(fixes.ok());
  CHECK(fixes->empty());
}

TEST_CASE("the library's table: stored once, live newest first, outcomes counted, retired for good") {
  TempDir dir;
  auto store = StateStore::Open(dir / "t.db");
  REQUIRE(store.ok());
  StateStore& s = **store;
  auto first = s.AddFix(Fix());
  REQUIRE(first.ok());
  auto again = s.AddFix(Fix());
  REQUIRE(again.ok());
  CHECK(*again == *first);  // the same fix proven again is one entry
  auto second = s.AddFix(Fix(R"({"files":[{"path":"/etc/issue"}]})"));
  REQUIRE(second.ok());
  CHECK(*second > *first);

  auto live = s.LiveFixes(kRule, kContent);
  REQUIRE(live.ok());
  REQUIRE(live->size() == 2);
  CHECK((*live)[0].id == *second);
  CHECK((*live)[1].id == *first);
  CHECK((*live)[1].source_attempt == 7);
  CHECK((*live)[1].source_target == "twin");
  CHECK((*live)[1].model_tokens == 1200);
  CHECK((*live)[1].created_at > 0);
  auto other_content = s.LiveFixes(kRule, "xccdf_org.ssgproject.content_benchmark_UBUNTU-20-04 0.1.67");
  REQUIRE(other_content.ok());
  CHECK(other_content->empty());

  REQUIRE(s.NoteFixOutcome(*first, true, "").ok());
  REQUIRE(s.NoteFixOutcome(*first, true, "").ok());
  REQUIRE(s.NoteFixOutcome(*first, false, "batch 4: /etc/issue.net had drifted").ok());
  auto noted = s.GetFix(*first);
  REQUIRE(noted.ok());
  CHECK(noted->uses == 2);
  CHECK(noted->failures == 1);
  CHECK(noted->tokens_saved == 2400);
  CHECK(noted->last_failure == "batch 4: /etc/issue.net had drifted");
  CHECK(s.NoteFixOutcome(999, true, "").code() == StatusCode::kNotFound);
  CHECK(s.GetFix(999).status().code() == StatusCode::kNotFound);

  auto retired = s.RetireFix(*second, "content 0.1.67 rewrote the banner");
  REQUIRE(retired.ok());
  CHECK(retired->retired_at.has_value());
  CHECK(retired->retired_reason == "content 0.1.67 rewrote the banner");
  auto twice = s.RetireFix(*second, "again");
  CHECK(twice.status().code() == StatusCode::kFailedPrecondition);
  CHECK(twice.status().message().find("content 0.1.67 rewrote the banner") != std::string::npos);
  CHECK(s.RetireFix(999, "x").status().code() == StatusCode::kNotFound);

  live = s.LiveFixes(kRule, kContent);
  REQUIRE(live.ok());
  REQUIRE(live->size() == 1);
  CHECK(live->front().id == *first);
  auto all = s.ListFixes("", true, 10);
  REQUIRE(all.ok());
  CHECK(all->size() == 2);
  auto live_only = s.ListFixes("", false, 10);
  REQUIRE(live_only.ok());
  CHECK(live_only->size() == 1);
  auto none = s.ListFixes("xccdf_org.ssgproject.content_rule_other", true, 10);
  REQUIRE(none.ok());
  CHECK(none->empty());
  // A retired fix recorded again is a new live entry: retiring it said "not this one any more",
  // and a later batch that proves it again overrules that.
  auto reproven = s.AddFix(Fix(R"({"files":[{"path":"/etc/issue"}]})"));
  REQUIRE(reproven.ok());
  CHECK(*reproven != *second);
}

// The library's calls under a failed write, for every write they make: each call that returned OK
// is there after a reopen with the real Env, each that failed is there whole or not at all.
TEST_CASE("the library's calls are whole or absent when a write fails under them") {
  for (uint64_t n = 1;; ++n) {
    INFO("failing write #" << n);
    TempDir dir;
    FaultEnv env;
    bool added = false, noted = false, retired = false;
    {
      auto store = StateStore::Open(dir / "t.db", env);
      REQUIRE(store.ok());
      auto seed = (*store)->AddFix(Fix(R"({"files":[]})", R"({"os":"debian"})"));
      REQUIRE(seed.ok());
      env.FailNth(FaultEnv::Op::kWrite, n);
      added = (*store)->AddFix(Fix()).ok();
      noted = (*store)->NoteFixOutcome(*seed, false, "drifted").ok();
      retired = (*store)->RetireFix(*seed, "superseded").ok();
      if (!env.fired()) {
        CHECK((added && noted && retired));
        break;
      }
    }
    auto store = StateStore::Open(dir / "t.db");
    REQUIRE(store.ok());
    auto all = (*store)->ListFixes("", true, 10);
    REQUIRE(all.ok());
    REQUIRE(!all->empty());
    const FixRecord& seed = all->back();
    if (added) CHECK(all->size() == 2);
    if (all->size() == 2) CHECK(all->front().bundle_json == R"({"files":[]})");
    CHECK(all->size() <= 2);
    if (noted) CHECK(seed.failures == 1);
    CHECK((seed.failures == 0 || (seed.failures == 1 && seed.last_failure == "drifted")));
    if (seed.failures == 0) CHECK(seed.last_failure.empty());
    if (retired) CHECK(seed.retired_at.has_value());
    CHECK(seed.retired_at.has_value() == (seed.retired_reason == "superseded"));
    REQUIRE(n < 200);
  }
}

}  // namespace
}  // namespace temper
