#include "orchestrator/store/sqlite_env_vfs.h"

#include <catch2/catch.hpp>

#include "orchestrator/store/state_store.h"
#include "orchestrator/temp_dir.h"
#include "platform/fault_env.h"

namespace temper {
namespace {

using temper::FaultEnv;
using testing::TempDir;

NewBatch Batch(const std::string& name) {
  NewBatch b;
  b.name = name;
  b.target = "lab";
  b.datastream = "ssg-ubuntu2004-ds.xml";
  b.profile = "stig";
  b.rule_ids = {"xccdf_org.ssgproject.content_rule_a"};
  return b;
}

TEST_CASE("the state store's SQLite writes and fsyncs go through its Env") {
  TempDir dir;
  FaultEnv env;
  {
    std::unique_ptr<StateStore> store = *StateStore::Open(dir / "t.db", env);
    uint64_t writes = env.count(FaultEnv::Op::kWrite), syncs = env.count(FaultEnv::Op::kSync);
    CHECK(writes > 0);  // the schema
    REQUIRE(store->SubmitBatch(Batch("a")).ok());
    // synchronous=FULL: the commit wrote WAL frames and synced the WAL.
    CHECK(env.count(FaultEnv::Op::kWrite) > writes);
    CHECK(env.count(FaultEnv::Op::kSync) > syncs);
  }
  // Opened again with the real Env, the data is SQLite's as ever.
  std::unique_ptr<StateStore> store = *StateStore::Open(dir / "t.db");
  CHECK(store->GetBatch(1)->name == "a");
}

TEST_CASE("a write or fsync the Env fails is an IOError for its call alone, and the store takes the next one") {
  TempDir dir;
  FaultEnv env;
  std::unique_ptr<StateStore> store = *StateStore::Open(dir / "t.db", env);
  FaultEnv::Op op = GENERATE(FaultEnv::Op::kWrite, FaultEnv::Op::kSync);
  env.FailNth(op, 1);
  Result<StateStore::Submitted> failed = store->SubmitBatch(Batch("lost"));
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.status().code() == StatusCode::kIOError);
  CHECK(env.fired());
  CHECK_THAT(env.fired_at(), Catch::Contains("t.db-wal"));  // SQLite's WAL, through the shim
  Result<StateStore::Submitted> next = store->SubmitBatch(Batch("kept"));
  INFO(next.status().ToString());
  REQUIRE(next.ok());
  CHECK(store->GetBatch(next->batch.id)->name == "kept");
  store.reset();
  store = *StateStore::Open(dir / "t.db");
  StateStore::BatchPage page = *store->ListBatches(std::nullopt, 10, {});
  REQUIRE(page.batches.size() == 1);
  CHECK(page.batches[0].name == "kept");
  CHECK(store->ReadEvents(0, std::nullopt, 10)->size() == 1);
}

TEST_CASE("the state store's timestamps come from its Env's clock") {
  TempDir dir;
  FaultEnv env;
  const auto when = std::chrono::sys_days(std::chrono::year{2031} / 3 / 14) + std::chrono::hours(15);
  const TimeMs when_ms = std::chrono::duration_cast<std::chrono::milliseconds>(when.time_since_epoch()).count();
  env.SetClock(when);
  std::unique_ptr<StateStore> store = *StateStore::Open(dir / "t.db", env);
  StateStore::Submitted submitted = *store->SubmitBatch(Batch("a"));
  CHECK(submitted.batch.created_at == when_ms);
  CHECK(submitted.event->time == when_ms);
  env.AdvanceClock(std::chrono::milliseconds(1500));
  StateStore::Cancelled cancelled = *store->CancelBatch(submitted.batch.id, "operator");
  CHECK(cancelled.batch.updated_at == when_ms + 1500);
  CHECK(cancelled.event.time == when_ms + 1500);
}

TEST_CASE("each store registers its own VFS for as long as it lives") {
  TempDir dir;
  FaultEnv first_env, second_env;
  std::unique_ptr<sqlite::EnvVfs> first = *sqlite::EnvVfs::Register(first_env);
  std::unique_ptr<sqlite::EnvVfs> second = *sqlite::EnvVfs::Register(second_env);
  CHECK(first->name() != second->name());
  CHECK(sqlite3_vfs_find(first->name().c_str()) != nullptr);
  std::string name = first->name();
  {
    sqlite::Database db = *sqlite::Database::Open(dir / "x.db", second->name());
    REQUIRE(db.Exec("CREATE TABLE t(x); INSERT INTO t VALUES(1)").ok());
  }
  CHECK(first_env.count(FaultEnv::Op::kWrite) == 0);
  CHECK(second_env.count(FaultEnv::Op::kWrite) > 0);
  first.reset();
  CHECK(sqlite3_vfs_find(name.c_str()) == nullptr);
}

}  // namespace
}  // namespace temper
