// RevertEndedPlan on a real rootfs target over a small hand-made base: what a plan-only batch left
// behind (a crash between its end and its revert) is reverted once, with a journal event; other
// batches' states are never touched.
#include "orchestrator/loop/plan_only.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "orchestrator/temp_dir.h"
#include "stig/rootfs/rootfs_target.h"

namespace temper {
namespace {

using testing::TempDir;

struct Fixture {
  Fixture() {
    std::filesystem::create_directories(dir / "base/etc");
    dir.Write("base/etc/issue", "Debian\n");
    store = *StateStore::Open(dir / "t.db");
    files = *JournalFiles::Open(dir / "journal");
    journal = *Journal::Open(*store, *files, log);
    auto opened = stig::RootfsTarget::Open("lab", dir / "state", dir / "base");
    REQUIRE(opened.ok());
    target = std::move(*opened);
  }

  // A batch on "lab" that started at the current snapshot, wrote /etc/plan and ended as `state`.
  int64_t RunBatch(bool plan_only, BatchState state) {
    NewBatch nb;
    nb.target = "lab";
    nb.datastream = "/ds.xml";
    nb.profile = "stig";
    nb.rule_ids = {"xccdf_org.ssgproject.content_rule_a"};
    nb.options.plan_only = plan_only;
    int64_t id = store->SubmitBatch(nb)->batch.id;
    LoopStep start;
    start.batch_id = id;
    start.batch_state = BatchState::kRunning;
    start.start_snapshot = target->Snapshots()->empty() ? 0 : target->Snapshots()->back();
    REQUIRE(store->CommitStep(start).ok());
    REQUIRE(target->WriteFile("/etc/plan", "changed\n", 0644).ok());
    REQUIRE(target->Snapshot().ok());
    if (state != BatchState::kRunning) {
      LoopStep end;
      end.batch_id = id;
      end.batch_state = state;
      REQUIRE(store->CommitStep(end).ok());
    }
    return id;
  }

  size_t PlanRevertedEvents(int64_t batch) {
    size_t n = 0;
    Result<std::vector<EventRecord>> events = store->ReadEvents(0, batch, 1000);
    REQUIRE(events.ok());
    for (const EventRecord& e : *events) {
      if (e.type != "batch.plan_reverted") continue;
      ++n;
      CHECK(nlohmann::json::parse(e.data_json)["recovered"] == true);
    }
    return n;
  }

  TempDir dir;
  Logger log{LogLevel::kWarning};
  std::unique_ptr<StateStore> store;
  std::unique_ptr<JournalFiles> files;
  std::unique_ptr<Journal> journal;
  std::unique_ptr<stig::RootfsTarget> target;
};

TEST_CASE("what an ended plan-only batch left on its target is reverted once, with an event") {
  for (BatchState ended : {BatchState::kCompleted, BatchState::kCancelled, BatchState::kFailed}) {
    DYNAMIC_SECTION("plan-only batch " << BatchStateName(ended)) {
      Fixture f;
      int64_t id = f.RunBatch(/*plan_only=*/true, ended);
      REQUIRE(f.target->ReadFile("/etc/plan", 100).ok());
      Result<bool> reverted = RevertEndedPlan(*f.journal, *f.target, "lab");
      REQUIRE(reverted.ok());
      CHECK(*reverted);
      CHECK(f.target->ReadFile("/etc/plan", 100).status().code() == StatusCode::kNotFound);
      CHECK(f.target->Snapshots()->empty());
      CHECK(f.PlanRevertedEvents(id) == 1);
      CHECK_FALSE(*RevertEndedPlan(*f.journal, *f.target, "lab"));  // nothing left: no second event
      CHECK(f.PlanRevertedEvents(id) == 1);
    }
  }
}

TEST_CASE("a plan-only batch still running, and any other batch, keep their changes") {
  Fixture f;
  f.RunBatch(/*plan_only=*/false, BatchState::kCompleted);
  CHECK_FALSE(*RevertEndedPlan(*f.journal, *f.target, "lab"));
  CHECK(f.target->ReadFile("/etc/plan", 100).ok());
  int64_t running = f.RunBatch(/*plan_only=*/true, BatchState::kRunning);  // resumes from its own snapshots
  CHECK_FALSE(*RevertEndedPlan(*f.journal, *f.target, "lab"));
  CHECK(f.target->Snapshots()->size() == 2);
  CHECK(f.PlanRevertedEvents(running) == 0);
  CHECK_FALSE(*RevertEndedPlan(*f.journal, *f.target, "elsewhere"));
}

}  // namespace
}  // namespace temper
