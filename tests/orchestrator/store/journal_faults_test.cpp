// The daemon's durable state under faults (platform/fault_env.h): a small batch of work (submits, events,
// loop steps, a cancel, a restart) runs with the Nth write, or the Nth fsync, failed, for N = 1, 2, ...
// until the work runs through without reaching N. The writes are SQLite's (through the store's VFS
// shim: WAL frames, checkpointed pages) and the journal files' appends, in the order the work makes
// them. After each run the state is opened again as temperd opens it, with the real Env, and must
// hold every call that returned OK exactly as it returned, hold each failed call whole or not at all,
// keep each journal file equal to the store's events of its batch, and take new work; a real temperd
// then serves it over its socket.
#include <fcntl.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "orchestrator/daemon_process.h"
#include "orchestrator/store/journal.h"
#include "orchestrator/store/journal_files.h"
#include "orchestrator/store/state_store.h"
#include "orchestrator/temp_dir.h"
#include "platform/fault_env.h"

namespace temper {
namespace {

using temper::FaultEnv;
using testing::TempDir;

// The journal logs each failed file append as an error: expected here, so kept out of the output.
const Logger& QuietLog() {
  static const int dev_null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  static const Logger log(LogLevel::kError, Logger::Style::kPlain, dev_null);
  return log;
}

// What temperd opens at start, in its order, where it keeps them (DaemonProcess's state_dir).
struct Stack {
  std::unique_ptr<StateStore> store;
  std::unique_ptr<JournalFiles> files;
  std::unique_ptr<Journal> journal;

  Status Open(const TempDir& dir, temper::Env& env) {
    Close();
    TEMPER_ASSIGN_OR_RETURN(store, StateStore::Open(dir / "state/temper.db", env));
    TEMPER_ASSIGN_OR_RETURN(files, JournalFiles::Open(dir / "state/journal", env));
    TEMPER_ASSIGN_OR_RETURN(journal, Journal::Open(*store, *files, QuietLog()));
    return Status::OK();
  }
  void Close() {
    journal.reset();
    files.reset();
    store.reset();
  }
};

constexpr const char* kRuleA = "xccdf_org.ssgproject.content_rule_a";
constexpr const char* kRuleB = "xccdf_org.ssgproject.content_rule_b";

NewBatch Batch(const std::string& name) {
  NewBatch b;
  b.name = name;
  b.target = "lab";
  b.datastream = "ssg-ubuntu2004-ds.xml";
  b.profile = "stig";
  b.rule_ids = {kRuleA, kRuleB};
  return b;
}

NewEvent Event(std::optional<int64_t> batch, std::string type, nlohmann::json data) {
  return NewEvent{.batch_id = batch,
                  .target = batch ? "lab" : "",
                  .rule_id = batch ? kRuleA : "",
                  .role = "worker",
                  .type = std::move(type),
                  .data_json = data.dump(),
                  .usage = {5, 7, 1}};
}

// Every call of the work that returned OK, with what it returned, and how many returned an error.
struct Acknowledged {
  std::map<int64_t, BatchRecord> batches;
  std::vector<EventRecord> events;
  std::map<int64_t, BatchState> batch_states;
  std::map<std::pair<int64_t, std::string>, RuleState> rule_states;
  std::map<int64_t, size_t> attempts;  // per batch
  size_t calls = 0;
  size_t failed_calls = 0;
  bool stopped = false;  // an open failed: temperd would have exited there
};

constexpr size_t kWorkCalls = 9;  // the calls of a run that nothing fails, opens included

// The work: submit a, an event for a, a loop step fixing a's first rule, submit b, a restart, cancel
// b, a daemon-wide event, a's last step completing it. As temperd does it: the store commits, then
// the journal publishes (file line, watchers).
void RunWork(const TempDir& dir, temper::Env& env, Acknowledged& ack) {
  Stack s;
  auto open = [&] {
    ++ack.calls;
    Status opened = s.Open(dir, env);
    if (!opened.ok()) {
      ++ack.failed_calls;
      ack.stopped = true;
    }
    return opened.ok();
  };
  auto submit = [&](const std::string& name) -> std::optional<int64_t> {
    ++ack.calls;
    Result<StateStore::Submitted> r = s.journal->SubmitBatch(Batch(name));
    if (!r.ok()) {
      ++ack.failed_calls;
      return std::nullopt;
    }
    ack.batches[r->batch.id] = r->batch;
    ack.events.push_back(*r->event);
    return r->batch.id;
  };
  auto append = [&](const NewEvent& event) {
    ++ack.calls;
    Result<EventRecord> r = s.journal->Append(event);
    if (!r.ok()) {
      ++ack.failed_calls;
      return;
    }
    ack.events.push_back(*r);
  };
  auto commit = [&](const LoopStep& step) {
    ++ack.calls;
    Result<StepCommitted> r = s.journal->Commit(step);
    if (!r.ok()) {
      ++ack.failed_calls;
      return false;
    }
    ack.events.insert(ack.events.end(), r->events.begin(), r->events.end());
    if (step.attempt) ++ack.attempts[step.batch_id];
    for (const RuleUpdate& u : step.rules) ack.rule_states[{step.batch_id, u.rule_id}] = *u.state;
    if (step.batch_state) ack.batch_states[step.batch_id] = *step.batch_state;
    return true;
  };

  if (!open()) return;
  std::optional<int64_t> a = submit("a");
  if (a) append(Event(a, "tool.call", {{"command", "chmod 0600 /etc/issue"}}));
  if (a) {
    LoopStep step{.batch_id = *a};
    step.rules = {
        RuleUpdate{.rule_id = kRuleA, .state = RuleState::kFixed, .after_verdict = "pass", .add_attempts = 1}};
    step.batch_state = BatchState::kRunning;
    step.attempt = AttemptRecord{.batch_id = *a,
                                 .rule_id = kRuleA,
                                 .number = 1,
                                 .approach = "chmod",
                                 .commands = {"chmod 0600 /etc/issue"},
                                 .verdict = "pass",
                                 .outcome = AttemptOutcome::kKept};
    step.lesson =
        LessonRecord{.rule_id = kRuleA, .group_id = "g", .batch_id = *a, .text = "chmod works", .utility = 0.5};
    step.events = {Event(a, "attempt.finished", {{"outcome", "kept"}})};
    commit(step);
  }
  std::optional<int64_t> b = submit("b");
  // A restart: everything closed (SQLite checkpoints its WAL) and opened again (Reconcile).
  if (!open()) return;
  if (b) {
    ++ack.calls;
    Result<StateStore::Cancelled> c = s.journal->CancelBatch(*b, "operator");
    if (c.ok()) {
      ack.batch_states[*b] = BatchState::kCancelled;
      ack.events.push_back(c->event);
    } else {
      ++ack.failed_calls;
    }
  }
  append(Event(std::nullopt, "daemon.note", {{"note", "daemon-wide"}}));
  if (a) {
    LoopStep step{.batch_id = *a};
    step.rules = {RuleUpdate{.rule_id = kRuleB, .state = RuleState::kEscalated, .detail = "budget spent"}};
    step.batch_state = BatchState::kCompleted;
    step.events = {Event(a, "batch.completed", {{"fixed", 1}})};
    commit(step);
  }
}

// Each line of a journal file as its seq; fails the case on a line that is not a whole event.
std::vector<uint64_t> FileSeqs(const std::string& path) {
  std::string text = testing::ReadFileOrEmpty(path);
  INFO(path);
  REQUIRE((text.empty() || text.back() == '\n'));
  std::vector<uint64_t> seqs;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    INFO(line);
    REQUIRE(j.is_object());
    seqs.push_back(j["seq"].get<uint64_t>());
  }
  return seqs;
}

// Opens the state as temperd does, with the real Env, and checks it against what was acknowledged.
void CheckRecovered(const TempDir& dir, const Acknowledged& ack) {
  Stack s;
  Status opened = s.Open(dir, temper::Env::Default());
  INFO(opened.ToString());
  REQUIRE(opened.ok());
  std::vector<EventRecord> events = *s.store->ReadEvents(0, std::nullopt, 100000);
  std::map<uint64_t, EventRecord> by_seq;
  for (const EventRecord& e : events) {
    CHECK((by_seq.empty() || e.seq > by_seq.rbegin()->first));
    by_seq[e.seq] = e;
  }
  // Nothing acknowledged is lost, nor changed.
  for (const EventRecord& want : ack.events) {
    INFO("acknowledged event " << want.seq << " " << want.type);
    auto it = by_seq.find(want.seq);
    REQUIRE(it != by_seq.end());
    CHECK(it->second.type == want.type);
    CHECK(it->second.batch_id == want.batch_id);
    CHECK(it->second.data_json == want.data_json);
    CHECK(it->second.time == want.time);
  }
  for (const auto& [id, want] : ack.batches) {
    Result<BatchRecord> got = s.store->GetBatch(id);
    INFO("acknowledged batch " << id);
    REQUIRE(got.ok());
    CHECK(got->name == want.name);
    CHECK(got->rules.size() == want.rules.size());
  }
  for (const auto& [id, state] : ack.batch_states) CHECK(s.store->GetBatch(id)->state == state);
  for (const auto& [key, state] : ack.rule_states) {
    BatchRecord batch = *s.store->GetBatch(key.first);
    for (const BatchRuleRecord& r : batch.rules) {
      if (r.rule_id == key.second) CHECK(r.state == state);
    }
  }
  // Whatever failed is whole or absent: a batch with its submitted event, a step with its attempt.
  StateStore::BatchPage page = *s.store->ListBatches(std::nullopt, 1000, {});
  for (const BatchRecord& b : page.batches) {
    INFO("batch " << b.id);
    auto count = [&](std::string_view type) {
      return std::count_if(events.begin(), events.end(),
                           [&](const EventRecord& e) { return e.batch_id == b.id && e.type == type; });
    };
    CHECK(count("batch.submitted") == 1);
    CHECK(s.store->BatchAttempts(b.id)->size() == static_cast<size_t>(count("attempt.finished")));
    CHECK(s.store->BatchLessons(b.id)->size() == static_cast<size_t>(count("attempt.finished")));
    CHECK(static_cast<size_t>(count("attempt.finished")) >= (ack.attempts.count(b.id) ? ack.attempts.at(b.id) : 0));
  }
  // Each journal file holds exactly its batch's committed events, in order, once.
  std::map<std::string, std::vector<uint64_t>> want_files;
  for (const EventRecord& e : events) want_files[s.files->PathFor(e.batch_id)].push_back(e.seq);
  for (const auto& [path, seqs] : want_files) {
    INFO(path);
    CHECK(FileSeqs(path) == seqs);
  }
  for (const auto& entry : std::filesystem::directory_iterator(dir / "state/journal")) {
    INFO(entry.path().string());
    CHECK(want_files.count(entry.path().string()) == 1);
  }
  // And it takes new work.
  Result<StateStore::Submitted> after = s.journal->SubmitBatch(Batch("after"));
  REQUIRE(after.ok());
  CHECK(FileSeqs(s.files->PathFor(after->batch.id)) == std::vector<uint64_t>{after->event->seq});
}

// A real temperd on the recovered state serves exactly the events the store holds.
void CheckServed(const TempDir& dir) {
  std::vector<uint64_t> stored;
  {
    std::unique_ptr<StateStore> store = *StateStore::Open(dir / "state/temper.db");
    std::vector<EventRecord> events = *store->ReadEvents(0, std::nullopt, 100000);
    for (const EventRecord& e : events) stored.push_back(e.seq);
  }
  testing::DaemonProcess daemon(dir);
  Status started = daemon.Start();
  INFO(started.ToString());
  REQUIRE(started.ok());
  std::vector<uint64_t> served;
  for (const auto& e : testing::ReadJournal(*daemon.Stub(), "")) served.push_back(e.seq());
  CHECK(served == stored);
  CHECK(daemon.Stop() == 0);
}

// The journal files alone: a store with three events of batch 1, and files through a FaultEnv.
struct FilesFixture {
  TempDir dir;
  FaultEnv env;
  std::unique_ptr<StateStore> store = *StateStore::Open(dir / "t.db");
  std::unique_ptr<JournalFiles> files = *JournalFiles::Open(dir / "journal", env);
  std::vector<EventRecord> events;

  FilesFixture() {
    events.push_back(*store->SubmitBatch(Batch("a"))->event);
    for (int i = 0; i < 2; ++i) events.push_back(*store->AppendEvent(Event(1, "tool.call", {{"i", i}})));
  }
  std::vector<uint64_t> Seqs() const {
    std::vector<uint64_t> out;
    for (const EventRecord& e : events) out.push_back(e.seq);
    return out;
  }
};

TEST_CASE("a failed journal append is written before the file's next line, its torn half cut first", "[faults]") {
  FilesFixture f;
  REQUIRE(f.files->Append(f.events[0]).ok());
  f.env.FailNth(FaultEnv::Op::kWrite, 1);
  Status failed = f.files->Append(f.events[1]);
  CHECK(failed.code() == StatusCode::kIOError);
  std::string torn = testing::ReadFileOrEmpty(f.files->PathFor(1));
  CHECK(torn.back() != '\n');  // half a line: what a full disk leaves
  REQUIRE(f.files->Append(f.events[2]).ok());
  CHECK(FileSeqs(f.files->PathFor(1)) == f.Seqs());
  CHECK(f.files->Reconcile(*f.store)->appended == 0);
}

TEST_CASE("a journal line whose fsync failed is not written twice", "[faults]") {
  FilesFixture f;
  REQUIRE(f.files->Append(f.events[0]).ok());
  f.env.FailNth(FaultEnv::Op::kSync, 1);
  CHECK(f.files->Append(f.events[1]).code() == StatusCode::kIOError);
  REQUIRE(f.files->Append(f.events[2]).ok());
  CHECK(FileSeqs(f.files->PathFor(1)) == f.Seqs());
}

TEST_CASE("a journal file whose appends keep failing waits for Reconcile, which completes it", "[faults]") {
  FilesFixture f;
  REQUIRE(f.files->Append(f.events[0]).ok());
  f.env.FailFromNth(FaultEnv::Op::kWrite, 1);
  // The same committed event offered again and again stands for a long outage's events.
  for (size_t i = 0; i < JournalFiles::kMaxPendingEvents; ++i) {
    REQUIRE(f.files->Append(f.events[1]).code() == StatusCode::kIOError);
  }
  Status full = f.files->Append(f.events[1]);
  CHECK(full.code() == StatusCode::kUnavailable);
  CHECK_THAT(full.message(), Catch::Contains("start-up"));
  f.env.FailNth(FaultEnv::Op::kWrite, 0);
  CHECK(f.files->Append(f.events[2]).code() == StatusCode::kUnavailable);  // withheld: no later line hides them
  CHECK(f.files->Reconcile(*f.store)->appended == 2);
  CHECK(FileSeqs(f.files->PathFor(1)) == f.Seqs());
  REQUIRE(f.files->Append(*f.store->AppendEvent(Event(1, "tool.call", {{"i", 9}}))).ok());
  CHECK(FileSeqs(f.files->PathFor(1)).size() == 4);
}

// Runs the work failing the Nth `op` for N = 1, 2, ... and checks each run (and a real temperd on
// it for every `serve_every`th N: a start costs a second); returns what each fault hit, in order.
std::vector<std::string> FailEveryNth(FaultEnv::Op op, uint64_t serve_every) {
  std::vector<std::string> hit;
  for (uint64_t n = 1;; ++n) {
    TempDir dir;
    std::filesystem::create_directories(dir / "state");
    FaultEnv env;
    env.FailNth(op, n);
    Acknowledged ack;
    RunWork(dir, env, ack);
    const bool fired = env.fired();
    INFO("N = " << n << ": " << (fired ? env.fired_at() : "the work ran through"));
    INFO("failed calls: " << ack.failed_calls);
    CheckRecovered(dir, ack);
    if (n % serve_every == 1) CheckServed(dir);
    if (!fired) {
      CHECK(ack.calls == kWorkCalls);
      CHECK(ack.failed_calls == 0);
      return hit;
    }
    hit.push_back(env.fired_at());
    // A failed call fails alone: the store and the files take the next call without a restart.
    CHECK(ack.failed_calls <= 1);
    REQUIRE(n < 1000);
  }
}

// How many of `hit` name a file ending in `suffix`.
size_t Hits(const std::vector<std::string>& hit, const std::string& suffix) {
  return std::count_if(hit.begin(), hit.end(), [&](const std::string& h) {
    return h.find(suffix + ")") != std::string::npos || h.find(suffix + " to ") != std::string::npos;
  });
}

TEST_CASE("failing the Nth write, at every N of a small batch, loses nothing committed and the daemon recovers",
          "[faults]") {
  std::vector<std::string> hit = FailEveryNth(FaultEnv::Op::kWrite, 8);
  WARN("the work makes " << hit.size() << " writes; each was failed in turn");
  // Each kind of file took faults: SQLite's WAL (frames), its database (checkpoints), the journal files.
  CHECK(Hits(hit, "temper.db-wal") > 10);
  CHECK(Hits(hit, "temper.db") > 5);
  CHECK(Hits(hit, ".jsonl") >= 5);
  CHECK(Hits(hit, "daemon.jsonl") >= 1);
}

TEST_CASE("failing the Nth fsync, at every N of a small batch, loses nothing committed and the daemon recovers",
          "[faults]") {
  std::vector<std::string> hit = FailEveryNth(FaultEnv::Op::kSync, 4);
  WARN("the work makes " << hit.size() << " fsyncs; each was failed in turn");
  CHECK(Hits(hit, "temper.db-wal") > 5);
  CHECK(Hits(hit, "temper.db") >= 1);
  CHECK(Hits(hit, ".jsonl") >= 5);
}

}  // namespace
}  // namespace temper
