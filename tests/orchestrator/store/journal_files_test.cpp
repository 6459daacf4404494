#include "orchestrator/store/journal_files.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "orchestrator/temp_dir.h"

namespace temper {
namespace {

using testing::ReadFileOrEmpty;
using testing::TempDir;

std::vector<nlohmann::json> Lines(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::string text = ReadFileOrEmpty(path);
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    REQUIRE(end != std::string::npos);
    out.push_back(nlohmann::json::parse(text.substr(start, end - start)));
    start = end + 1;
  }
  return out;
}

struct Fixture {
  TempDir dir;
  std::unique_ptr<StateStore> store = *StateStore::Open(dir / "t.db");
  std::unique_ptr<JournalFiles> files = *JournalFiles::Open(dir / "journal");

  EventRecord Commit(std::optional<int64_t> batch, std::string type) {
    return *store->AppendEvent(NewEvent{.batch_id = batch,
                                        .rule_id = "r",
                                        .role = "worker",
                                        .type = std::move(type),
                                        .data_json = R"({"k":1})",
                                        .usage = {3, 4, 1}});
  }
};

NewBatch Batch() {
  return NewBatch{.target = "lab", .datastream = "/ds.xml", .profile = "stig", .rule_ids = {"xccdf_a_rule_b"}};
}

TEST_CASE("each event becomes one JSON line in its batch's file, with data as an object") {
  Fixture f;
  REQUIRE(f.store->SubmitBatch(Batch()).ok());
  EventRecord e = f.Commit(1, "tool.call");
  REQUIRE(f.files->Append(e).ok());
  EventRecord d = f.Commit(std::nullopt, "daemon.note");
  REQUIRE(f.files->Append(d).ok());
  auto lines = Lines(f.files->PathFor(1));
  REQUIRE(lines.size() == 1);
  CHECK(lines[0]["seq"] == e.seq);
  CHECK(lines[0]["batch_id"] == "1");
  CHECK(lines[0]["type"] == "tool.call");
  CHECK(lines[0]["data"]["k"] == 1);
  CHECK(lines[0]["usage"]["cached_prompt_tokens"] == 1);
  auto daemon = Lines(f.dir / "journal/daemon.jsonl");
  REQUIRE(daemon.size() == 1);
  CHECK(daemon[0]["batch_id"].is_null());
}

TEST_CASE("reconcile appends exactly the committed events a crash kept out of the files") {
  Fixture f;
  REQUIRE(f.store->SubmitBatch(Batch()).ok());  // seq 1, never appended: the crash case
  EventRecord second = f.Commit(1, "a");
  EventRecord third = f.Commit(1, "b");
  REQUIRE(f.files->Append(*f.store->ReadEvents(0, std::nullopt, 1)->begin()).ok());
  REQUIRE(f.files->Append(second).ok());
  f.Commit(std::nullopt, "c");
  CHECK(f.files->Reconcile(*f.store)->appended == 2);  // third, and the daemon-wide one
  auto lines = Lines(f.files->PathFor(1));
  REQUIRE(lines.size() == 3);
  CHECK(lines[2]["seq"] == third.seq);
  CHECK(f.files->Reconcile(*f.store)->appended == 0);  // idempotent
  CHECK(Lines(f.files->PathFor(1)).size() == 3);
}

TEST_CASE("a torn last line is cut and its event re-appended") {
  Fixture f;
  REQUIRE(f.store->SubmitBatch(Batch()).ok());
  EventRecord second = f.Commit(1, "a");
  auto all = *f.store->ReadEvents(0, std::nullopt, 10);
  std::string first_line = JournalFiles::ToJsonLine(all[0]) + "\n";
  std::string torn = JournalFiles::ToJsonLine(second).substr(0, 20);
  f.dir.Write("journal/batch-1.jsonl", first_line + torn);
  auto reconciled = f.files->Reconcile(*f.store);
  REQUIRE(reconciled.ok());
  CHECK(reconciled->appended == 1);
  REQUIRE(reconciled->repairs.size() == 1);
  CHECK(reconciled->repairs[0].path == f.files->PathFor(1));
  CHECK(reconciled->repairs[0].torn_bytes == 20);
  CHECK(reconciled->repairs[0].torn_offset == first_line.size());
  auto lines = Lines(f.files->PathFor(1));
  REQUIRE(lines.size() == 2);
  CHECK(lines[1]["seq"] == second.seq);
}

TEST_CASE("a file that is nothing but a torn line is emptied and rebuilt from the store") {
  Fixture f;
  REQUIRE(f.store->SubmitBatch(Batch()).ok());
  f.dir.Write("journal/batch-1.jsonl", "{\"seq\":1,\"ty");
  auto reconciled = f.files->Reconcile(*f.store);
  REQUIRE(reconciled.ok());
  CHECK(reconciled->appended == 1);
  CHECK(reconciled->repairs.at(0).torn_offset == 0);
  CHECK(Lines(f.files->PathFor(1)).size() == 1);
}

TEST_CASE(
    "lines that are not events are reported with line and offset, left in place, and the events after them appended") {
  Fixture f;
  REQUIRE(f.store->SubmitBatch(Batch()).ok());
  EventRecord second = f.Commit(1, "a");
  auto all = *f.store->ReadEvents(0, std::nullopt, 10);
  const std::string first_line = JournalFiles::ToJsonLine(all[0]) + "\n";
  const std::string text = first_line + "not json\n" + "{\"no\": \"seq\"}\n";
  f.dir.Write("journal/batch-1.jsonl", text);
  auto reconciled = f.files->Reconcile(*f.store);
  REQUIRE(reconciled.ok());
  CHECK(reconciled->appended == 1);  // `second`: the file's last event was seq 1
  REQUIRE(reconciled->repairs.size() == 1);
  const auto& problems = reconciled->repairs[0].problems;
  REQUIRE(problems.size() == 2);
  CHECK(problems[0].line == 2);
  CHECK(problems[0].offset == first_line.size());
  CHECK(problems[0].bytes == 8);
  CHECK_THAT(problems[0].what, Catch::StartsWith("not JSON: "));
  CHECK(problems[1].line == 3);
  CHECK(problems[1].what == "not a journal event (no positive top-level \"seq\")");
  const std::string after = ReadFileOrEmpty(f.files->PathFor(1));
  CHECK(after.rfind(text, 0) == 0);  // nothing before the append changed
  CHECK(nlohmann::json::parse(after.substr(text.size()))["seq"] == second.seq);
}

TEST_CASE("a line of several megabytes is read whole, and its seq counts") {
  Fixture f;
  REQUIRE(f.store->SubmitBatch(Batch()).ok());
  auto all = *f.store->ReadEvents(0, std::nullopt, 10);
  EventRecord big = all[0];
  big.data_json = nlohmann::json{{"text", std::string(5 << 20, 'x')}}.dump();  // as an older temperd wrote it
  f.dir.Write("journal/batch-1.jsonl", JournalFiles::ToJsonLine(big) + "\n");
  EventRecord second = f.Commit(1, "a");
  auto reconciled = f.files->Reconcile(*f.store);
  REQUIRE(reconciled.ok());
  CHECK(reconciled->appended == 1);
  REQUIRE(reconciled->repairs.size() == 1);  // reported for its size alone
  CHECK(reconciled->repairs[0].longest_line == JournalFiles::ToJsonLine(big).size());
  CHECK(reconciled->repairs[0].problem_count == 0);
  CHECK(Lines(f.files->PathFor(1)).back()["seq"] == second.seq);
}

}  // namespace
}  // namespace temper
